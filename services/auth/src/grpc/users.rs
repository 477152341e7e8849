//! The `Users` gRPC API: password flows, sessions and users.

use std::sync::Arc;

use latchkey_proto::auth::v1 as pb;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use latchkey_shared::headers::AccessType;
use serde_json::Value;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::app::App;
use crate::domain::sessions::{self, Tokens};
use crate::domain::user_write::Mode;
use crate::domain::{anonymous, cli, mfa, otp, passwords, user_list, users};
use crate::error::{coded, Error};

pub struct Users {
    app: Arc<App>,
}

impl Users {
    pub fn new(app: Arc<App>) -> Self {
        Self { app }
    }
}

pub(super) fn uuid(text: &str, what: &str) -> Result<Uuid, Error> {
    Uuid::parse_str(text).map_err(|_| Error::Invalid(format!("{what} is not a UUID")))
}

pub(super) fn optional_uuid(text: Option<&str>, what: &str) -> Result<Option<Uuid>, Error> {
    text.map(|t| uuid(t, what)).transpose()
}

/// The answer of a sign-in that ended in a session.
pub(super) fn signed_in(done: crate::domain::mfa::SignedIn) -> Response<pb::SignInResult> {
    result(done.tokens, &done.user, done.is_new_user)
}

fn result(tokens: Tokens, user: &Value, is_new_user: bool) -> Response<pb::SignInResult> {
    Response::new(pb::SignInResult {
        access_token: tokens.access_token,
        refresh_token: tokens.refresh_token,
        user_id: user["id"].as_str().unwrap_or_default().to_owned(),
        is_new_user,
    })
}

pub(super) fn user_json(user: Value) -> Response<pb::UserJson> {
    Response::new(pb::UserJson {
        json: user.to_string(),
    })
}

pub(super) fn body(text: &str) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|e| Error::Invalid(e.to_string()))
}

pub(super) fn empty() -> Response<pb::Empty> {
    Response::new(pb::Empty {})
}

/// Only server and admin access may act on any user.
fn server_only(ctx: &Context) -> Result<(), Error> {
    if ctx.access_type == AccessType::Client {
        return Err(coded(
            ErrorCode::ClientAccessOwnUserOnly,
            "Clients may only act on their own user.",
        ));
    }
    Ok(())
}

