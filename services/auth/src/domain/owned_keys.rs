//! API keys of users and teams (Stack Auth's `/user-api-keys` and `/team-api-keys`): a backend
//! gives its users or their teams keys to call it with, and asks Latchkey whose a key is.
//! Each kind is switched on by a project setting. A client manages its own user's keys, and a
//! team's keys when its user holds `$manage_api_keys` in that team; servers manage any.

use latchkey_proto::teams::v1 as teams;
use latchkey_shared::crypto::{hash_secret, random_base32};
use latchkey_shared::error::ErrorCode;
use latchkey_shared::events::Event;
use latchkey_shared::grpc::Context;
use latchkey_shared::headers::AccessType;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::users;
use crate::app::App;
use crate::error::{coded, Error, Result};
use crate::store::owned_keys::{OwnedKey, Owner};
use crate::store::StoreError;

/// The team permission that lets a member manage the team's keys.
pub const MANAGE_PERMISSION: &str = "$manage_api_keys";
const SECRET_LEN: usize = 45;
const MAX_DESCRIPTION_CHARS: usize = 1000;

/// Which of the two families a route serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    User,
    Team,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Team => "team",
        }
    }

    fn of(owner: Owner) -> Self {
        match owner {
            Owner::User(_) => Self::User,
            Owner::Team(_) => Self::Team,
        }
    }

    fn event(self, what: &str) -> String {
        format!("{}_api_key.{what}", self.as_str())
    }
}

/// What a new key is for.
pub struct NewKey {
    pub owner: Owner,
    pub description: String,
    /// None: it never expires. A time in the past makes a key that is already expired.
    pub expires_at_millis: Option<i64>,
    pub is_public: bool,
}

fn not_found() -> Error {
    coded(ErrorCode::ApiKeyNotFound, "API key not found.")
}

async fn require_enabled(app: &App, ctx: &Context, kind: Kind) -> Result<()> {
    let (_, settings) = app.project(ctx.project_id).await?;
    let enabled = match kind {
        Kind::User => settings.allow_user_api_keys,
        Kind::Team => settings.allow_team_api_keys,
    };
    if enabled {
        return Ok(());
    }
    let (what, setting) = match kind {
        Kind::User => ("User", "allow_user_api_keys"),
        Kind::Team => ("Team", "allow_team_api_keys"),
    };
    Err(coded(
        ErrorCode::ApiKeysNotEnabled,
        format!("{what} API keys are not enabled for this project (setting `{setting}`)."),
    ))
}

/// Whether the team exists now. Auth deletes a team's keys when it hears of the deletion; until
/// then this keeps them from answering.
async fn team_exists(app: &App, ctx: &Context, team: Uuid) -> Result<bool> {
    let request = teams::TeamIds {
        team_ids: vec![team.to_string()],
    };
    let found = app
        .teams()
        .get_teams(app.to_service(ctx, request))
        .await?
        .into_inner();
    Ok(!found.items_json.is_empty())
}

/// May the caller manage `owner`'s keys? Servers may manage any existing owner's. A client
/// may manage its own user's, and a team's when its user holds `MANAGE_PERMISSION` there
/// (directly or through containment); for a team it may not manage, the answer is the same as
/// for a key that does not exist, so the team's existence is not revealed.
async fn authorize(app: &App, ctx: &Context, owner: Owner) -> Result<()> {
    if ctx.access_type != AccessType::Client {
        return match owner {
            Owner::User(user) => app
                .accounts
                .user(ctx.project_id, user)
                .await?
                .map(drop)
                .ok_or_else(|| users::not_found(user)),
            Owner::Team(team) if team_exists(app, ctx, team).await? => Ok(()),
            Owner::Team(team) => Err(coded(
                ErrorCode::TeamNotFound,
                format!("No team with id {team} exists."),
            )),
        };
    }
    let Some(me) = ctx.user_id else {
        return Err(coded(
            ErrorCode::UserAuthenticationRequired,
            "A signed-in user is required to manage API keys.",
        ));
    };
    match owner {
        Owner::User(user) if user == me => Ok(()),
        Owner::User(_) => Err(coded(
            ErrorCode::ClientAccessOwnUserOnly,
            "A client can only manage its own user's API keys.",
        )),
        Owner::Team(team) => {
            let request = teams::ListTeamPermissionsRequest {
                team_id: Some(team.to_string()),
                user_id: Some(me.to_string()),
                permission_id: Some(MANAGE_PERMISSION.into()),
                recursive: true,
            };
            let held = app
                .teams()
                .list_team_permissions(app.to_service(ctx, request))
                .await?
                .into_inner();
            if held.items_json.is_empty() {
                Err(not_found())
            } else {
                Ok(())
            }
        }
    }
}

