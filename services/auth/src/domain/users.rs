//! Users (20): the composed read shape, creation, updates, deletion and listing. E-mail
//! addresses come from the contacts service, in one batch call per read.

use std::collections::HashMap;

use latchkey_proto::contacts::v1 as contacts;
use latchkey_proto::teams::v1 as teams;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::events::Event;
use latchkey_shared::grpc::Context;
use serde_json::{json, Value};
use uuid::Uuid;

use super::settings::Settings;
use super::user_write::{Mode, UserWrite};
use crate::app::App;
use crate::error::{coded, Error, Result};
use crate::store::accounts::{Revoke, UserRow};
use crate::store::oauth::OAuthAccount;
use crate::store::StoreError;

pub fn not_found(id: Uuid) -> Error {
    coded(
        ErrorCode::UserNotFound,
        format!("No user with id {id} exists."),
    )
}

/// `not_found`, except for the signed-in user itself: its token outlived the user by a moment
/// (until the gateways learn of the deletion), and the contract answers that with 401
/// `ACCESS_TOKEN_EXPIRED`, as the gateways will a moment later.
pub fn not_found_for(ctx: &Context, id: Uuid) -> Error {
    if ctx.user_id == Some(id) {
        return coded(
            ErrorCode::AccessTokenExpired,
            "The session of this access token has ended.",
        );
    }
    not_found(id)
}

/// One user's channels, oldest first.
pub async fn channels_of_user(
    app: &App,
    ctx: &Context,
    user: Uuid,
) -> Result<Vec<contacts::Channel>> {
    Ok(channels_of(app, ctx, &[user])
        .await?
        .remove(&user)
        .unwrap_or_default())
}

/// Channels of `users`, keyed by user, from one contacts call (none for no users: contacts
/// reads a whole project's channels for an empty list).
pub async fn channels_of(
    app: &App,
    ctx: &Context,
    users: &[Uuid],
) -> Result<HashMap<Uuid, Vec<contacts::Channel>>> {
    if users.is_empty() {
        return Ok(HashMap::new());
    }
    let request = contacts::ListChannelsRequest {
        user_ids: users.iter().map(Uuid::to_string).collect(),
        contact_channel_id: None,
    };
    let list = app
        .contacts()
        .list_channels(app.to_service(ctx, request))
        .await?
        .into_inner();
    let mut by_user: HashMap<Uuid, Vec<contacts::Channel>> = HashMap::new();
    for c in list.items {
        if let Ok(user) = Uuid::parse_str(&c.user_id) {
            by_user.entry(user).or_default().push(c);
        }
    }
    Ok(by_user)
}

fn metadata(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// Provider records of `users`, keyed by user.
pub async fn oauth_of(
    app: &App,
    ctx: &Context,
    users: &[Uuid],
) -> Result<HashMap<Uuid, Vec<OAuthAccount>>> {
    let records = match users {
        [] => Vec::new(),
        [one] => app.oauth.of_user(ctx.project_id, *one).await?,
        many => app.oauth.of_users(ctx.project_id, many).await?,
    };
    let mut by_user: HashMap<Uuid, Vec<OAuthAccount>> = HashMap::new();
    for r in records {
        by_user.entry(r.user_id).or_default().push(r);
    }
    Ok(by_user)
}

pub fn of<'a, T>(map: &'a HashMap<Uuid, Vec<T>>, id: &Uuid) -> &'a [T] {
    map.get(id).map_or(&[][..], Vec::as_slice)
}