#[tonic::async_trait]
impl pb::users_server::Users for Users {
    #[tracing::instrument(name = "auth.sign_up", skip_all)]
    async fn sign_up(
        &self,
        request: Request<pb::SignUpRequest>,
    ) -> Result<Response<pb::SignInResult>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let url = req.verification_callback_url.as_deref();
        let (user, tokens) =
            passwords::sign_up(&self.app, &ctx, &req.email, &req.password, url).await?;
        Ok(result(tokens, &user, true))
    }

    #[tracing::instrument(name = "auth.sign_in", skip_all)]
    async fn sign_in(
        &self,
        request: Request<pb::SignInRequest>,
    ) -> Result<Response<pb::SignInResult>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let (user, tokens) = passwords::sign_in(&self.app, &ctx, &req.email, &req.password).await?;
        Ok(result(tokens, &user, false))
    }

    async fn update_password(
        &self,
        request: Request<pb::UpdatePasswordRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        passwords::update(
            &self.app,
            &ctx,
            &req.old_password,
            &req.new_password,
            req.refresh_token.as_deref(),
        )
        .await?;
        Ok(empty())
    }

    async fn set_password(
        &self,
        request: Request<pb::SetPasswordRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        passwords::set(&self.app, &ctx, &request.get_ref().password).await?;
        Ok(empty())
    }

    async fn send_reset_code(
        &self,
        request: Request<pb::SendResetCodeRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        passwords::send_reset_code(&self.app, &ctx, &req.email, &req.callback_url).await?;
        Ok(empty())
    }

    async fn reset_password(
        &self,
        request: Request<pb::ResetPasswordRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        passwords::reset(&self.app, &ctx, &req.code, &req.password).await?;
        Ok(empty())
    }

    async fn check_reset_code(
        &self,
        request: Request<pb::CodeRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        passwords::check_reset_code(&self.app, &ctx, &request.get_ref().code).await?;
        Ok(empty())
    }

    #[tracing::instrument(name = "auth.send_sign_in_code", skip_all)]
    async fn send_sign_in_code(
        &self,
        request: Request<pb::SendSignInCodeRequest>,
    ) -> Result<Response<pb::SendSignInCodeResponse>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.get_ref();
        let nonce = otp::send_code(&self.app, &ctx, &req.email, &req.callback_url).await?;
        Ok(Response::new(pb::SendSignInCodeResponse { nonce }))
    }

    async fn check_sign_in_code(
        &self,
        request: Request<pb::CodeRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        otp::check_code(&self.app, &ctx, &request.get_ref().code).await?;
        Ok(empty())
    }

    #[tracing::instrument(name = "auth.otp_sign_in", skip_all)]
    async fn otp_sign_in(
        &self,
        request: Request<pb::CodeRequest>,
    ) -> Result<Response<pb::SignInResult>, Status> {
        let ctx = Context::read(request.metadata())?;
        let done = otp::sign_in(&self.app, &ctx, &request.get_ref().code).await?;
        Ok(result(done.tokens, &done.user, done.is_new_user))
    }

    #[tracing::instrument(name = "auth.mfa_sign_in", skip_all)]
    async fn mfa_sign_in(
        &self,
        request: Request<pb::MfaSignInRequest>,
    ) -> Result<Response<pb::SignInResult>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.get_ref();
        let done = mfa::verify(&self.app, &ctx, &req.code, &req.totp).await?;
        Ok(result(done.tokens, &done.user, done.is_new_user))
    }

    async fn create_session(
        &self,
        request: Request<pb::CreateSessionRequest>,
    ) -> Result<Response<pb::SignInResult>, Status> {
        let ctx = Context::read(request.metadata())?;
        server_only(&ctx)?;
        let req = request.into_inner();
        let user_id = uuid(&req.user_id, "user_id")?;
        let user = users::get(&self.app, &ctx, user_id).await.map_err(|_| {
            coded(
                ErrorCode::UserIdDoesNotExist,
                "No user with this id exists.",
            )
            .with_details(serde_json::json!({ "user_id": user_id }))
        })?;
        let lifetime = if req.expires_in_millis > 0 {
            req.expires_in_millis
        } else {
            sessions::DEFAULT_LIFETIME_MILLIS
        };
        if lifetime > sessions::MAX_LIFETIME_MILLIS {
            return Err(
                Error::Invalid("expires_in_millis must be at most 31708800000".into()).into(),
            );
        }
        let tokens = sessions::open(&self.app, &ctx, &user, lifetime, req.is_impersonation).await?;
        Ok(result(tokens, &user, false))
    }

    async fn refresh_session(
        &self,
        request: Request<pb::RefreshSessionRequest>,
    ) -> Result<Response<pb::RefreshSessionResponse>, Status> {
        let ctx = Context::read(request.metadata())?;
        let (access_token, refresh_token) =
            sessions::refresh(&self.app, &ctx, &request.get_ref().refresh_token).await?;
        Ok(Response::new(pb::RefreshSessionResponse {
            access_token,
            refresh_token,
        }))
    }

    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let user = uuid(&req.user_id, "user_id")?;
        let current = optional_uuid(req.current_session_id.as_deref(), "current_session_id")?;
        let items = sessions::list(&self.app, &ctx, user, current).await?;
        Ok(Response::new(pb::JsonList {
            items_json: items.iter().map(Value::to_string).collect(),
        }))
    }

    async fn delete_session(
        &self,
        request: Request<pb::DeleteSessionRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let id = uuid(&req.session_id, "session id")
            .map_err(|_| coded(ErrorCode::SessionNotFound, "No such session."))?;
        let current = optional_uuid(req.current_session_id.as_deref(), "current_session_id")?;
        sessions::delete(&self.app, &ctx, id, current).await?;
        Ok(empty())
    }

    async fn sign_out(
        &self,
        request: Request<pb::SignOutRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let session = optional_uuid(req.session_id.as_deref(), "session_id")?;
        sessions::sign_out(&self.app, &ctx, session, req.refresh_token.as_deref()).await?;
        Ok(empty())
    }

    async fn get_user(
        &self,
        request: Request<pb::UserRef>,
    ) -> Result<Response<pb::UserJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        let id = uuid(&request.get_ref().user_id, "user_id")?;
        Ok(user_json(users::get(&self.app, &ctx, id).await?))
    }

    async fn list_users(
        &self,
        request: Request<pb::ListUsersRequest>,
    ) -> Result<Response<pb::UserPage>, Status> {
        let ctx = Context::read(request.metadata())?;
        server_only(&ctx)?;
        let req = request.into_inner();
        let query = user_list::ListQuery {
            limit: req.limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
            cursor: optional_uuid(req.cursor.as_deref(), "cursor")?,
            desc: req.desc,
            query: req.query,
            team_id: optional_uuid(req.team_id.as_deref(), "team_id")?,
            include_restricted: req.include_restricted,
            include_anonymous: req.include_anonymous,
            only_anonymous: req.only_anonymous,
        };
        let (items, next) = user_list::list(&self.app, &ctx, &query).await?;
        Ok(Response::new(pb::UserPage {
            items_json: items.iter().map(Value::to_string).collect(),
            next_cursor: next.map(|n| n.to_string()),
        }))
    }

    #[tracing::instrument(name = "auth.create_user", skip_all)]
    async fn create_user(
        &self,
        request: Request<pb::WriteUserRequest>,
    ) -> Result<Response<pb::UserJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        server_only(&ctx)?;
        let body = body(&request.get_ref().body_json)?;
        Ok(user_json(users::create(&self.app, &ctx, &body).await?))
    }

    #[tracing::instrument(name = "auth.update_user", skip_all)]
    async fn update_user(
        &self,
        request: Request<pb::WriteUserRequest>,
    ) -> Result<Response<pb::UserJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.into_inner();
        let id = uuid(&req.user_id, "user_id")?;
        let mode = if ctx.access_type == AccessType::Client {
            if ctx.user_id != Some(id) {
                server_only(&ctx)?;
            }
            Mode::ClientUpdate
        } else {
            Mode::ServerUpdate
        };
        Ok(user_json(
            users::update(&self.app, &ctx, id, &body(&req.body_json)?, mode).await?,
        ))
    }

    async fn user_exists(
        &self,
        request: Request<pb::UserRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let id = uuid(&request.get_ref().user_id, "user_id")?;
        match self
            .app
            .accounts
            .user(ctx.project_id, id)
            .await
            .map_err(Error::from)?
        {
            Some(_) => Ok(empty()),
            None => Err(users::not_found(id).into()),
        }
    }

    async fn get_users(
        &self,
        request: Request<pb::UserIdList>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let ids = request
            .get_ref()
            .user_ids
            .iter()
            .map(|u| uuid(u, "user_ids"))
            .collect::<Result<Vec<_>, _>>()?;
        let users = users::get_many(&self.app, &ctx, &ids).await?;
        Ok(Response::new(pb::JsonList {
            items_json: users.iter().map(Value::to_string).collect(),
        }))
    }

    #[tracing::instrument(name = "auth.delete_user", skip_all)]
    async fn delete_user(
        &self,
        request: Request<pb::UserRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let id = uuid(&request.get_ref().user_id, "user_id")?;
        if ctx.access_type == AccessType::Client {
            if ctx.user_id != Some(id) {
                server_only(&ctx)?;
            }
            let (_, settings) = self.app.project(ctx.project_id).await?;
            if !settings.client_user_deletion_enabled {
                return Err(coded(
                    ErrorCode::ClientUserDeletionDisabled,
                    "Clients may not delete their user in this project.",
                )
                .into());
            }
        }
        users::delete(&self.app, &ctx, id).await?;
        Ok(empty())
    }

    async fn clear_selected_team(
        &self,
        request: Request<pb::ClearSelectedTeamRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read_server(request.metadata())?;
        let req = request.get_ref();
        let team = uuid(&req.team_id, "team_id")?;
        let user = optional_uuid(req.user_id.as_deref(), "user_id")?;
        self.app
            .accounts
            .clear_selected_team(ctx.project_id, team, user)
            .await
            .map_err(Error::from)?;
        Ok(empty())
    }

    #[tracing::instrument(name = "auth.start_cli_login", skip_all)]
    async fn start_cli_login(
        &self,
        request: Request<pb::StartCliLoginRequest>,
    ) -> Result<Response<pb::CliLogin>, Status> {
        let ctx = Context::read(request.metadata())?;
        let started = cli::start(&self.app, &ctx, request.get_ref().expires_in_millis).await?;
        Ok(Response::new(pb::CliLogin {
            polling_code: started.polling_code,
            login_code: started.login_code,
            expires_at_millis: started.expires_at_millis,
        }))
    }

    #[tracing::instrument(name = "auth.poll_cli_login", skip_all)]
    async fn poll_cli_login(
        &self,
        request: Request<pb::PollCliLoginRequest>,
    ) -> Result<Response<pb::CliLoginPoll>, Status> {
        let ctx = Context::read(request.metadata())?;
        let (status, refresh_token) =
            match cli::poll(&self.app, &ctx, &request.get_ref().polling_code).await? {
                cli::Poll::Waiting => ("waiting", String::new()),
                cli::Poll::Expired => ("expired", String::new()),
                cli::Poll::Used => ("used", String::new()),
                cli::Poll::Success(token) => ("success", token),
            };
        Ok(Response::new(pb::CliLoginPoll {
            status: status.into(),
            refresh_token,
        }))
    }

    #[tracing::instrument(name = "auth.complete_cli_login", skip_all)]
    async fn complete_cli_login(
        &self,
        request: Request<pb::CompleteCliLoginRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.get_ref();
        cli::complete(&self.app, &ctx, &req.login_code, &req.refresh_token).await?;
        Ok(empty())
    }

    #[tracing::instrument(name = "auth.check_cli_login", skip_all)]
    async fn check_cli_login(
        &self,
        request: Request<pb::CheckCliLoginRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        cli::check(&self.app, &ctx, &request.get_ref().login_code).await?;
        Ok(empty())
    }

    #[tracing::instrument(name = "auth.anonymous_sign_up", skip_all)]
    async fn anonymous_sign_up(
        &self,
        request: Request<pb::Empty>,
    ) -> Result<Response<pb::SignInResult>, Status> {
        let ctx = Context::read(request.metadata())?;
        let (user, tokens) = anonymous::sign_up(&self.app, &ctx).await?;
        Ok(result(tokens, &user, true))
    }
}
