//! What services ask of auth: whether a user exists, a project's mail context and settings.

use crate::error::{CodedError, ErrorCode};
use crate::grpc::Channel;
use crate::grpc::{AuthClient, Context, PresentCaller};
use latchkey_proto::auth::v1 as pb;
use serde_json::json;
use tonic::service::interceptor::InterceptedService;

type UsersClient = pb::users_client::UsersClient<InterceptedService<Channel, PresentCaller>>;

#[derive(Clone)]
pub struct Auth {
    projects: AuthClient,
    users: UsersClient,
}

impl Auth {
    pub fn connect(addr: &str, caller: PresentCaller) -> anyhow::Result<Self> {
        let channel = crate::grpc::lazy_channel(addr)?;
        Ok(Self {
            projects: pb::projects_client::ProjectsClient::with_interceptor(
                channel.clone(),
                caller.clone(),
            ),
            users: pb::users_client::UsersClient::with_interceptor(channel, caller),
        })
    }

    fn request<T>(ctx: &Context, message: T) -> tonic::Request<T> {
        // Components call each other with server access on the caller's project.
        let mut inner = ctx.clone();
        inner.access_type = crate::headers::AccessType::Server;
        inner.request(message)
    }

    /// Whether auth knows the user.
    pub async fn user_exists(&self, ctx: &Context, user_id: &str) -> Result<bool, tonic::Status> {
        let request = Self::request(
            ctx,
            pb::UserRef {
                user_id: user_id.to_owned(),
            },
        );
        match self.users.clone().user_exists(request).await {
            Ok(_) => Ok(true),
            Err(s) if CodedError::from_status(&s).code == ErrorCode::UserNotFound => Ok(false),
            Err(s) => Err(s),
        }
    }

    /// `USER_ID_DOES_NOT_EXIST` unless auth knows the user.
    pub async fn ensure_user(&self, ctx: &Context, user_id: &str) -> Result<(), tonic::Status> {
        let request = Self::request(
            ctx,
            pb::UserRef {
                user_id: user_id.to_owned(),
            },
        );
        match self.users.clone().user_exists(request).await {
            Ok(_) => Ok(()),
            Err(s)
                if CodedError::from_status(&s).code == ErrorCode::UserNotFound
                    || s.code() == tonic::Code::InvalidArgument =>
            {
                let coded = CodedError::new(
                    ErrorCode::UserIdDoesNotExist,
                    "No user with this id exists.",
                )
                .with_details(json!({ "user_id": user_id }));
                Err(coded.into_status())
            }
            Err(s) => Err(s),
        }
    }

    pub async fn mail_context(
        &self,
        ctx: &Context,
        callback_url: &str,
    ) -> Result<pb::MailContext, tonic::Status> {
        let request = Self::request(
            ctx,
            pb::MailContextRequest {
                callback_url: callback_url.to_owned(),
            },
        );
        Ok(self
            .projects
            .clone()
            .get_mail_context(request)
            .await?
            .into_inner())
    }

    /// Unselects `team` for every user (it is being deleted) or for `user` (who is leaving it),
    /// before the teams service commits, so no reader sees a selection of a team that is gone.
    pub async fn clear_selected_team(
        &self,
        ctx: &Context,
        team: uuid::Uuid,
        user: Option<uuid::Uuid>,
    ) -> Result<(), tonic::Status> {
        let request = Self::request(
            ctx,
            pb::ClearSelectedTeamRequest {
                team_id: team.to_string(),
                user_id: user.map(|u| u.to_string()),
            },
        );
        self.users.clone().clear_selected_team(request).await?;
        Ok(())
    }

    /// The project's settings document (secrets omitted).
    pub async fn settings(&self, ctx: &Context) -> Result<serde_json::Value, tonic::Status> {
        let request = Self::request(ctx, pb::Empty {});
        let settings = self
            .projects
            .clone()
            .get_internal_settings(request)
            .await?
            .into_inner();
        serde_json::from_str(&settings.json)
            .map_err(|_| tonic::Status::internal("bad settings document"))
    }

    /// Users in the server read shape, in the order asked; unknown ids are skipped.
    pub async fn users(
        &self,
        ctx: &Context,
        ids: &[String],
    ) -> Result<Vec<serde_json::Value>, tonic::Status> {
        let request = Self::request(
            ctx,
            pb::UserIdList {
                user_ids: ids.to_vec(),
            },
        );
        let list = self.users.clone().get_users(request).await?.into_inner();
        Ok(list
            .items_json
            .iter()
            .filter_map(|j| serde_json::from_str(j).ok())
            .collect())
    }
}
