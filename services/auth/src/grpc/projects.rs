//! The `Projects` gRPC API: each method turns the request into a domain call and the result
//! back into proto messages.

use std::sync::Arc;

use latchkey_proto::auth::v1 as pb;
use latchkey_shared::clock::SharedClock;
use latchkey_shared::grpc::Context;
use latchkey_shared::headers::AccessType;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::domain::keys::{self, Access, NewKeys};
use crate::domain::settings::Settings;
use crate::domain::{projects, signing};
use crate::error::Error;
use crate::store::{KeyKind, KeySet, Project, ProjectStore};

pub struct Projects {
    store: Arc<dyn ProjectStore>,
    clock: SharedClock,
}

impl Projects {
    pub fn new(store: Arc<dyn ProjectStore>, clock: SharedClock) -> Self {
        Self { store, clock }
    }
}

/// Project of the verified access context; admin routes also require the admin access type.
fn admin_project<T>(request: &Request<T>) -> Result<Uuid, Status> {
    let ctx = Context::read(request.metadata())?;
    if ctx.access_type != AccessType::Admin {
        return Err(Status::permission_denied("admin access required"));
    }
    Ok(ctx.project_id)
}

/// Project creation and listing span projects, so only components may ask.
fn operator_only<T>(request: &Request<T>) -> Result<(), Status> {
    if latchkey_shared::grpc::is_internal(request.metadata()) {
        Ok(())
    } else {
        Err(Status::permission_denied(
            "operator calls need the internal service token",
        ))
    }
}

fn key_set_to_pb(set: &KeySet) -> pb::ApiKey {
    let tail = |t: &Option<String>| {
        t.as_ref().map(|l| pb::KeyTail {
            last_four: l.clone(),
        })
    };
    pb::ApiKey {
        id: set.id.to_string(),
        description: set.description.clone(),
        created_at_millis: set.created_at_millis,
        expires_at_millis: set.expires_at_millis,
        revoked: set.revoked_at_millis.is_some(),
        publishable_client_key: tail(&set.client_key_last_four),
        secret_server_key: tail(&set.server_key_last_four),
        super_secret_admin_key: tail(&set.admin_key_last_four),
    }
}

fn created_keys_to_pb(keys: NewKeys) -> pb::CreatedApiKey {
    pb::CreatedApiKey {
        key: Some(key_set_to_pb(&keys.key_set)),
        publishable_client_key: keys.publishable_client_key,
        secret_server_key: keys.secret_server_key,
        super_secret_admin_key: keys.super_secret_admin_key,
    }
}

#[tonic::async_trait]
impl pb::projects_server::Projects for Projects {
    #[tracing::instrument(name = "auth.check_access", skip_all)]
    async fn check_access(
        &self,
        request: Request<pb::CheckAccessRequest>,
    ) -> Result<Response<pb::CheckAccessResponse>, Status> {
        let req = request.into_inner();
        let kind = match req.access_type() {
            pb::AccessType::Client => KeyKind::Client,
            pb::AccessType::Server => KeyKind::Server,
            pb::AccessType::Admin => KeyKind::Admin,
            pb::AccessType::Unspecified => {
                return Err(Error::Invalid("access_type is required".into()).into())
            }
        };
        let outcome = match Uuid::parse_str(&req.project_id) {
            Err(_) => Access::ProjectNotFound,
            Ok(project) => {
                let hash = if req.key_sha256.is_empty() {
                    latchkey_shared::crypto::hash_secret(&req.key)
                } else {
                    req.key_sha256.to_ascii_lowercase()
                };
                let now = self.clock.now_millis();
                keys::check_hash(&*self.store, project, kind, &hash, now).await?
            }
        };
        let outcome = match outcome {
            Access::Granted => pb::AccessOutcome::Granted,
            Access::ProjectNotFound => pb::AccessOutcome::ProjectNotFound,
            Access::KeyInvalid => pb::AccessOutcome::KeyInvalid,
        };
        Ok(Response::new(pb::CheckAccessResponse {
            outcome: outcome.into(),
        }))
    }

