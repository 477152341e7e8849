//! Where every sign-in ends (10 §3.2): a session, or for a user with TOTP an attempt code that
//! only `POST /auth/mfa/sign-in` with a valid TOTP turns into a session.

use base64::Engine;
use latchkey_proto::contacts::v1 as contacts;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use serde_json::{json, Value};
use uuid::Uuid;

use super::sessions::{self, Tokens};
use super::settings::Settings;
use super::{totp, users};
use crate::app::App;
use crate::error::{coded, Error, Result};
use crate::store::accounts::UserRow;

pub const ATTEMPT_KIND: &str = "MFA_ATTEMPT";
const ATTEMPT_TTL_MILLIS: i64 = 5 * 60 * 1000;

/// A user signed in: who, their tokens, and whether the sign-in created them.
pub struct SignedIn {
    pub user: Value,
    pub tokens: Tokens,
    pub is_new_user: bool,
}

/// Opens a session for a user whose first factor is proven, unless the user has TOTP: then
/// answers `MULTI_FACTOR_AUTHENTICATION_REQUIRED` carrying a fresh attempt code.
pub async fn sign_in(
    app: &App,
    ctx: &Context,
    user_id: Uuid,
    is_new_user: bool,
) -> Result<SignedIn> {
    let (row, (_, settings), channels) = tokio::try_join!(
        async {
            app.accounts
                .user(ctx.project_id, user_id)
                .await?
                .ok_or_else(|| users::not_found(user_id))
        },
        app.project(ctx.project_id),
        users::channels_of_user(app, ctx, user_id),
    )?;
    sign_in_as(app, ctx, &row, &channels, &settings, is_new_user).await
}

/// [`sign_in`] for a row, channels and settings the caller has just read, so a password sign-in
/// does not read again what it checked the password against. A user deleted since is not
/// signed in: opening the session finds the row gone.
pub async fn sign_in_as(
    app: &App,
    ctx: &Context,
    row: &UserRow,
    channels: &[contacts::Channel],
    settings: &Settings,
    is_new_user: bool,
) -> Result<SignedIn> {
    if row.totp_secret.is_some() {
        let data = json!({ "user_id": row.id, "is_new_user": is_new_user });
        let attempt_code = app
            .codes
            .create(ctx.project_id, ATTEMPT_KIND, &data, ATTEMPT_TTL_MILLIS)
            .await?;
        return Err(coded(
            ErrorCode::MultiFactorAuthenticationRequired,
            "This account requires a second factor: answer with a TOTP code.",
        )
        .with_details(json!({ "attempt_code": attempt_code })));
    }
    let user = users::token_view(row, channels, settings);
    let tokens = sessions::open(app, ctx, &user, sessions::DEFAULT_LIFETIME_MILLIS, false).await?;
    Ok(SignedIn {
        user,
        tokens,
        is_new_user,
    })
}

/// Purpose TOTP seeds are sealed under (`latchkey_shared::sealed`).
pub const TOTP_SEALED_AS: &str = "totp-seed";

fn invalid_totp() -> Error {
    coded(ErrorCode::InvalidTotpCode, "The TOTP code is not valid.")
}

/// `POST /auth/mfa/sign-in` (10 §3.3): code checks first, then the TOTP; a wrong TOTP leaves
/// the attempt code usable, a right one consumes it. Each time step is accepted once per user.
pub async fn verify(app: &App, ctx: &Context, attempt_code: &str, code: &str) -> Result<SignedIn> {
    let found = app
        .codes
        .check(ctx.project_id, ATTEMPT_KIND, attempt_code)
        .await?;
    let user_id = found.data["user_id"]
        .as_str()
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| Error::Invalid("malformed attempt code".into()))?;
    let is_new_user = found.data["is_new_user"].as_bool().unwrap_or(false);
    let row = app
        .accounts
        .user(ctx.project_id, user_id)
        .await?
        .ok_or_else(|| users::not_found(user_id))?;
    let secret = row
        .totp_secret
        .as_deref()
        .map(|s| app.secrets.open(TOTP_SEALED_AS, s))
        .transpose()?
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        .ok_or_else(invalid_totp)?;
    let step = totp::matching_step(&secret, code, app.now()).ok_or_else(invalid_totp)?;
    if !app
        .accounts
        .claim_totp_step(ctx.project_id, user_id, step)
        .await?
    {
        return Err(invalid_totp());
    }
    app.codes.consume(ctx.project_id, &found).await?;
    let (_, settings) = app.project(ctx.project_id).await?;
    let user = users::for_token(app, ctx, user_id, &settings).await?;
    let tokens = sessions::open(app, ctx, &user, sessions::DEFAULT_LIFETIME_MILLIS, false).await?;
    Ok(SignedIn {
        user,
        tokens,
        is_new_user,
    })
}