/// The server read shape (20 §1.1), from the user row, its channels and provider records.
pub fn view(
    row: &UserRow,
    channels: &[contacts::Channel],
    oauth: &[OAuthAccount],
    settings: &Settings,
) -> Value {
    let primary = channels.iter().find(|c| c.is_primary);
    let verified = primary.is_some_and(|c| c.is_verified);
    let restricted_reason = if row.is_anonymous {
        Some("anonymous")
    } else if settings.require_email_verification && !verified {
        Some("email_not_verified")
    } else if row.restricted_by_admin {
        Some("restricted_by_administrator")
    } else {
        None
    };
    let has_password = row.password_hash.is_some();
    json!({
        "id": row.id,
        "primary_email": primary.map(|c| c.value.clone()),
        "primary_email_verified": verified,
        "primary_email_auth_enabled": primary.is_some_and(|c| c.used_for_auth),
        "display_name": row.display_name,
        "profile_image_url": row.profile_image_url,
        "signed_up_at_millis": row.signed_up_at_millis,
        "last_active_at_millis": row.last_active_at_millis,
        "has_password": has_password,
        "otp_auth_enabled": row.otp_auth_enabled,
        "auth_with_email": has_password || row.otp_auth_enabled,
        "requires_totp_mfa": row.totp_secret.is_some(),
        "passkey_auth_enabled": row.passkey_auth_enabled,
        "client_metadata": metadata(&row.client_metadata),
        "client_read_only_metadata": metadata(&row.client_read_only_metadata),
        "server_metadata": metadata(&row.server_metadata),
        "selected_team_id": row.selected_team_id,
        "selected_team": null,
        "oauth_providers": oauth.iter().map(|r| json!({
            "id": r.provider_id, "account_id": r.account_id, "email": r.email,
        })).collect::<Vec<_>>(),
        "is_anonymous": row.is_anonymous,
        "is_restricted": restricted_reason.is_some(),
        "restricted_reason": restricted_reason.map(|t| json!({ "type": t })),
        "restricted_by_admin": row.restricted_by_admin,
        "restricted_by_admin_reason": row.restricted_by_admin_reason,
        "restricted_by_admin_private_details": row.restricted_by_admin_private_details,
        "country_code": row.country_code,
        "risk_scores": { "sign_up": { "bot": row.risk_score_bot, "free_trial_abuse": row.risk_score_free_trial_abuse } },
    })
}

/// The user's row, or the answer for a user that is not there.
async fn row_of(app: &App, ctx: &Context, id: Uuid) -> Result<UserRow> {
    app.accounts
        .user(ctx.project_id, id)
        .await?
        .ok_or_else(|| not_found_for(ctx, id))
}

/// Loads and composes one user: its row, provider records, channels (contacts) and settings
/// are read at once, and the selected team (teams) as soon as the row names it.
pub async fn get(app: &App, ctx: &Context, id: Uuid) -> Result<Value> {
    let ids = [id];
    let row_and_team = async {
        let row = row_of(app, ctx, id).await?;
        let team_ids = row.selected_team_id.iter().map(Uuid::to_string).collect();
        Ok::<_, Error>((row, selected_teams(app, ctx, team_ids).await?))
    };
    let ((row, teams), channels, oauth, (_, settings)) = tokio::try_join!(
        row_and_team,
        channels_of(app, ctx, &ids),
        oauth_of(app, ctx, &ids),
        app.project(ctx.project_id),
    )?;
    let mut user = [view(&row, of(&channels, &id), of(&oauth, &id), &settings)];
    show_selected_teams(&mut user, &teams);
    let [user] = user;
    Ok(user)
}

/// The user as an access token describes it (70 §1.1): row, channels and settings. Provider
/// records and the selected team's contents are left out, as no claim shows them. The selected
/// team is not re-checked either: deleting a team unselects it first, and claims are a snapshot
/// at issue time (a team deleted in a race with its selection is cleared by `team.deleted`).
pub fn token_view(row: &UserRow, channels: &[contacts::Channel], settings: &Settings) -> Value {
    view(row, channels, &[], settings)
}

/// [`token_view`] of a user read now: row and channels at once.
pub async fn for_token(app: &App, ctx: &Context, id: Uuid, settings: &Settings) -> Result<Value> {
    let (row, channels) = tokio::try_join!(row_of(app, ctx, id), channels_of_user(app, ctx, id))?;
    Ok(token_view(&row, &channels, settings))
}