/// The key as the API shows it: `value` is the whole secret once, at creation, and
/// `{last_four}` ever after. Absent times are left out, as Stack Auth does.
fn to_json(key: &OwnedKey, secret: Option<&str>) -> Value {
    let mut doc = Map::new();
    doc.insert("id".into(), json!(key.id));
    doc.insert("description".into(), json!(key.description));
    if let Some(at) = key.expires_at_millis {
        doc.insert("expires_at_millis".into(), json!(at));
    }
    if let Some(at) = key.revoked_at_millis {
        doc.insert("manually_revoked_at_millis".into(), json!(at));
    }
    doc.insert("created_at_millis".into(), json!(key.created_at_millis));
    doc.insert("is_public".into(), json!(key.is_public));
    doc.insert(
        "value".into(),
        match secret {
            Some(s) => json!(s),
            None => json!({ "last_four": key.last_four }),
        },
    );
    match key.owner() {
        Some(Owner::User(id)) => {
            doc.insert("type".into(), json!("user"));
            doc.insert("user_id".into(), json!(id));
        }
        Some(Owner::Team(id)) => {
            doc.insert("type".into(), json!("team"));
            doc.insert("team_id".into(), json!(id));
        }
        None => {}
    }
    Value::Object(doc)
}

/// A new secret: `sk_` (or `pk_` for a public key), the owner kind, then 45 random base32
/// characters (225 bits), so a leaked key says what it is.
fn new_secret(kind: Kind, is_public: bool) -> String {
    let visibility = if is_public { "pk" } else { "sk" };
    format!(
        "{visibility}_{}_{}",
        kind.as_str(),
        random_base32(SECRET_LEN).to_lowercase()
    )
}

fn check_description(description: &str) -> Result<()> {
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(Error::Invalid(format!(
            "description must be at most {MAX_DESCRIPTION_CHARS} characters"
        )));
    }
    Ok(())
}

/// `POST /{user,team}-api-keys`: the key, with its whole secret shown this once.
pub async fn create(app: &App, ctx: &Context, new: NewKey) -> Result<Value> {
    let kind = Kind::of(new.owner);
    require_enabled(app, ctx, kind).await?;
    check_description(&new.description)?;
    authorize(app, ctx, new.owner).await?;
    let secret = new_secret(kind, new.is_public);
    let (user_id, team_id) = match new.owner {
        Owner::User(id) => (Some(id), None),
        Owner::Team(id) => (None, Some(id)),
    };
    let key = OwnedKey {
        project_id: ctx.project_id,
        id: Uuid::now_v7(),
        user_id,
        team_id,
        description: new.description,
        is_public: new.is_public,
        secret_hash: hash_secret(&secret),
        last_four: secret[secret.len() - 4..].to_owned(),
        created_at_millis: app.now(),
        expires_at_millis: new.expires_at_millis,
        revoked_at_millis: None,
    };
    let event = Event::new(
        &kind.event("created"),
        ctx.project_id,
        key.created_at_millis,
        to_json(&key, None),
    );
    match app.owned_keys.insert(&key, &event).await {
        // The user was deleted since `authorize` looked.
        Err(StoreError::Db(e))
            if e.as_database_error()
                .is_some_and(|d| d.is_foreign_key_violation()) =>
        {
            return Err(users::not_found(user_id.unwrap_or_default()));
        }
        other => other?,
    }
    // A team deleted since `authorize` looked, after auth cleared its keys, would keep this
    // one for ever (refused, but stored): look again and clear it.
    if let Some(team) = team_id {
        if !team_exists(app, ctx, team).await? {
            app.owned_keys
                .delete_team_keys(ctx.project_id, team)
                .await?;
            return Err(coded(
                ErrorCode::TeamNotFound,
                format!("No team with id {team} exists."),
            ));
        }
    }
    Ok(to_json(&key, Some(&secret)))
}

