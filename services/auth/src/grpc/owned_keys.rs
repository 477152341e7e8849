//! `OwnedApiKeys`: API keys of users and teams.

use std::sync::Arc;

use latchkey_proto::auth::v1 as pb;
use latchkey_shared::grpc::Context;
use serde_json::Value;
use tonic::{Request, Response, Status};

use super::users::uuid;
use crate::app::App;
use crate::domain::owned_keys::{self, Kind, NewKey};
use crate::error::Error;
use crate::store::owned_keys::Owner;

pub struct OwnedApiKeys {
    app: Arc<App>,
}

impl OwnedApiKeys {
    pub fn new(app: Arc<App>) -> Self {
        Self { app }
    }
}

fn kind(text: &str) -> Result<Kind, Error> {
    match text {
        "user" => Ok(Kind::User),
        "team" => Ok(Kind::Team),
        _ => Err(Error::Invalid("kind must be user or team".into())),
    }
}

fn owner(owner: Option<&pb::OwnedKeyOwner>) -> Result<Owner, Error> {
    use pb::owned_key_owner::Owner as Pb;
    match owner.and_then(|o| o.owner.as_ref()) {
        Some(Pb::UserId(id)) => Ok(Owner::User(uuid(id, "user_id")?)),
        Some(Pb::TeamId(id)) => Ok(Owner::Team(uuid(id, "team_id")?)),
        None => Err(Error::Invalid(
            "an owner (user_id or team_id) is required".into(),
        )),
    }
}

fn document(key: Value) -> Response<pb::OwnedKeyJson> {
    Response::new(pb::OwnedKeyJson {
        json: key.to_string(),
    })
}

#[tonic::async_trait]
impl pb::owned_api_keys_server::OwnedApiKeys for OwnedApiKeys {
    #[tracing::instrument(name = "auth.create_owned_key", skip_all)]
    async fn create_owned_key(
        &self,
        request: Request<pb::CreateOwnedKeyRequest>,
    ) -> Result<Response<pb::OwnedKeyJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let new = NewKey {
            owner: owner(req.owner.as_ref())?,
            description: req.description,
            expires_at_millis: req.expires_at_millis,
            is_public: req.is_public,
        };
        Ok(document(owned_keys::create(&self.app, &ctx, new).await?))
    }

    #[tracing::instrument(name = "auth.list_owned_keys", skip_all)]
    async fn list_owned_keys(
        &self,
        request: Request<pb::OwnedKeyOwner>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let owner = owner(Some(request.get_ref()))?;
        let keys = owned_keys::list(&self.app, &ctx, owner).await?;
        Ok(Response::new(pb::JsonList {
            items_json: keys.iter().map(Value::to_string).collect(),
        }))
    }

    #[tracing::instrument(name = "auth.get_owned_key", skip_all)]
    async fn get_owned_key(
        &self,
        request: Request<pb::OwnedKeyRef>,
    ) -> Result<Response<pb::OwnedKeyJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.get_ref();
        let key = owned_keys::get(&self.app, &ctx, kind(&req.kind)?, uuid(&req.id, "id")?).await?;
        Ok(document(key))
    }

    #[tracing::instrument(name = "auth.update_owned_key", skip_all)]
    async fn update_owned_key(
        &self,
        request: Request<pb::UpdateOwnedKeyRequest>,
    ) -> Result<Response<pb::OwnedKeyJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let (kind, id) = (kind(&req.kind)?, uuid(&req.id, "id")?);
        let key =
            owned_keys::update(&self.app, &ctx, kind, id, req.description, req.revoke).await?;
        Ok(document(key))
    }

    #[tracing::instrument(name = "auth.check_owned_key", skip_all)]
    async fn check_owned_key(
        &self,
        request: Request<pb::CheckOwnedKeyRequest>,
    ) -> Result<Response<pb::OwnedKeyJson>, Status> {
        let ctx = Context::read_server(request.metadata())?;
        let req = request.get_ref();
        let key = owned_keys::check(&self.app, &ctx, kind(&req.kind)?, &req.api_key).await?;
        Ok(document(key))
    }
}
