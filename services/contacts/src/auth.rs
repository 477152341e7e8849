//! What contacts asks of auth: whether a user exists, and the mail context of a project.

use latchkey_proto::auth::v1 as pb;
use latchkey_shared::error::{CodedError, ErrorCode};
use latchkey_shared::grpc::{AuthClient, Context, PresentCaller};
use serde_json::json;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::error::{Error, Result};

type UsersClient = pb::users_client::UsersClient<InterceptedService<Channel, PresentCaller>>;

#[derive(Clone)]
pub struct Auth {
    projects: AuthClient,
    users: UsersClient,
}

impl Auth {
    pub fn connect(addr: &str, caller: PresentCaller) -> anyhow::Result<Self> {
        let channel = latchkey_shared::grpc::lazy_channel(addr)?;
        Ok(Self {
            projects: pb::projects_client::ProjectsClient::with_interceptor(
                channel.clone(),
                caller.clone(),
            ),
            users: pb::users_client::UsersClient::with_interceptor(channel, caller),
        })
    }

    fn request<T>(ctx: &Context, message: T) -> tonic::Request<T> {
        let mut inner = ctx.clone();
        inner.access_type = latchkey_shared::headers::AccessType::Server;
        inner.request(message)
    }

    /// `USER_ID_DOES_NOT_EXIST` unless auth knows the user.
    pub async fn ensure_user(&self, ctx: &Context, user_id: &str) -> Result<()> {
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
                Err(Error::Upstream(coded.into_status()))
            }
            Err(s) => Err(s.into()),
        }
    }

    pub async fn mail_context(&self, ctx: &Context, callback_url: &str) -> Result<pb::MailContext> {
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
}