/// Several users composed with one contacts call, in the order of `ids`.
pub async fn get_many(app: &App, ctx: &Context, ids: &[Uuid]) -> Result<Vec<Value>> {
    let (_, settings) = app.project(ctx.project_id).await?;
    let rows = app.accounts.users_by_ids(ctx.project_id, ids).await?;
    let by_id: HashMap<Uuid, &UserRow> = rows.iter().map(|r| (r.id, r)).collect();
    let channels = channels_of(app, ctx, ids).await?;
    let oauth = oauth_of(app, ctx, ids).await?;
    let mut users: Vec<Value> = ids
        .iter()
        .filter_map(|id| by_id.get(id))
        .map(|r| view(r, of(&channels, &r.id), of(&oauth, &r.id), &settings))
        .collect();
    with_selected_teams(app, ctx, &mut users).await?;
    Ok(users)
}

/// A user id minted from its sign-up instant: a UUIDv7 whose timestamp is `now`, so ordering
/// users by id orders them by sign-up time (ties by id), which is the users list's order and
/// lets every service that keys rows by user id serve that order from its own index.
pub fn new_id(now: i64) -> Uuid {
    let millis = u64::try_from(now).unwrap_or_default();
    uuid::Builder::from_unix_timestamp_millis(millis, &rand::random::<[u8; 10]>()).into_uuid()
}

/// A fresh user row with defaults, signed up at `now`.
pub fn new_row(project: Uuid, now: i64) -> UserRow {
    UserRow {
        project_id: project,
        id: new_id(now),
        display_name: None,
        profile_image_url: None,
        client_metadata: "null".into(),
        client_read_only_metadata: "null".into(),
        server_metadata: "null".into(),
        password_hash: None,
        otp_auth_enabled: false,
        selected_team_id: None,
        restricted_by_admin: false,
        restricted_by_admin_reason: None,
        restricted_by_admin_private_details: None,
        country_code: None,
        risk_score_bot: 0,
        risk_score_free_trial_abuse: 0,
        signed_up_at_millis: now,
        last_active_at_millis: now,
        totp_secret: None,
        is_anonymous: false,
        passkey_auth_enabled: false,
    }
}

/// Applies the fields auth stores itself; returns whether the password changed.
async fn apply(
    app: &App,
    ctx: &Context,
    row: &mut UserRow,
    w: &UserWrite,
    settings: &Settings,
) -> Result<bool> {
    if let Some(v) = &w.display_name {
        row.display_name = v.clone();
    }
    if let Some(v) = &w.profile_image_url {
        row.profile_image_url = v.clone();
    }
    if let Some(v) = w.otp_auth_enabled {
        if v && !settings.magic_link_enabled {
            return Err(Error::BadRequest(
                "otp_auth_enabled needs the project's magic_link_enabled".into(),
            ));
        }
        row.otp_auth_enabled = v;
    }
    for (field, value) in [
        (&mut row.client_metadata, &w.client_metadata),
        (
            &mut row.client_read_only_metadata,
            &w.client_read_only_metadata,
        ),
        (&mut row.server_metadata, &w.server_metadata),
    ] {
        if let Some(v) = value {
            *field = UserWrite::metadata_text(v);
        }
    }
    if let Some(team) = &w.selected_team_id {
        if let Some(team) = team {
            let request = teams::MemberRef {
                team_id: team.to_string(),
                user_id: row.id.to_string(),
            };
            app.teams()
                .check_member(app.to_service(ctx, request))
                .await?;
        }
        row.selected_team_id = *team;
    }
    if let Some(flag) = w.restricted_by_admin {
        row.restricted_by_admin = flag;
        if !flag {
            row.restricted_by_admin_reason = None;
            row.restricted_by_admin_private_details = None;
        }
    }
    if let Some(v) = &w.restricted_by_admin_reason {
        row.restricted_by_admin_reason = v.clone();
    }
    if let Some(v) = &w.restricted_by_admin_private_details {
        row.restricted_by_admin_private_details = v.clone();
    }
    if let Some(v) = &w.country_code {
        row.country_code = v.clone();
    }
    if let Some(secret) = &w.totp_secret {
        row.totp_secret = secret
            .as_deref()
            .map(|s| app.secrets.seal(super::mfa::TOTP_SEALED_AS, s));
    }
    if let Some((bot, abuse)) = w.risk_scores {
        row.risk_score_bot = bot;
        row.risk_score_free_trial_abuse = abuse;
    }
    let mut password_changed = false;
    if let Some(p) = &w.password {
        if let Some(p) = p {
            super::passwords::check_common(p, settings)?;
            row.password_hash = Some(app.passwords.hash(p).await?);
        } else {
            row.password_hash = None;
        }
        password_changed = true;
    }
    if let Some(h) = &w.password_hash {
        row.password_hash = Some(h.clone());
        password_changed = true;
    }
    Ok(password_changed)
}

