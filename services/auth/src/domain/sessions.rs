//! Sessions and refresh tokens (20 §3, 70 §2, 80 §5).

use latchkey_shared::crypto::{hash_secret, random_base32};
use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use serde_json::{json, Value};
use uuid::Uuid;

use super::tokens;
use crate::app::App;
use crate::error::{coded, Error, Result};
use crate::store::accounts::{NewSession, SessionRow, TokenLookup};

/// Default and longest session lifetime (70 §2).
pub const DEFAULT_LIFETIME_MILLIS: i64 = 365 * 24 * 60 * 60 * 1000;
pub const MAX_LIFETIME_MILLIS: i64 = 31_708_800_000;
/// How long a rotated-away refresh token keeps working (80 §5).
const ROTATION_GRACE_MILLIS: i64 = 10_000;

/// A session's tokens as handed to the client.
#[derive(Debug, Clone)]
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: String,
}

/// A new session for `user_id` and the plaintext of its first refresh token.
pub fn new_session(
    project: Uuid,
    user_id: Uuid,
    now: i64,
    lifetime: i64,
    impersonation: bool,
) -> (NewSession, String) {
    let token = random_base32(45);
    let session = SessionRow {
        project_id: project,
        id: Uuid::now_v7(),
        user_id,
        is_impersonation: impersonation,
        created_at_millis: now,
        last_used_at_millis: now,
        expires_at_millis: now.saturating_add(lifetime),
    };
    (
        NewSession {
            session,
            token_hash: hash_secret(&token),
        },
        token,
    )
}

fn refresh_refused() -> Error {
    coded(
        ErrorCode::RefreshTokenNotFoundOrExpired,
        "The refresh token is unknown, revoked or expired.",
    )
}

/// Opens a session for an existing user (sign-in, `POST /auth/sessions`).
pub async fn open(
    app: &App,
    ctx: &Context,
    user: &Value,
    lifetime: i64,
    impersonation: bool,
) -> Result<Tokens> {
    let user_id = user["id"]
        .as_str()
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(refresh_refused)?;
    let (new, token) = new_session(ctx.project_id, user_id, app.now(), lifetime, impersonation);
    if !app.accounts.insert_session(&new).await? {
        return Err(super::users::not_found(user_id));
    }
    tokens_for(app, ctx.project_id, user, new.session.id, token).await
}

pub async fn tokens_for(
    app: &App,
    project: Uuid,
    user: &Value,
    session_id: Uuid,
    refresh_token: String,
) -> Result<Tokens> {
    let access_token = tokens::mint(app, project, user, session_id).await?;
    Ok(Tokens {
        access_token,
        refresh_token,
    })
}

/// The live session a refresh token belongs to. An expired session is deleted; a token rotated
/// away more than the grace period ago ends its whole session, since only a copy of the token
/// can still be presenting it (80 §5).
async fn live_session(app: &App, ctx: &Context, hash: &str) -> Result<TokenLookup> {
    let found = app
        .accounts
        .find_token(ctx.project_id, hash)
        .await?
        .ok_or_else(refresh_refused)?;
    let now = app.now();
    let session = &found.session;
    if session.expires_at_millis <= now {
        app.accounts
            .delete_sessions(ctx.project_id, session.user_id, &[session.id], now)
            .await?;
        return Err(refresh_refused());
    }
    if let Some(superseded) = found.superseded_at_millis {
        if now - superseded > ROTATION_GRACE_MILLIS {
            tracing::warn!(session = %session.id, "rotated refresh token reused; session revoked");
            app.accounts
                .delete_sessions(ctx.project_id, session.user_id, &[session.id], now)
                .await?;
            return Err(refresh_refused());
        }
    }
    Ok(found)
}

/// The live session `refresh_token` belongs to, refused as a refresh would refuse it.
pub async fn holder(app: &App, ctx: &Context, refresh_token: &str) -> Result<SessionRow> {
    Ok(live_session(app, ctx, &hash_secret(refresh_token))
        .await?
        .session)
}

