//! `Passkeys`: WebAuthn registration, sign-in, and the user's passkeys.

use std::sync::Arc;

use latchkey_proto::auth::v1 as pb;
use latchkey_shared::grpc::Context;
use serde_json::Value;
use tonic::{Request, Response, Status};

use super::users::uuid;
use crate::app::App;
use crate::domain::passkeys::{self, Challenge};

pub struct Passkeys {
    app: Arc<App>,
}

impl Passkeys {
    pub fn new(app: Arc<App>) -> Self {
        Self { app }
    }
}

fn challenge(c: Challenge) -> Response<pb::PasskeyChallenge> {
    Response::new(pb::PasskeyChallenge {
        options_json: c.options_json.to_string(),
        code: c.code,
    })
}

#[tonic::async_trait]
impl pb::passkeys_server::Passkeys for Passkeys {
    #[tracing::instrument(name = "auth.passkey_initiate_registration", skip_all)]
    async fn initiate_registration(
        &self,
        request: Request<pb::Empty>,
    ) -> Result<Response<pb::PasskeyChallenge>, Status> {
        let ctx = Context::read(request.metadata())?;
        Ok(challenge(
            passkeys::initiate_registration(&self.app, &ctx).await?,
        ))
    }

    #[tracing::instrument(name = "auth.passkey_register", skip_all)]
    async fn register(
        &self,
        request: Request<pb::RegisterPasskeyRequest>,
    ) -> Result<Response<pb::RegisteredPasskey>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.get_ref();
        let credential_id =
            passkeys::register(&self.app, &ctx, &req.credential_json, &req.code).await?;
        Ok(Response::new(pb::RegisteredPasskey { credential_id }))
    }

    #[tracing::instrument(name = "auth.passkey_initiate_authentication", skip_all)]
    async fn initiate_authentication(
        &self,
        request: Request<pb::Empty>,
    ) -> Result<Response<pb::PasskeyChallenge>, Status> {
        let ctx = Context::read(request.metadata())?;
        Ok(challenge(
            passkeys::initiate_authentication(&self.app, &ctx).await?,
        ))
    }

    #[tracing::instrument(name = "auth.passkey_sign_in", skip_all)]
    async fn sign_in(
        &self,
        request: Request<pb::PasskeySignInRequest>,
    ) -> Result<Response<pb::SignInResult>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.get_ref();
        let signed_in = passkeys::sign_in(
            &self.app,
            &ctx,
            &req.authentication_response_json,
            &req.code,
        )
        .await?;
        Ok(super::users::signed_in(signed_in))
    }

    #[tracing::instrument(name = "auth.list_passkeys", skip_all)]
    async fn list_passkeys(
        &self,
        request: Request<pb::UserRef>,
    ) -> Result<Response<pb::JsonList>, Status> {
        let ctx = Context::read(request.metadata())?;
        let user_id = uuid(&request.get_ref().user_id, "user_id")?;
        let items = passkeys::list(&self.app, &ctx, user_id).await?;
        Ok(Response::new(pb::JsonList {
            items_json: items.iter().map(Value::to_string).collect(),
        }))
    }

    #[tracing::instrument(name = "auth.delete_passkey", skip_all)]
    async fn delete_passkey(
        &self,
        request: Request<pb::PasskeyRef>,
    ) -> Result<Response<pb::Empty>, Status> {
        let ctx = Context::read(request.metadata())?;
        let req = request.get_ref();
        let (user_id, id) = (uuid(&req.user_id, "user_id")?, uuid(&req.id, "id")?);
        passkeys::delete(&self.app, &ctx, user_id, Some(id)).await?;
        Ok(Response::new(pb::Empty {}))
    }
}