/// Contacts' "used for auth by someone else" is a taken e-mail on user paths.
pub fn email_taken(status: tonic::Status, email: &str) -> Error {
    let coded_err = latchkey_shared::error::CodedError::from_status(&status);
    if coded_err.code == ErrorCode::ContactChannelAlreadyUsedForAuthBySomeoneElse {
        coded(
            ErrorCode::UserEmailAlreadyExists,
            "This e-mail is already used for sign-in by another user.",
        )
        .with_details(json!({ "email": email, "would_work_if_email_was_verified": false }))
    } else {
        Error::Upstream(status)
    }
}

/// `POST /users` (20 §2.2.1): never sends mail.
pub async fn create(app: &App, ctx: &Context, body: &Value) -> Result<Value> {
    let w = UserWrite::parse(body, Mode::ServerCreate)?;
    let (_, settings) = app.project(ctx.project_id).await?;
    if (w.password.as_ref().is_some_and(Option::is_some) || w.password_hash.is_some())
        && !settings.credential_enabled
    {
        return Err(coded(
            ErrorCode::PasswordAuthenticationNotEnabled,
            "Password authentication is not enabled.",
        ));
    }
    let email = w.primary_email.clone().flatten();
    if email.is_none() {
        if w.primary_email_verified == Some(true) || w.primary_email_auth_enabled == Some(true) {
            return Err(Error::BadRequest(
                "primary_email_verified and primary_email_auth_enabled need a primary_email".into(),
            ));
        }
        if w.password.as_ref().is_some_and(Option::is_some) || w.password_hash.is_some() {
            return Err(Error::BadRequest("a password needs a primary_email".into()));
        }
    }
    let now = app.now();
    let mut row = new_row(ctx.project_id, now);
    let id = row.id;
    apply(app, ctx, &mut row, &w, &settings).await?;
    for linked in &w.oauth_providers {
        if !settings.oauth_providers.iter().any(|p| p.id == linked.id) {
            return Err(Error::BadRequest(format!(
                "oauth_providers: provider {} is not configured",
                linked.id
            )));
        }
    }
    let channel = match &email {
        Some(email) => Some(
            reserve_email(
                app,
                ctx,
                id,
                email,
                w.primary_email_verified.unwrap_or(false),
                w.primary_email_auth_enabled.unwrap_or(false),
            )
            .await?,
        ),
        None => None,
    };
    let (user, _) = finish_create(app, ctx, row, &settings, channel, None).await?;
    if w.oauth_providers.is_empty() {
        return Ok(user);
    }
    for linked in &w.oauth_providers {
        super::oauth::records::link_on_create(app, ctx, &settings, id, linked).await?;
    }
    get(app, ctx, id).await
}