/// `POST /auth/sessions/current/refresh`: a new access token, and with rotation a new refresh
/// token. A rotated-away token presented after its grace period ends the whole session.
pub async fn refresh(
    app: &App,
    ctx: &Context,
    refresh_token: &str,
) -> Result<(String, Option<String>)> {
    let hash = hash_secret(refresh_token);
    // The lookup reads the user with the session, so a session whose user is gone is refused
    // there; contacts failing below is an error to retry, not a reason to end the session.
    let ((_, settings), TokenLookup { session, user, .. }) =
        tokio::try_join!(app.project(ctx.project_id), live_session(app, ctx, &hash))?;
    let now = app.now();
    let channels = super::users::channels_of_user(app, ctx, user.id).await?;
    let user = super::users::token_view(&user, &channels, &settings);
    let rotated = settings.refresh_token_rotation.then(|| random_base32(45));
    let new_hash = rotated.as_deref().map(hash_secret);
    app.accounts
        .touch_session(&session, now, &hash, new_hash.as_deref())
        .await?;
    let access = tokens::mint(app, ctx.project_id, &user, session.id).await?;
    Ok((access, rotated))
}

fn session_json(s: &SessionRow, current: Option<Uuid>) -> Value {
    json!({
        "id": s.id,
        "user_id": s.user_id,
        "created_at": s.created_at_millis,
        "last_used_at": s.last_used_at_millis,
        "is_impersonation": s.is_impersonation,
        "is_current_session": Some(s.id) == current,
    })
}

/// The user's sessions, newest first; impersonation sessions only for admins.
pub async fn list(
    app: &App,
    ctx: &Context,
    user: Uuid,
    current: Option<Uuid>,
) -> Result<Vec<Value>> {
    let admin = ctx.access_type == latchkey_shared::headers::AccessType::Admin;
    let now = app.now();
    Ok(app
        .accounts
        .sessions_of(ctx.project_id, user)
        .await?
        .iter()
        .filter(|s| s.expires_at_millis > now && (admin || !s.is_impersonation))
        .map(|s| session_json(s, current))
        .collect())
}

/// `DELETE /auth/sessions/{id}`: a client may end its own other sessions; a server any.
pub async fn delete(app: &App, ctx: &Context, id: Uuid, current: Option<Uuid>) -> Result<()> {
    let not_found = || coded(ErrorCode::SessionNotFound, "No such session.");
    let session = app
        .accounts
        .session(ctx.project_id, id)
        .await?
        .ok_or_else(not_found)?;
    if ctx.access_type == latchkey_shared::headers::AccessType::Client
        && Some(session.user_id) != ctx.user_id
    {
        return Err(not_found());
    }
    if Some(id) == current {
        return Err(coded(
            ErrorCode::CannotDeleteCurrentSession,
            "Use DELETE /auth/sessions/current to sign out.",
        ));
    }
    app.accounts
        .delete_sessions(ctx.project_id, session.user_id, &[id], app.now())
        .await?;
    Ok(())
}

/// Sign-out by the session of the access token, or by a refresh token when the access token is
/// gone (80 §11.22).
pub async fn sign_out(
    app: &App,
    ctx: &Context,
    session: Option<Uuid>,
    refresh_token: Option<&str>,
) -> Result<()> {
    let session = match (session, refresh_token) {
        (Some(id), _) => app.accounts.session(ctx.project_id, id).await?,
        (None, Some(token)) => app
            .accounts
            .find_token(ctx.project_id, &hash_secret(token))
            .await?
            .map(|t| t.session),
        (None, None) => {
            return Err(coded(
                ErrorCode::UserAuthenticationRequired,
                "Sign-out needs an access or refresh token.",
            ))
        }
    };
    let session = session.ok_or_else(refresh_refused)?;
    app.accounts
        .delete_sessions(ctx.project_id, session.user_id, &[session.id], app.now())
        .await?;
    Ok(())
}