/// `GET /{user,team}-api-keys?…_id=`: the owner's keys, newest first.
pub async fn list(app: &App, ctx: &Context, owner: Owner) -> Result<Vec<Value>> {
    require_enabled(app, ctx, Kind::of(owner)).await?;
    authorize(app, ctx, owner).await?;
    let keys = app.owned_keys.of(ctx.project_id, owner).await?;
    Ok(keys.iter().map(|k| to_json(k, None)).collect())
}

/// A key of `kind` the caller may manage; a key of the other kind is not found here.
async fn manageable(app: &App, ctx: &Context, kind: Kind, id: Uuid) -> Result<OwnedKey> {
    require_enabled(app, ctx, kind).await?;
    let key = app
        .owned_keys
        .get(ctx.project_id, id)
        .await?
        .ok_or_else(not_found)?;
    let owner = key.owner().ok_or_else(not_found)?;
    if Kind::of(owner) != kind {
        return Err(not_found());
    }
    match authorize(app, ctx, owner).await {
        // A server asking after a deleted team's key: the key went with the team.
        Err(Error::Coded(c)) if c.code == ErrorCode::TeamNotFound => Err(not_found()),
        other => other.map(|()| key),
    }
}

/// `GET /{user,team}-api-keys/{id}`.
pub async fn get(app: &App, ctx: &Context, kind: Kind, id: Uuid) -> Result<Value> {
    let key = manageable(app, ctx, kind, id).await?;
    Ok(to_json(&key, None))
}

/// `PATCH /{user,team}-api-keys/{id}`: a new description, and revocation, which is final.
pub async fn update(
    app: &App,
    ctx: &Context,
    kind: Kind,
    id: Uuid,
    description: Option<String>,
    revoke: bool,
) -> Result<Value> {
    description.as_deref().map(check_description).transpose()?;
    let mut key = manageable(app, ctx, kind, id).await?;
    let now = app.now();
    if let Some(d) = &description {
        key.description.clone_from(d);
    }
    let revoked_now = revoke && key.revoked_at_millis.is_none();
    if revoked_now {
        key.revoked_at_millis = Some(now);
    }
    let event = Event::new(
        &kind.event("revoked"),
        ctx.project_id,
        now,
        to_json(&key, None),
    );
    let revocation = revoked_now.then_some((now, &event));
    // A key that went with its user or team since `manageable` read it is not found.
    match app
        .owned_keys
        .update(ctx.project_id, id, description.as_deref(), revocation)
        .await
    {
        Err(StoreError::NotFound) => return Err(not_found()),
        other => other?,
    }
    // Read back: a concurrent revocation may have set the time first.
    let key = app
        .owned_keys
        .get(ctx.project_id, id)
        .await?
        .ok_or_else(not_found)?;
    Ok(to_json(&key, None))
}

/// `POST /{user,team}-api-keys/check` (servers): whose the key is, or why it is not valid, in
/// Stack Auth's order: unknown, wrong kind, revoked, expired.
pub async fn check(app: &App, ctx: &Context, kind: Kind, secret: &str) -> Result<Value> {
    require_enabled(app, ctx, kind).await?;
    let key = app
        .owned_keys
        .by_hash(ctx.project_id, &hash_secret(secret))
        .await?
        .ok_or_else(not_found)?;
    let owner = key.owner().ok_or_else(not_found)?;
    if let Owner::Team(team) = owner {
        if !team_exists(app, ctx, team).await? {
            return Err(not_found());
        }
    }
    let actual = Kind::of(owner);
    if actual != kind {
        return Err(coded(
            ErrorCode::WrongApiKeyType,
            format!(
                "This endpoint is for {} API keys, but a {} API key was provided.",
                kind.as_str(),
                actual.as_str()
            ),
        )
        .with_details(json!({ "expected_type": kind.as_str(), "actual_type": actual.as_str() })));
    }
    if key.revoked_at_millis.is_some() {
        return Err(coded(ErrorCode::ApiKeyRevoked, "API key has been revoked."));
    }
    if key.expires_at_millis.is_some_and(|at| at <= app.now()) {
        return Err(coded(ErrorCode::ApiKeyExpired, "API key has expired."));
    }
    Ok(to_json(&key, None))
}