/// Reserves `address` as the primary channel of a user about to be created: the first step of
/// the creation saga, undone by `finish_create` if the user cannot be written.
pub async fn reserve_email(
    app: &App,
    ctx: &Context,
    user_id: Uuid,
    address: &str,
    verified: bool,
    used_for_auth: bool,
) -> Result<Uuid> {
    let channel_id = Uuid::now_v7();
    let reserve = contacts::CreateChannelRequest {
        id: channel_id.to_string(),
        user_id: user_id.to_string(),
        value: address.to_owned(),
        used_for_auth,
        is_verified: verified,
        is_primary: true,
        check_user: false,
    };
    app.contacts()
        .create_channel(app.to_service(ctx, reserve))
        .await
        .map_err(|s| email_taken(s, address))?;
    Ok(channel_id)
}

/// Passes `outcome` on; when it failed, first releases the address reserved for it (if any),
/// so a failed sign-up leaves no channel behind.
pub async fn release_on_error<T>(
    app: &App,
    ctx: &Context,
    reserved_channel: Option<Uuid>,
    outcome: Result<T>,
) -> Result<T> {
    if let (Some(channel), Err(_)) = (reserved_channel, &outcome) {
        let release = contacts::ChannelRef {
            id: channel.to_string(),
        };
        if let Err(status) = app
            .contacts()
            .delete_channel(app.to_service(ctx, release))
            .await
        {
            tracing::error!(%channel, error = %status, "could not release a reserved e-mail");
        }
    }
    outcome
}

/// Second half of every user creation: inserts the row (with an optional first session) and
/// `user.created`; if that fails, releases the e-mail reserved in contacts so nothing is left
/// half-made (DESIGN §1 saga).
pub async fn finish_create(
    app: &App,
    ctx: &Context,
    row: UserRow,
    settings: &Settings,
    reserved_channel: Option<Uuid>,
    session: Option<crate::store::accounts::NewSession>,
) -> Result<(Value, Option<crate::store::accounts::NewSession>)> {
    let channels = channels_of(app, ctx, &[row.id]).await?;
    let user = view(&row, of(&channels, &row.id), &[], settings);
    let event = Event::new("user.created", ctx.project_id, app.now(), user.clone());
    let inserted = app
        .accounts
        .insert_user(&row, session.as_ref(), &[event])
        .await
        .map_err(Error::from);
    release_on_error(app, ctx, reserved_channel, inserted).await?;
    let mut user = user;
    // Default project permissions: no event (50 §1.2); a failure is logged, the account stands.
    let defaults = teams::UserRef {
        user_id: row.id.to_string(),
    };
    if let Err(e) = app
        .teams()
        .grant_user_defaults(app.to_service(ctx, defaults))
        .await
    {
        tracing::error!(user = %row.id, error = %e, "could not grant the default project permissions");
    }
    if settings.create_team_on_sign_up {
        personal_team(app, ctx, row.id, &mut user).await;
    }
    Ok((user, session))
}

/// Creates the user's personal team and selects it (30 §1.4). A failure leaves a user without
/// one, which is logged: the account itself is complete.
async fn personal_team(app: &App, ctx: &Context, user_id: Uuid, user: &mut Value) {
    let name = match (
        user["display_name"].as_str(),
        user["primary_email"].as_str(),
    ) {
        (Some(n), _) => format!("{n}'s Team"),
        (None, Some(e)) => format!("{e}'s Team"),
        (None, None) => "Personal Team".to_owned(),
    };
    let request = teams::CreateTeamRequest {
        body_json: json!({ "display_name": name }).to_string(),
        creator_user_id: Some(user_id.to_string()),
    };
    let created = async {
        let team = app
            .teams()
            .create_team(app.to_service(ctx, request))
            .await?
            .into_inner();
        let team: Value =
            serde_json::from_str(&team.json).map_err(|e| Error::Invalid(e.to_string()))?;
        let team_id = team["id"]
            .as_str()
            .and_then(|s| Uuid::parse_str(s).ok())
            .unwrap_or_default();
        app.accounts
            .set_selected_team(ctx.project_id, user_id, team_id)
            .await?;
        Ok::<_, Error>(team)
    }
    .await;
    match created {
        Ok(team) => {
            user["selected_team_id"] = team["id"].clone();
            user["selected_team"] = team;
        }
        Err(e) => {
            tracing::error!(user = %user_id, error = %e, "could not create the personal team")
        }
    }
}

