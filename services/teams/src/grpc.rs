//! The `Teams` gRPC API: requests become domain calls, results become proto messages.

use std::sync::Arc;

use latchkey_proto::teams::v1 as pb;
use latchkey_shared::grpc::Context;
use serde_json::Value;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::domain::permissions::Scope;
use crate::domain::teams::Teams;
use crate::domain::{definitions, invitations};
use crate::error::Error;

pub struct Service(pub Arc<Teams>);

fn uuid(text: &str, what: &str) -> Result<Uuid, Error> {
    Uuid::parse_str(text).map_err(|_| Error::Invalid(format!("{what} is not a UUID")))
}

fn optional(text: Option<&str>, what: &str) -> Result<Option<Uuid>, Error> {
    text.map(|t| uuid(t, what)).transpose()
}

fn body(text: &str) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|e| Error::Invalid(e.to_string()))
}

fn list(items: Vec<Value>) -> Response<pb::JsonList> {
    Response::new(pb::JsonList {
        items_json: items.iter().map(Value::to_string).collect(),
    })
}

fn team(json: Value) -> Response<pb::TeamJson> {
    Response::new(pb::TeamJson {
        json: json.to_string(),
    })
}

fn empty() -> Response<pb::Empty> {
    Response::new(pb::Empty {})
}

#[tonic::async_trait]
impl pb::teams_server::Teams for Service {
    async fn list_teams(
        &self,
        request: Request<pb::ListTeamsRequest>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let user = optional(request.get_ref().user_id.as_deref(), "user_id")?;
        Ok(list(self.0.list(&ctx, user).await?))
    }

