//! Anonymous users (Stack Auth's `/auth/anonymous/sign-up`): a user with no way to sign in but
//! its session, so an app can keep state for a visitor before they sign up. Signing up by
//! password, code or OAuth while signed in as one upgrades that same user (id, teams and
//! metadata kept) and answers a new session. Those never upgraded are deleted after the
//! project's `anonymous_user_max_age_seconds` by `sweep`.

use std::sync::Arc;
use std::time::Duration;

use latchkey_shared::error::{CodedError, ErrorCode};
use latchkey_shared::events::Event;
use latchkey_shared::grpc::Context;
use latchkey_shared::headers::AccessType;
use serde_json::Value;
use uuid::Uuid;

use super::sessions::{self, Tokens};
use super::settings::Settings;
use super::users;
use crate::app::App;
use crate::error::{coded, Error, Result};
use crate::store::accounts::UserRow;

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
    match ctx.user_id {
        Some(id) => still_anonymous(app, ctx.project_id, id).await,
        None => Ok(None),
    }
}

/// Makes `row`, an anonymous user whose first way to sign in the caller has set on it, a full
/// user with the address reserved for it, and sends `user.updated`; as `users::finish_create`
/// does for a new user, a failure releases the reserved address. The caller then opens a new
/// session (the SDK keys sessions by refresh token); the anonymous sessions stay, now the
/// upgraded user's. Refused when the user stopped being anonymous meanwhile (another sign-up
/// upgraded it, or the sweep deleted it).
pub async fn upgrade(
    app: &App,
    ctx: &Context,
    row: UserRow,
    settings: &Settings,
    reserved_channel: Option<Uuid>,
) -> Result<()> {
    let upgraded = make_full(app, ctx, row, settings).await;
    users::release_on_error(app, ctx, reserved_channel, upgraded).await
}

async fn make_full(app: &App, ctx: &Context, mut row: UserRow, settings: &Settings) -> Result<()> {
    row.is_anonymous = false;
    let channels = users::channels_of(app, ctx, &[row.id]).await?;
    let user = users::view(&row, users::of(&channels, &row.id), &[], settings);
    let event = Event::new("user.updated", ctx.project_id, app.now(), user);
    if app.accounts.upgrade_anonymous(&row, &[event]).await? {
        Ok(())
    } else {
        Err(upgraded_meanwhile())
    }
}

fn upgraded_meanwhile() -> Error {
    coded(
        ErrorCode::BadRequest,
        "This anonymous user was signed up or deleted meanwhile; sign in instead.",
    )
}

/// The answer of a sign-up whose address reservation failed. Two sign-ups racing to upgrade
/// one anonymous user each reserve a primary address for it, and contacts keeps one primary
/// per user: the loser gets the refusal [`upgrade`] gives a loser, not "the user already has
/// this address".
pub fn reservation_refused(upgrading: bool, e: Error) -> Error {
    match e {
        Error::Upstream(status)
            if upgrading
                && CodedError::from_status(&status).code
                    == ErrorCode::ContactChannelAlreadyExists =>
        {
            upgraded_meanwhile()
        }
        other => other,
    }
}

/// Longest pause between sweeps; a project with a shorter age is swept at half its age, but
/// not more often than `SWEEP_AT_MOST`. A sweep costs one read of the project list (settings
/// come with it) plus one index read per project that set an age.
const SWEEP_EVERY: Duration = Duration::from_secs(10);
const SWEEP_AT_MOST: Duration = Duration::from_secs(1);
/// Users deleted per project per sweep, so one sweep stays short.
const SWEEP_BATCH: i64 = 500;

/// Deletes anonymous users older than their project's `anonymous_user_max_age_seconds`, with
/// the effects of any deletion, until `stop`. Every auth replica sweeps; the deletion is
/// conditional (still anonymous, still that old), so a user upgraded meanwhile is kept and a
/// user two replicas pick at once is deleted once.
pub async fn sweep(app: Arc<App>, stop: impl std::future::Future<Output = ()>) {
    tokio::pin!(stop);
    loop {
        let pause = tokio::select! {
            () = &mut stop => return,
            shortest = sweep_once(&app) => match shortest {
                Ok(shortest) => shortest.map_or(SWEEP_EVERY, |s| (s / 2).min(SWEEP_EVERY)),
                Err(e) => {
                    tracing::warn!(error = %e, "anonymous-user sweep failed");
                    SWEEP_EVERY
                }
            },
        };
        tokio::select! {
            () = &mut stop => return,
            () = tokio::time::sleep(pause.max(SWEEP_AT_MOST)) => {}
        }
    }
}

/// One sweep over every project; the shortest age any project set. A project whose settings
/// do not parse, or a user that cannot be deleted now, is logged and left for the next sweep.
async fn sweep_once(app: &App) -> Result<Option<Duration>> {
    let mut shortest: Option<Duration> = None;
    for project in app.projects.projects().await? {
        let age = match Settings::from_json(&project.settings) {
            Ok(settings) => settings.anonymous_user_max_age_seconds,
            Err(e) => {
                tracing::warn!(project = %project.id, error = %e.0, "settings do not parse; not swept");
                None
            }
        };
        let Some(age) = age.map(Duration::from_secs) else {
            continue;
        };
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
            match delete_old(app, &ctx, id, before).await {
                Ok(true) => {
                    tracing::info!(user = %id, project = %project.id, "old anonymous user deleted");
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(user = %id, project = %project.id, error = %e, "could not delete an old anonymous user");
                }
            }
        }
    }
    Ok(shortest)
}

/// Deletes the user if it is still anonymous and signed up before `before`: the row goes first,
/// conditionally, so an upgrade that got there first wins; then contacts and teams drop what
/// they hold of it (and finish from `user.deleted` if they cannot now).
async fn delete_old(app: &App, ctx: &Context, id: Uuid, before: i64) -> Result<bool> {
    let team_ids = users::teams_of_user(app, ctx, id).await?;
    let events = users::deletion_events(ctx.project_id, id, &team_ids, app.now());
    if !app
        .accounts
        .delete_anonymous_user(ctx.project_id, id, before, &events)
        .await?
    {
        return Ok(false);
    }
    if let Err(e) = users::remove_elsewhere(app, ctx, id).await {
        tracing::warn!(user = %id, error = %e, "contacts or teams will drop the user from user.deleted");
    }
    Ok(true)
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