/// `PATCH /users/{id}` and `/users/me`.
pub async fn update(app: &App, ctx: &Context, id: Uuid, body: &Value, mode: Mode) -> Result<Value> {
    let w = UserWrite::parse(body, mode)?;
    let (_, settings) = app.project(ctx.project_id).await?;
    let mut row = row_of(app, ctx, id).await?;
    let mut channels = channels_of(app, ctx, &[id])
        .await?
        .remove(&id)
        .unwrap_or_default();
    let has_email = match &w.primary_email {
        Some(e) => e.is_some(),
        None => channels.iter().any(|c| c.is_primary),
    };
    if (w.password.as_ref().is_some_and(Option::is_some) || w.password_hash.is_some()) && !has_email
    {
        return Err(Error::BadRequest("a password needs a primary_email".into()));
    }
    let password_changed = apply(app, ctx, &mut row, &w, &settings).await?;

    // The e-mail part lives in contacts and is applied first: it is the part that can conflict.
    let email_change = w.primary_email.is_some()
        || w.primary_email_verified.is_some()
        || w.primary_email_auth_enabled.is_some();
    if email_change {
        let current = channels
            .iter()
            .find(|c| c.is_primary)
            .map(|c| c.value.clone());
        let request = contacts::SetPrimaryEmailRequest {
            user_id: id.to_string(),
            email: w.primary_email.clone().flatten(),
            clear: matches!(w.primary_email, Some(None)),
            verified: w.primary_email_verified,
            auth_enabled: w.primary_email_auth_enabled,
            new_channel_id: Uuid::now_v7().to_string(),
        };
        let shown = request.email.clone().or(current).unwrap_or_default();
        channels = app
            .contacts()
            .set_primary_email(app.to_service(ctx, request))
            .await
            .map_err(|s| email_taken(s, &shown))?
            .into_inner()
            .items;
    }
    if w.remove_passkeys {
        // After the one step that can conflict; a change of its own, with its own
        // `user.updated`, since the row is rewritten separately below.
        super::passkeys::delete(app, ctx, id, None).await?;
        row.passkey_auth_enabled = false;
    }
    let oauth = oauth_of(app, ctx, &[row.id]).await?;
    let mut user = [view(&row, &channels, of(&oauth, &row.id), &settings)];
    with_selected_teams(app, ctx, &mut user).await?;
    let [user] = user;
    let event = Event::new("user.updated", ctx.project_id, app.now(), user.clone());
    let revoke = if password_changed {
        Revoke::All
    } else {
        Revoke::None
    };
    match app.accounts.update_user(&row, revoke, &[event]).await {
        Ok(_) => Ok(user),
        Err(StoreError::NotFound) => Err(not_found_for(ctx, id)),
        Err(e) => Err(e.into()),
    }
}

/// `DELETE /users/{id}` and `/users/me` (20 §2.2.5). What the API shows of the user in other
/// services goes before the answer, in a fixed order of idempotent calls: the teams read first
/// (teams unreachable: 503, nothing changed), then contacts frees the addresses (contacts
/// unreachable: 503, nothing changed), then teams drops memberships, profiles and grants, then
/// auth deletes the user with its sessions and OAuth records and enqueues one
/// `team_membership.deleted` per team and `user.deleted`. A failure after the first removal
/// answers 503 and a retry of the same deletion finishes it; the events still reach teams and
/// contacts, which finish a deletion that an outage interrupted.
pub async fn delete(app: &App, ctx: &Context, id: Uuid) -> Result<()> {
    row_of(app, ctx, id).await?;
    let team_ids = teams_of_user(app, ctx, id).await?;
    remove_elsewhere(app, ctx, id).await?;
    let events = deletion_events(ctx.project_id, id, &team_ids, app.now());
    match app.accounts.delete_user(ctx.project_id, id, &events).await {
        Ok(()) => Ok(()),
        Err(StoreError::NotFound) => Err(not_found_for(ctx, id)),
        Err(e) => Err(e.into()),
    }
}