    #[tracing::instrument(name = "teams.create", skip_all)]
    async fn create_team(
        &self,
        request: Request<pb::CreateTeamRequest>,
    ) -> Result<Response<pb::TeamJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let creator = optional(req.creator_user_id.as_deref(), "creator_user_id")?;
        Ok(team(
            self.0.create(&ctx, &body(&req.body_json)?, creator).await?,
        ))
    }

    async fn get_teams(
        &self,
        request: Request<pb::TeamIds>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let ids = request
            .get_ref()
            .team_ids
            .iter()
            .map(|t| uuid(t, "team_ids"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(list(self.0.get_many(&ctx, &ids).await?))
    }

    async fn get_team(
        &self,
        request: Request<pb::TeamRef>,
    ) -> Result<Response<pb::TeamJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        let id = uuid(&request.get_ref().team_id, "team_id")?;
        Ok(team(self.0.get(&ctx, id).await?))
    }

    #[tracing::instrument(name = "teams.update", skip_all)]
    async fn update_team(
        &self,
        request: Request<pb::UpdateTeamRequest>,
    ) -> Result<Response<pb::TeamJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let id = uuid(&req.team_id, "team_id")?;
        Ok(team(self.0.update(&ctx, id, &body(&req.body_json)?).await?))
    }

    #[tracing::instrument(name = "teams.delete", skip_all)]
    async fn delete_team(
        &self,
        request: Request<pb::TeamRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let id = uuid(&request.get_ref().team_id, "team_id")?;
        self.0.delete(&ctx, id).await?;
        Ok(empty())
    }

    async fn add_member(
        &self,
        request: Request<pb::MemberRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let (team, user) = member(request.get_ref())?;
        self.0.add_member(&ctx, team, user).await?;
        Ok(empty())
    }

    async fn remove_member(
        &self,
        request: Request<pb::MemberRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let (team, user) = member(request.get_ref())?;
        self.0.remove_member(&ctx, team, user).await?;
        Ok(empty())
    }

    #[tracing::instrument(name = "teams.remove_user", skip_all)]
    async fn remove_user(
        &self,
        request: Request<pb::UserRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read_server(request.metadata())?;
        let user = uuid(&request.get_ref().user_id, "user_id")?;
        self.0
            .store
            .remove_user(ctx.project_id, user)
            .await
            .map_err(Error::from)?;
        Ok(empty())
    }

    async fn check_member(
        &self,
        request: Request<pb::MemberRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let (team, user) = member(request.get_ref())?;
        self.0.check_member(&ctx, team, user).await?;
        Ok(empty())
    }

    async fn teams_of_user(
        &self,
        request: Request<pb::UserRef>,
    ) -> Result<Response<pb::TeamIds>, Status> {
        let ctx = Context::read(request.metadata())?;
        let user = uuid(&request.get_ref().user_id, "user_id")?;
        let teams = self
            .0
            .store
            .teams(ctx.project_id, Some(user))
            .await
            .map_err(Error::from)?;
        Ok(Response::new(pb::TeamIds {
            team_ids: teams.iter().map(|t| t.id.to_string()).collect(),
        }))
    }

    async fn members_of_team(
        &self,
        request: Request<pb::MembersRequest>,
    ) -> Result<Response<pb::UserIds>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.get_ref();
        let team = uuid(&req.team_id, "team_id")?;
        let start = latchkey_shared::db::search::Start::parse(
            req.from_user_id.as_deref(),
            req.include_from,
            req.desc,
        )
        .map_err(|_| Error::Invalid("from_user_id is not a UUID".into()))?;
        let limit = (req.limit > 0).then_some(req.limit as usize);
        self.0.get(&ctx, team).await?;
        let users = self
            .0
            .store
            .members_page(ctx.project_id, team, start, limit)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(pb::UserIds {
            user_ids: users.iter().map(Uuid::to_string).collect(),
        }))
    }

    async fn list_member_profiles(
        &self,
        request: Request<pb::ListProfilesRequest>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let team = optional(request.get_ref().team_id.as_deref(), "team_id")?;
        let user = optional(request.get_ref().user_id.as_deref(), "user_id")?;
        Ok(list(self.0.list_profiles(&ctx, team, user).await?))
    }

    async fn get_member_profile(
        &self,
        request: Request<pb::MemberRef>,
    ) -> Result<Response<pb::TeamJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        let (team, user) = member(request.get_ref())?;
        Ok(self::team(self.0.get_profile(&ctx, team, user).await?))
    }

    async fn update_member_profile(
        &self,
        request: Request<pb::UpdateProfileRequest>,
    ) -> Result<Response<pb::TeamJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let (team, user) = (
            uuid(&req.team_id, "team_id")?,
            uuid(&req.user_id, "user_id")?,
        );
        Ok(self::team(
            self.0
                .update_profile(&ctx, team, user, &body(&req.body_json)?)
                .await?,
        ))
    }

    async fn list_project_permissions(
        &self,
        request: Request<pb::ListProjectPermissionsRequest>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let user = optional(req.user_id.as_deref(), "user_id")?;
        Ok(list(
            self.0
                .list_project_permissions(&ctx, user, req.permission_id.as_deref(), req.recursive)
                .await?,
        ))
    }

    async fn grant_project_permission(
        &self,
        request: Request<pb::ProjectPermissionRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        self.0
            .grant_project(&ctx, uuid(&req.user_id, "user_id")?, &req.permission_id)
            .await?;
        Ok(empty())
    }

    async fn revoke_project_permission(
        &self,
        request: Request<pb::ProjectPermissionRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        self.0
            .revoke_project(&ctx, uuid(&req.user_id, "user_id")?, &req.permission_id)
            .await?;
        Ok(empty())
    }

    async fn grant_user_defaults(
        &self,
        request: Request<pb::UserRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        self.0
            .grant_user_defaults(&ctx, uuid(&request.get_ref().user_id, "user_id")?)
            .await?;
        Ok(empty())
    }

    async fn list_definitions(
        &self,
        request: Request<pb::DefinitionScope>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = admin(request.metadata())?;
        let scope = scope(&request.get_ref().scope)?;
        Ok(list(
            definitions::list(&self.0.store, ctx.project_id, scope).await?,
        ))
    }

    async fn create_definition(
        &self,
        request: Request<pb::DefinitionWrite>,
    ) -> Result<Response<pb::TeamJson>, Status> {
        let ctx = admin(request.metadata())?;
        let req = request.into_inner();
        let change = definitions::Change::parse(&body(&req.body_json)?, true)?;
        Ok(team(
            definitions::create(&self.0.store, ctx.project_id, scope(&req.scope)?, change).await?,
        ))
    }

    async fn update_definition(
        &self,
        request: Request<pb::DefinitionWrite>,
    ) -> Result<Response<pb::TeamJson>, Status> {
        let ctx = admin(request.metadata())?;
        let req = request.into_inner();
        let change = definitions::Change::parse(&body(&req.body_json)?, false)?;
        Ok(team(
            definitions::update(
                &self.0.store,
                ctx.project_id,
                scope(&req.scope)?,
                &req.permission_id,
                change,
            )
            .await?,
        ))
    }

    async fn delete_definition(
        &self,
        request: Request<pb::DefinitionWrite>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = admin(request.metadata())?;
        let req = request.into_inner();
        definitions::delete(
            &self.0.store,
            ctx.project_id,
            scope(&req.scope)?,
            &req.permission_id,
        )
        .await?;
        Ok(empty())
    }

    #[tracing::instrument(name = "teams.send_invitation", skip_all)]
    async fn send_invitation(
        &self,
        request: Request<pb::SendInvitationRequest>,
    ) -> Result<Response<pb::InvitationId>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let invite = invitations::Invite {
            team: uuid(&req.team_id, "team_id")?,
            email: &req.email,
            callback_url: &req.callback_url,
            permission_ids: req.permission_ids,
        };
        let id = self.0.invite(&ctx, invite).await?;
        Ok(Response::new(pb::InvitationId { id: id.to_string() }))
    }

    async fn list_invitations(
        &self,
        request: Request<pb::ListInvitationsRequest>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let team = optional(request.get_ref().team_id.as_deref(), "team_id")?;
        let user = optional(request.get_ref().user_id.as_deref(), "user_id")?;
        Ok(list(self.0.list_invitations(&ctx, team, user).await?))
    }

    async fn revoke_invitation(
        &self,
        request: Request<pb::InvitationRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let id = Uuid::parse_str(&req.id)
            .map_err(|_| Error::Coded(latchkey_shared::codes::CodeError::NotFound.into()))?;
        self.0
            .revoke_invitation(&ctx, uuid(&req.team_id, "team_id")?, id)
            .await?;
        Ok(empty())
    }

    async fn accept_invitation(
        &self,
        request: Request<pb::InvitationCode>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        self.0.accept(&ctx, &request.get_ref().code).await?;
        Ok(empty())
    }

    async fn invitation_details(
        &self,
        request: Request<pb::InvitationCode>,
    ) -> Result<Response<pb::TeamJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        Ok(team(
            self.0
                .invitation_details(&ctx, &request.get_ref().code)
                .await?,
        ))
    }

    async fn check_invitation_code(
        &self,
        request: Request<pb::InvitationCode>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        self.0
            .check_invitation(&ctx, &request.get_ref().code)
            .await?;
        Ok(empty())
    }

    async fn accept_invitation_by_id(
        &self,
        request: Request<pb::InvitationRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let id = Uuid::parse_str(&req.id)
            .map_err(|_| Error::Coded(latchkey_shared::codes::CodeError::NotFound.into()))?;
        self.0
            .accept_by_id(&ctx, id, uuid(&req.user_id, "user_id")?)
            .await?;
        Ok(empty())
    }

    async fn list_team_permissions(
        &self,
        request: Request<pb::ListTeamPermissionsRequest>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let team = optional(req.team_id.as_deref(), "team_id")?;
        let user = optional(req.user_id.as_deref(), "user_id")?;
        Ok(list(
            self.0
                .list_permissions(
                    &ctx,
                    team,
                    user,
                    req.permission_id.as_deref(),
                    req.recursive,
                )
                .await?,
        ))
    }

    async fn grant_team_permission(
        &self,
        request: Request<pb::PermissionRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let g = grant(request.into_inner())?;
        self.0.grant(&ctx, g).await?;
        Ok(empty())
    }

    async fn revoke_team_permission(
        &self,
        request: Request<pb::PermissionRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let g = grant(request.into_inner())?;
        self.0.revoke(&ctx, g).await?;
        Ok(empty())
    }
}

/// Definitions are admin business (50 §4).
fn admin(metadata: &tonic::metadata::MetadataMap) -> Result<Context, Status> {
    let ctx = Context::read(metadata)?;
    if ctx.access_type != latchkey_shared::headers::AccessType::Admin {
        return Err(Status::permission_denied("admin access required"));
    }
    Ok(ctx)
}

fn scope(text: &str) -> Result<Scope, Error> {
    match text {
        "team" => Ok(Scope::Team),
        "project" => Ok(Scope::Project),
        other => Err(Error::Invalid(format!("unknown scope {other}"))),
    }
}

fn member(m: &pb::MemberRef) -> Result<(Uuid, Uuid), Error> {
    Ok((uuid(&m.team_id, "team_id")?, uuid(&m.user_id, "user_id")?))
}

fn grant(p: pb::PermissionRef) -> Result<(Uuid, Uuid, String), Error> {
    Ok((
        uuid(&p.team_id, "team_id")?,
        uuid(&p.user_id, "user_id")?,
        p.permission_id,
    ))
}
