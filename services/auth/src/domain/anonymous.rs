//! Anonymous users (Stack Auth's `/auth/anonymous/sign-up`): a user with no way to sign in but
//! its session, so an app can keep state for a visitor before they sign up. Signing up by
//! password, code or OAuth while signed in as one upgrades that same user (id, teams and
//! metadata kept) and answers a new session. Those never upgraded are deleted after the
//! project's `anonymous_user_max_age_seconds` by `sweep`.

use std::sync::Arc;
use std::time::Duration;

use latchkey_shared::events::Event;
use latchkey_shared::grpc::Context;
use latchkey_shared::headers::AccessType;
use serde_json::Value;
use uuid::Uuid;

use super::sessions::{self, Tokens};
use super::settings::Settings;
use super::users;
use crate::app::App;
use crate::error::Result;
use crate::store::accounts::{Revoke, UserRow};

/// `POST /auth/anonymous/sign-up`: a new anonymous user and its session. Not a sign-up in the
/// project's sense (Stack Auth allows it with sign-up disabled): the visitor can do nothing
/// that needs an account until they sign up for real.
pub async fn sign_up(app: &App, ctx: &Context) -> Result<(Value, Tokens)> {
    let (_, settings) = app.project(ctx.project_id).await?;
    let now = app.now();
    let mut row = users::new_row(ctx.project_id, now);
    row.is_anonymous = true;
    let (session, refresh_token) = sessions::new_session(
        ctx.project_id,
        row.id,
        now,
        sessions::DEFAULT_LIFETIME_MILLIS,
        false,
    );
    let session_id = session.session.id;
    let (user, _) = users::finish_create(app, ctx, row, &settings, None, Some(session)).await?;
    let tokens =
        sessions::tokens_for(app, ctx.project_id, &user, session_id, refresh_token).await?;
    Ok((user, tokens))
}

/// The caller's user row when the caller is signed in as an anonymous user: a sign-up by it
/// upgrades that user instead of creating another.
pub async fn caller(app: &App, ctx: &Context) -> Result<Option<UserRow>> {
    if ctx.access_type != AccessType::Client {
        return Ok(None);
    }
    let Some(id) = ctx.user_id else {
        return Ok(None);
    };
    Ok(app
        .accounts
        .user_from_database(ctx.project_id, id)
        .await?
        .filter(|row| row.is_anonymous))
}

/// Makes `row`, an anonymous user whose first way to sign in the caller has set on it (and
/// whose address, if any, is reserved), a full user, and sends `user.updated`. The caller then
/// opens a new session (the SDK keys sessions by refresh token); the anonymous sessions stay,
/// now the upgraded user's.
pub async fn upgrade(
    app: &App,
    ctx: &Context,
    mut row: UserRow,
    settings: &Settings,
) -> Result<()> {
    row.is_anonymous = false;
    let channels = users::channels_of(app, ctx, &[row.id]).await?;
    let user = users::view(&row, users::of(&channels, &row.id), &[], settings);
    let event = Event::new("user.updated", ctx.project_id, app.now(), user);
    app.accounts
        .update_user(&row, Revoke::None, &[event])
        .await?;
    Ok(())
}

/// Longest pause between sweeps; a project with a shorter age is swept at half its age. A
/// sweep costs one read of the project list (settings come with it) plus one index read per
/// project that set an age.
const SWEEP_EVERY: Duration = Duration::from_secs(10);
/// Users deleted per project per sweep, so one sweep stays short.
const SWEEP_BATCH: i64 = 500;

/// Deletes anonymous users older than their project's `anonymous_user_max_age_seconds`, with
/// the effects of any deletion (`user.deleted`, channels, memberships), until `stop`. Every
/// auth replica sweeps; a user two replicas pick at once is deleted once and the other delete
/// finds nothing.
pub async fn sweep(app: Arc<App>, stop: impl std::future::Future<Output = ()>) {
    tokio::pin!(stop);
    loop {
        let pause = match sweep_once(&app).await {
            Ok(shortest) => shortest.map_or(SWEEP_EVERY, |s| (s / 2).min(SWEEP_EVERY)),
            Err(e) => {
                tracing::warn!(error = %e, "anonymous-user sweep failed");
                SWEEP_EVERY
            }
        };
        tokio::select! {
            () = &mut stop => return,
            () = tokio::time::sleep(pause.max(Duration::from_millis(500))) => {}
        }
    }
}

/// One sweep over every project; the shortest age any project set.
async fn sweep_once(app: &App) -> Result<Option<Duration>> {
    let mut shortest: Option<Duration> = None;
    for project in app.projects.projects().await? {
        let Some(age) = Settings::from_json(&project.settings)
            .ok()
            .and_then(|s| s.anonymous_user_max_age_seconds)
        else {
            continue;
        };
        let age = Duration::from_secs(age);
        shortest = Some(shortest.map_or(age, |s| s.min(age)));
        let before = app.now() - i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        let ctx = Context {
            project_id: project.id,
            access_type: AccessType::Server,
            user_id: None,
            request_id: None,
        };
        for id in app
            .accounts
            .anonymous_before(project.id, before, SWEEP_BATCH)
            .await?
        {
            match users::delete(app, &ctx, id).await {
                Ok(()) => {
                    tracing::info!(user = %id, project = %project.id, "old anonymous user deleted")
                }
                Err(crate::error::Error::Coded(c))
                    if c.code == latchkey_shared::error::ErrorCode::UserNotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(shortest)
}

/// The anonymous user `id` if it still is one (an OAuth flow started by it may finish after it
/// was upgraded or deleted).
pub async fn still_anonymous(app: &App, project: Uuid, id: Uuid) -> Result<Option<UserRow>> {
    Ok(app
        .accounts
        .user_from_database(project, id)
        .await?
        .filter(|row| row.is_anonymous))
}
