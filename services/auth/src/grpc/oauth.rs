//! The `OAuth` gRPC API: the authorization-server flow, provider records and connected
//! accounts.

use std::sync::Arc;

use latchkey_proto::auth::v1 as pb;
use latchkey_shared::grpc::Context;
use serde_json::Value;
use tonic::{Request, Response, Status};

use super::users::{body, empty, optional_uuid, user_json, uuid};
use crate::app::App;
use crate::domain::oauth::flow::{self, TokenGrant};
use crate::domain::oauth::records;
use crate::error::{coded, Error};
use latchkey_shared::error::ErrorCode;

pub struct OAuth {
    app: Arc<App>,
}

impl OAuth {
    pub fn new(app: Arc<App>) -> Self {
        Self { app }
    }
}

fn json_list(items: Vec<Value>) -> Response<pb::JsonList> {
    Response::new(pb::JsonList {
        items_json: items.iter().map(Value::to_string).collect(),
    })
}

fn invalid_request(what: &str) -> Error {
    coded(
        ErrorCode::OauthInvalidRequest,
        format!("{what} is required"),
    )
}

fn grant_of(req: pb::TokenRequest) -> Result<TokenGrant, Error> {
    match req.grant_type.as_str() {
        "authorization_code" => Ok(TokenGrant::AuthorizationCode {
            code: req.code.ok_or_else(|| invalid_request("code"))?,
            redirect_uri: req
                .redirect_uri
                .ok_or_else(|| invalid_request("redirect_uri"))?,
            code_verifier: req
                .code_verifier
                .ok_or_else(|| invalid_request("code_verifier"))?,
        }),
        "refresh_token" => Ok(TokenGrant::RefreshToken(
            req.refresh_token
                .ok_or_else(|| invalid_request("refresh_token"))?,
        )),
        _ => Err(coded(
            ErrorCode::OauthInvalidRequest,
            "grant_type must be authorization_code or refresh_token",
        )),
    }
}

#[tonic::async_trait]
impl pb::o_auth_server::OAuth for OAuth {
    #[tracing::instrument(name = "auth.oauth_authorize", skip_all)]
    async fn authorize(
        &self,
        request: Request<pb::AuthorizeRequest>,
    ) -> Result<Response<pb::AuthorizeResponse>, Status> {
        let ctx = Context::read(request.metadata())?;
        let r = request.into_inner();
        let req = flow::AuthorizeRequest {
            user_id: optional_uuid(r.user_id.as_deref(), "user_id")?,
            provider_id: r.provider_id,
            client_secret: r.client_secret,
            redirect_uri: r.redirect_uri,
            state: r.state,
            code_challenge: r.code_challenge,
            code_challenge_method: r.code_challenge_method,
            link: r.link,
            provider_scope: r.provider_scope,
            error_redirect_uri: r.error_redirect_uri,
            after_callback_redirect_url: r.after_callback_redirect_url,
            redirect_mode: r.redirect_mode,
        };
        let done = flow::authorize(&self.app, &ctx, req).await?;
        Ok(Response::new(pb::AuthorizeResponse {
            location: done.location,
            inner_state: done.inner_state,
        }))
    }

    #[tracing::instrument(name = "auth.oauth_callback", skip_all)]
    async fn callback(
        &self,
        request: Request<pb::CallbackRequest>,
    ) -> Result<Response<pb::CallbackResponse>, Status> {
        let ctx = Context::read(request.metadata())?;
        let r = request.into_inner();
        let req = flow::CallbackRequest {
            provider_id: r.provider_id,
            state_code: r.state_code,
            code: r.code,
            error: r.error,
            cookie_present: r.cookie_present,
        };
        let location = flow::callback(&self.app, &ctx, req).await?;
        Ok(Response::new(pb::CallbackResponse { location }))
    }

    #[tracing::instrument(name = "auth.oauth_token", skip_all)]
    async fn token(
        &self,
        request: Request<pb::TokenRequest>,
    ) -> Result<Response<pb::TokenResponse>, Status> {
        let ctx = Context::read(request.metadata())?;
        let r = request.into_inner();
        let secret = r.client_secret.clone();
        let issued = flow::token(&self.app, &ctx, &secret, grant_of(r)?).await?;
        Ok(Response::new(pb::TokenResponse {
            access_token: issued.access_token,
            refresh_token: issued.refresh_token,
            is_new_user: issued.is_new_user,
            after_callback_redirect_url: issued.after_callback_redirect_url,
        }))
    }

    async fn list_records(
        &self,
        request: Request<pb::ListRecordsRequest>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let user = optional_uuid(request.get_ref().user_id.as_deref(), "user_id")?;
        Ok(json_list(records::list(&self.app, &ctx, user).await?))
    }

    async fn create_record(
        &self,
        request: Request<pb::WriteRecordRequest>,
    ) -> Result<Response<pb::UserJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        let r = request.get_ref();
        let user = uuid(&r.user_id, "user_id")?;
        let created = records::create(&self.app, &ctx, user, &body(&r.body_json)?).await?;
        Ok(user_json(created))
    }

    async fn get_record(
        &self,
        request: Request<pb::RecordRef>,
    ) -> Result<Response<pb::UserJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        let r = request.get_ref();
        let (user, id) = (
            uuid(&r.user_id, "user_id")?,
            uuid(&r.record_id, "provider_id")?,
        );
        Ok(user_json(records::get(&self.app, &ctx, user, id).await?))
    }

    async fn update_record(
        &self,
        request: Request<pb::WriteRecordRequest>,
    ) -> Result<Response<pb::UserJson>, Status> {
        let ctx = Context::read(request.metadata())?;
        let r = request.get_ref();
        let (user, id) = (
            uuid(&r.user_id, "user_id")?,
            uuid(&r.record_id, "provider_id")?,
        );
        let updated = records::update(&self.app, &ctx, user, id, &body(&r.body_json)?).await?;
        Ok(user_json(updated))
    }

    async fn delete_record(
        &self,
        request: Request<pb::RecordRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let r = request.get_ref();
        let (user, id) = (
            uuid(&r.user_id, "user_id")?,
            uuid(&r.record_id, "provider_id")?,
        );
        records::delete(&self.app, &ctx, user, id).await?;
        Ok(empty())
    }

    async fn list_connected_accounts(
        &self,
        request: Request<pb::UserRef>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let user = uuid(&request.get_ref().user_id, "user_id")?;
        Ok(json_list(records::connected(&self.app, &ctx, user).await?))
    }

    async fn connected_access_token(
        &self,
        request: Request<pb::ConnectedAccessTokenRequest>,
    ) -> Result<Response<pb::ConnectedAccessTokenResponse>, Status> {
        let ctx = Context::read(request.metadata())?;
        let r = request.get_ref();
        let user = uuid(&r.user_id, "user_id")?;
        let access_token =
            records::access_token(&self.app, &ctx, user, &r.provider_id, r.scope.as_deref())
                .await?;
        Ok(Response::new(pb::ConnectedAccessTokenResponse {
            access_token,
        }))
    }
}