    #[tracing::instrument(name = "auth.get_jwks", skip_all)]
    async fn get_jwks(
        &self,
        request: Request<pb::GetJwksRequest>,
    ) -> Result<Response<pb::Jwks>, Status> {
        let req = request.into_inner();
        let project =
            Uuid::parse_str(&req.project_id).map_err(|_| Error::ProjectNotFound(Uuid::nil()))?;
        projects::get(&*self.store, project).await?;
        let keys = projects::published_keys(&*self.store, &*self.clock, project)
            .await?
            .into_iter()
            .filter(|k| match k.audience.as_str() {
                signing::AUDIENCE_RESTRICTED => req.include_restricted,
                signing::AUDIENCE_ANONYMOUS => req.include_anonymous,
                _ => true,
            })
            .map(jwk)
            .collect();
        Ok(Response::new(pb::Jwks { keys }))
    }

    #[tracing::instrument(name = "auth.rotate_signing_keys", skip_all)]
    async fn rotate_signing_keys(
        &self,
        request: Request<pb::Empty>,
    ) -> Result<Response<pb::Jwks>, Status> {
        let project = admin_project(&request)?;
        let keys = projects::rotate_signing_keys(&*self.store, &*self.clock, project)
            .await?
            .into_iter()
            .map(jwk)
            .collect();
        Ok(Response::new(pb::Jwks { keys }))
    }

    async fn get_current_project(
        &self,
        request: Request<pb::Empty>,
    ) -> Result<Response<pb::CurrentProject>, Status> {
        let ctx = Context::read(request.metadata())?;
        let (project, settings) = projects::get(&*self.store, ctx.project_id).await?;
        Ok(Response::new(pb::CurrentProject {
            id: project.id.to_string(),
            display_name: project.display_name,
            config_json: settings.public_config().to_string(),
        }))
    }

    async fn get_settings(
        &self,
        request: Request<pb::Empty>,
    ) -> Result<Response<pb::Settings>, Status> {
        let project = admin_project(&request)?;
        let (project, settings) = projects::get(&*self.store, project).await?;
        Ok(Response::new(settings_pb(&project, &settings)))
    }

    #[tracing::instrument(name = "auth.update_settings", skip_all)]
    async fn update_settings(
        &self,
        request: Request<pb::UpdateSettingsRequest>,
    ) -> Result<Response<pb::Settings>, Status> {
        let project = admin_project(&request)?;
        let patch: serde_json::Value = serde_json::from_str(&request.get_ref().patch_json)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let (project, settings) = projects::update_settings(&*self.store, project, &patch).await?;
        Ok(Response::new(settings_pb(&project, &settings)))
    }

    async fn list_api_keys(
        &self,
        request: Request<pb::Empty>,
    ) -> Result<Response<pb::ApiKeyList>, Status> {
        let project = admin_project(&request)?;
        let sets = self.store.key_sets(project).await.map_err(Error::from)?;
        Ok(Response::new(pb::ApiKeyList {
            items: sets.iter().map(key_set_to_pb).collect(),
        }))
    }

    #[tracing::instrument(name = "auth.create_api_key", skip_all)]
    async fn create_api_key(
        &self,
        request: Request<pb::CreateApiKeyRequest>,
    ) -> Result<Response<pb::CreatedApiKey>, Status> {
        let project = admin_project(&request)?;
        let req = request.into_inner();
        let kinds = [
            req.has_publishable_client_key,
            req.has_secret_server_key,
            req.has_super_secret_admin_key,
        ];
        let keys = keys::create(
            &*self.store,
            project,
            &req.description,
            req.expires_at_millis,
            kinds,
            self.clock.now_millis(),
        )
        .await?;
        Ok(Response::new(created_keys_to_pb(keys)))
    }

