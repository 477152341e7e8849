//! CLI sign-in (Stack Auth's `/auth/cli`): a CLI starts a login and keeps the polling code;
//! its user opens a page with the login code and completes the login with their session;
//! the CLI's next poll receives a session of its own. Only the CLI, holding the polling code,
//! ever receives a token: the login code alone, which travels through a browser, is worth
//! nothing but completing the login.

use latchkey_shared::crypto::{hash_secret, random_base32};
use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use uuid::Uuid;

use super::sessions;
use crate::app::App;
use crate::error::{coded, Error, Result};
use crate::store::cli_logins::CliLogin;

pub const DEFAULT_LIFETIME_MILLIS: i64 = 2 * 60 * 60 * 1000;
pub const MAX_LIFETIME_MILLIS: i64 = 24 * 60 * 60 * 1000;
const CODE_LEN: usize = 45;
/// Expired logins are deleted a day after their expiry: until then a late poll hears
/// "expired" rather than "invalid".
const KEPT_AFTER_EXPIRY_MILLIS: i64 = 24 * 60 * 60 * 1000;

/// The codes of a new login, shown once.
pub struct Started {
    pub polling_code: String,
    pub login_code: String,
    pub expires_at_millis: i64,
}

/// What a poll finds.
pub enum Poll {
    Waiting,
    Expired,
    Used,
    /// The refresh token of the CLI's new session.
    Success(String),
}

/// `POST /auth/cli`.
pub async fn start(app: &App, ctx: &Context, expires_in_millis: Option<i64>) -> Result<Started> {
    let lifetime = expires_in_millis.unwrap_or(DEFAULT_LIFETIME_MILLIS);
    // Stack Auth accepts 0 and negative values (a login born expired); that is a caller's
    // mistake, so it is refused here.
    if !(1..=MAX_LIFETIME_MILLIS).contains(&lifetime) {
        return Err(Error::Invalid(format!(
            "expires_in_millis must be between 1 and {MAX_LIFETIME_MILLIS}"
        )));
    }
    app.project(ctx.project_id).await?;
    let now = app.now();
    app.cli_logins
        .delete_expired(ctx.project_id, now - KEPT_AFTER_EXPIRY_MILLIS)
        .await?;
    let (polling_code, login_code) = (random_base32(CODE_LEN), random_base32(CODE_LEN));
    let login = CliLogin {
        project_id: ctx.project_id,
        id: Uuid::now_v7(),
        polling_code_hash: hash_secret(&polling_code),
        login_code_hash: hash_secret(&login_code),
        user_id: None,
        session_id: None,
        created_at_millis: now,
        expires_at_millis: now.saturating_add(lifetime),
        completed_at_millis: None,
        used_at_millis: None,
    };
    app.cli_logins.insert(&login).await?;
    Ok(Started {
        polling_code,
        login_code,
        expires_at_millis: login.expires_at_millis,
    })
}

fn invalid_polling_code() -> Error {
    coded(
        ErrorCode::InvalidPollingCode,
        "The polling code is invalid or does not exist.",
    )
}

/// What a login says before a claim: expiry first, then use, then completion.
fn state(login: &CliLogin, now: i64) -> Option<Poll> {
    if login.expires_at_millis <= now {
        Some(Poll::Expired)
    } else if login.used_at_millis.is_some() {
        Some(Poll::Used)
    } else if login.completed_at_millis.is_none() {
        Some(Poll::Waiting)
    } else {
        None
    }
}

/// `POST /auth/cli/poll`: a completed login is claimed by exactly one poll, which receives a
/// session of the completing user. The CLI's session inherits what limits the browser's
/// session (its end, and impersonation), so a completed login never outlives or outranks the
/// session that completed it.
pub async fn poll(app: &App, ctx: &Context, polling_code: &str) -> Result<Poll> {
    let hash = hash_secret(polling_code);
    let login = app
        .cli_logins
        .by_polling_code(ctx.project_id, &hash)
        .await?
        .ok_or_else(invalid_polling_code)?;
    let now = app.now();
    if let Some(state) = state(&login, now) {
        return Ok(state);
    }
    let (Some(user_id), Some(session_id)) = (login.user_id, login.session_id) else {
        return Err(invalid_polling_code());
    };
    let browser = app
        .accounts
        .session(ctx.project_id, session_id)
        .await?
        .filter(|s| s.expires_at_millis > now)
        .ok_or_else(invalid_polling_code)?;
    let lifetime = (browser.expires_at_millis - now).min(sessions::DEFAULT_LIFETIME_MILLIS);
    let (new, token) = sessions::new_session(
        ctx.project_id,
        user_id,
        now,
        lifetime,
        browser.is_impersonation,
    );
    if !app.accounts.insert_session(&new).await? {
        return Err(invalid_polling_code());
    }
    // The session exists before the claim, so a claimed login always has its session; a poll
    // that loses the race, or fails to claim, removes the one it made.
    let claimed = app.cli_logins.claim(ctx.project_id, login.id, now).await;
    if !matches!(claimed, Ok(true)) {
        app.accounts
            .delete_sessions(ctx.project_id, user_id, &[new.session.id], now)
            .await?;
        claimed?;
        let after = app
            .cli_logins
            .by_polling_code(ctx.project_id, &hash)
            .await?
            .ok_or_else(invalid_polling_code)?;
        return state(&after, now).ok_or_else(invalid_polling_code);
    }
    Ok(Poll::Success(token))
}

fn invalid_login_code() -> Error {
    coded(
        ErrorCode::InvalidLoginCode,
        "Invalid login code or the code has expired.",
    )
}

/// `POST /auth/cli/complete` with `mode: "check"`: whether the code names a pending login.
pub async fn check(app: &App, ctx: &Context, login_code: &str) -> Result<()> {
    let pending = app
        .cli_logins
        .is_pending(ctx.project_id, &hash_secret(login_code), app.now())
        .await?;
    pending.then_some(()).ok_or_else(invalid_login_code)
}

/// `POST /auth/cli/complete`: the holder of a live session of this project completes a pending
/// login as that session's user.
pub async fn complete(
    app: &App,
    ctx: &Context,
    login_code: &str,
    refresh_token: &str,
) -> Result<()> {
    let session = sessions::holder(app, ctx, refresh_token).await?;
    // A CLI signs in as a full user: an anonymous one signs up first, which upgrades it.
    let anonymous = app
        .accounts
        .user(ctx.project_id, session.user_id)
        .await?
        .is_some_and(|u| u.is_anonymous);
    if anonymous {
        return Err(coded(
            ErrorCode::AnonymousAuthenticationNotAllowed,
            "An anonymous user cannot sign a CLI in; sign up first.",
        ));
    }
    let done = app
        .cli_logins
        .complete(
            ctx.project_id,
            &hash_secret(login_code),
            &session,
            app.now(),
        )
        .await?;
    done.then_some(()).ok_or_else(invalid_login_code)
}