/// The ids of the teams `id` is a member of (teams).
pub async fn teams_of_user(app: &App, ctx: &Context, id: Uuid) -> Result<Vec<String>> {
    let request = teams::UserRef {
        user_id: id.to_string(),
    };
    Ok(app
        .teams()
        .teams_of_user(app.to_service(ctx, request))
        .await?
        .into_inner()
        .team_ids)
}

/// Has contacts and teams drop what they hold of a deleted user: its channels, memberships and
/// grants.
pub async fn remove_elsewhere(app: &App, ctx: &Context, id: Uuid) -> Result<()> {
    let gone = contacts::UserRef {
        user_id: id.to_string(),
    };
    app.contacts()
        .remove_user(app.to_service(ctx, gone))
        .await?;
    let gone = teams::UserRef {
        user_id: id.to_string(),
    };
    app.teams().remove_user(app.to_service(ctx, gone)).await?;
    Ok(())
}

/// What a user's deletion tells others: `team_membership.deleted` per team it was in, then
/// `user.deleted`.
pub fn deletion_events(project: Uuid, id: Uuid, team_ids: &[String], now: i64) -> Vec<Event> {
    let mut events: Vec<Event> = team_ids
        .iter()
        .map(|t| {
            Event::new(
                "team_membership.deleted",
                project,
                now,
                json!({ "team_id": t, "user_id": id }),
            )
        })
        .collect();
    let teams: Vec<Value> = team_ids.iter().map(|t| json!({ "id": t })).collect();
    events.push(Event::new(
        "user.deleted",
        project,
        now,
        json!({ "id": id, "teams": teams }),
    ));
    events
}

/// Fills `selected_team` (server shape) for users that selected one, with one teams call for
/// just those teams.
pub async fn with_selected_teams(app: &App, ctx: &Context, users: &mut [Value]) -> Result<()> {
    let team_ids = users
        .iter()
        .filter_map(|u| u["selected_team_id"].as_str().map(str::to_owned))
        .collect();
    let teams = selected_teams(app, ctx, team_ids).await?;
    show_selected_teams(users, &teams);
    Ok(())
}

/// The teams `team_ids` name (server shape), by id; one teams call, none for no ids.
async fn selected_teams(
    app: &App,
    ctx: &Context,
    mut team_ids: Vec<String>,
) -> Result<HashMap<String, Value>> {
    if team_ids.is_empty() {
        return Ok(HashMap::new());
    }
    team_ids.sort_unstable();
    team_ids.dedup();
    let found = app
        .teams()
        .get_teams(app.to_service(ctx, teams::TeamIds { team_ids }))
        .await?
        .into_inner()
        .items_json;
    Ok(found
        .iter()
        .filter_map(|j| serde_json::from_str::<Value>(j).ok())
        .filter_map(|t| Some((t["id"].as_str()?.to_owned(), t)))
        .collect())
}

fn show_selected_teams(users: &mut [Value], teams: &HashMap<String, Value>) {
    for user in users.iter_mut() {
        let Some(selected) = user["selected_team_id"].as_str() else {
            continue;
        };
        // A team deleted while auth was unreachable for the unselecting call is not shown
        // selected; the `team.deleted` event clears the row when it arrives.
        match teams.get(selected) {
            Some(team) => user["selected_team"] = team.clone(),
            None => user["selected_team_id"] = Value::Null,
        }
    }
}