    #[tracing::instrument(name = "auth.update_api_key", skip_all)]
    async fn update_api_key(
        &self,
        request: Request<pb::UpdateApiKeyRequest>,
    ) -> Result<Response<pb::ApiKey>, Status> {
        let project = admin_project(&request)?;
        let req = request.into_inner();
        let id = Uuid::parse_str(&req.id).map_err(|_| Error::KeySetNotFound(Uuid::nil()))?;
        let set = keys::update(
            &*self.store,
            project,
            id,
            req.description.as_deref(),
            req.revoked == Some(true),
            self.clock.now_millis(),
        )
        .await?;
        Ok(Response::new(key_set_to_pb(&set)))
    }

    async fn create_project(
        &self,
        request: Request<pb::CreateProjectRequest>,
    ) -> Result<Response<pb::CreatedProject>, Status> {
        operator_only(&request)?;
        let created = projects::create(
            &*self.store,
            &*self.clock,
            &request.into_inner().display_name,
        )
        .await?;
        Ok(Response::new(created_project_to_pb(created)))
    }

    async fn get_mail_context(
        &self,
        request: Request<pb::MailContextRequest>,
    ) -> Result<Response<pb::MailContext>, Status> {
        let ctx = Context::read(request.metadata())?;
        let context = mail_context(
            &*self.store,
            ctx.project_id,
            &request.get_ref().callback_url,
        )
        .await?;
        Ok(Response::new(context))
    }

    async fn get_internal_settings(
        &self,
        request: Request<pb::Empty>,
    ) -> Result<Response<pb::Settings>, Status> {
        operator_only(&request)?;
        let ctx = Context::read(request.metadata())?;
        let (project, settings) = projects::get(&*self.store, ctx.project_id).await?;
        Ok(Response::new(settings_pb(&project, &settings)))
    }

    async fn list_projects(
        &self,
        request: Request<pb::Empty>,
    ) -> Result<Response<pb::ProjectList>, Status> {
        operator_only(&request)?;
        let items = self
            .store
            .projects()
            .await
            .map_err(Error::from)?
            .into_iter()
            .map(|p| pb::ProjectSummary {
                id: p.id.to_string(),
                display_name: p.display_name,
                created_at_millis: p.created_at_millis,
            })
            .collect();
        Ok(Response::new(pb::ProjectList { items }))
    }
}

/// The mail context of the caller's project.
async fn mail_context(
    store: &dyn ProjectStore,
    project: Uuid,
    url: &str,
) -> Result<pb::MailContext, Error> {
    let (project, settings) = projects::get(store, project).await?;
    let domains: Vec<String> = settings.domains.iter().map(|d| d.domain.clone()).collect();
    Ok(pb::MailContext {
        project_name: project.display_name,
        callback_url_trusted: latchkey_shared::urls::is_trusted(
            url,
            settings.allow_localhost,
            &domains,
        ),
        smtp_url: settings.email.as_ref().map(|e| e.smtp_url.clone()),
        from: settings.email.as_ref().map(|e| e.from.clone()),
    })
}

pub fn created_project_to_pb(created: projects::Created) -> pb::CreatedProject {
    pb::CreatedProject {
        project_id: created.project.id.to_string(),
        publishable_client_key: created.keys.publishable_client_key.unwrap_or_default(),
        secret_server_key: created.keys.secret_server_key.unwrap_or_default(),
        super_secret_admin_key: created.keys.super_secret_admin_key.unwrap_or_default(),
    }
}

/// The admin view of the settings with the version they were read at.
fn jwk(k: crate::store::SigningKey) -> pb::Jwk {
    pb::Jwk {
        kid: k.kid,
        x: k.public_x,
        y: k.public_y,
        audience: k.audience,
        created_at_millis: k.created_at_millis,
    }
}

fn settings_pb(project: &Project, settings: &Settings) -> pb::Settings {
    pb::Settings {
        json: settings
            .admin_view(project.id, &project.display_name)
            .to_string(),
        version: project.settings_version,
    }
}
