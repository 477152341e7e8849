//! Teams and memberships (30 §1–2) and team-permission grants (50 §2).

use latchkey_shared::clock::SharedClock;
use latchkey_shared::error::ErrorCode;
use latchkey_shared::events::Event;
use latchkey_shared::grpc::auth::Auth;
use latchkey_shared::grpc::Context;
use latchkey_shared::headers::AccessType;
use serde_json::{json, Value};
use uuid::Uuid;

use super::permissions::{self, membership_not_found};
use crate::error::{coded, Error, Result};
use crate::store::{Grant, Store, StoreError, Team};

pub struct Teams {
    pub store: Store,
    pub auth: Auth,
    pub contacts: Contacts,
    pub codes: latchkey_shared::codes::Codes,
    pub clock: SharedClock,
}

pub type Contacts = latchkey_proto::contacts::v1::contacts_client::ContactsClient<
    tonic::service::interceptor::InterceptedService<
        latchkey_shared::grpc::Channel,
        latchkey_shared::grpc::PresentCaller,
    >,
>;

fn is_client(ctx: &Context) -> bool {
    ctx.access_type == AccessType::Client
}

fn metadata(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// The server read shape (30 §1.1); the gateway derives the client one.
pub fn team_json(t: &Team) -> Value {
    json!({
        "id": t.id,
        "display_name": t.display_name,
        "profile_image_url": t.profile_image_url,
        "client_metadata": metadata(&t.client_metadata),
        "client_read_only_metadata": metadata(&t.client_read_only_metadata),
        "server_metadata": metadata(&t.server_metadata),
        "created_at_millis": t.created_at_millis,
    })
}

fn team_not_found(id: Uuid) -> Error {
    coded(
        ErrorCode::TeamNotFound,
        format!("No team with id {id} exists."),
        json!({ "team_id": id }),
    )
}

fn user_not_found(id: Uuid) -> Error {
    coded(
        ErrorCode::UserNotFound,
        format!("No user with id {id} exists."),
        json!({ "user_id": id }),
    )
}

/// Applies a create or update body to `team`, with the field set of the caller (30 §1.1).
fn apply(team: &mut Team, body: &Value, client: bool, creating: bool) -> Result<()> {
    let Value::Object(map) = body else {
        return Err(Error::Invalid("the body must be a JSON object".into()));
    };
    let allowed: &[&str] = if client {
        &["display_name", "profile_image_url", "client_metadata"]
    } else {
        &[
            "display_name",
            "profile_image_url",
            "client_metadata",
            "client_read_only_metadata",
            "server_metadata",
        ]
    };
    let unknown: Vec<&str> = map
        .keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k))
        .collect();
    if !unknown.is_empty() {
        return Err(Error::Invalid(format!(
            "body contains unknown properties: {}",
            unknown.join(", ")
        )));
    }
    if creating && !map.contains_key("display_name") {
        return Err(Error::Invalid("display_name is required".into()));
    }
    for (key, value) in map {
        match key.as_str() {
            "display_name" => {
                team.display_name = value
                    .as_str()
                    .ok_or_else(|| Error::Invalid("display_name must be a string".into()))?
                    .to_owned()
            }
            "profile_image_url" => team.profile_image_url = image(value, client)?,
            "client_metadata" => team.client_metadata = value.to_string(),
            "client_read_only_metadata" => team.client_read_only_metadata = value.to_string(),
            "server_metadata" => team.server_metadata = value.to_string(),
            _ => {}
        }
    }
    Ok(())
}

pub(crate) fn image(value: &Value, client: bool) -> Result<Option<String>> {
    let Some(text) = value.as_str() else {
        return if value.is_null() {
            Ok(None)
        } else {
            Err(Error::Invalid(
                "profile_image_url must be a string or null".into(),
            ))
        };
    };
    match latchkey_shared::images::check(text, client) {
        Ok(()) => Ok(Some(text.to_owned())),
        Err(latchkey_shared::images::ImageError::Size) => Err(Error::Invalid(
            "profile_image_url is empty or too long".into(),
        )),
        Err(latchkey_shared::images::ImageError::Invalid) => Err(coded(
            ErrorCode::InvalidProfileImageUrl,
            "The profile image must be an http(s) URL (servers only) or a base64 image.",
            Value::Null,
        )),
    }
}

/// Permission ids from a settings list such as `team_member_default_permissions`.
fn default_permissions(settings: &Value, key: &str) -> Vec<String> {
    settings[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["id"].as_str().map(str::to_owned))
        .collect()
}

fn permission_event(kind: &str, project: Uuid, g: &Grant, now: i64) -> Event {
    Event::new(
        kind,
        project,
        now,
        json!({ "id": g.2, "team_id": g.0, "user_id": g.1 }),
    )
}

impl Teams {
    async fn team(&self, ctx: &Context, id: Uuid) -> Result<Team> {
        self.store
            .team(ctx.project_id, id)
            .await?
            .ok_or_else(|| team_not_found(id))
    }

    /// The caller of a client request, who must be signed in.
    fn caller(ctx: &Context) -> Result<Uuid> {
        ctx.user_id.ok_or_else(|| {
            coded(
                ErrorCode::UserAuthenticationRequired,
                "This endpoint needs a signed-in user.",
                Value::Null,
            )
        })
    }

    async fn ensure_user(&self, ctx: &Context, user: Uuid) -> Result<()> {
        if self.auth.user_exists(ctx, &user.to_string()).await? {
            Ok(())
        } else {
            Err(user_not_found(user))
        }
    }

    pub async fn list(&self, ctx: &Context, user: Option<Uuid>) -> Result<Vec<Value>> {
        Ok(self
            .store
            .teams(ctx.project_id, user)
            .await?
            .iter()
            .map(team_json)
            .collect())
    }

    /// The teams with these ids that exist, in the order asked.
    pub async fn get_many(&self, ctx: &Context, ids: &[Uuid]) -> Result<Vec<Value>> {
        let found = self.store.teams_by_ids(ctx.project_id, ids).await?;
        Ok(ids
            .iter()
            .filter_map(|id| found.iter().find(|t| t.id == *id))
            .map(team_json)
            .collect())
    }

    pub async fn create(
        &self,
        ctx: &Context,
        body: &Value,
        creator: Option<Uuid>,
    ) -> Result<Value> {
        let settings = self.auth.settings(ctx).await?;
        if is_client(ctx) {
            Self::caller(ctx)?;
            if settings["client_team_creation_enabled"] != true {
                return Err(coded(
                    ErrorCode::ClientTeamCreationDisabled,
                    "Clients may not create teams in this project.",
                    Value::Null,
                ));
            }
        }
        let now = self.clock.now_millis();
        let mut team = Team {
            project_id: ctx.project_id,
            id: Uuid::now_v7(),
            display_name: String::new(),
            profile_image_url: None,
            client_metadata: "null".into(),
            client_read_only_metadata: "null".into(),
            server_metadata: "null".into(),
            created_at_millis: now,
        };
        apply(&mut team, body, is_client(ctx), true)?;
        if let Some(user) = creator {
            self.ensure_user(ctx, user).await?;
        }
        let grants = default_permissions(&settings, "team_creator_default_permissions");
        let json = team_json(&team);
        // The creator's membership and grants emit nothing (30 §1.3, Stack behaviour).
        let event = Event::new("team.created", ctx.project_id, now, json.clone());
        self.store
            .insert_team(&team, creator.map(|u| (u, grants.as_slice())), &[event])
            .await?;
        Ok(json)
    }

    pub async fn get(&self, ctx: &Context, id: Uuid) -> Result<Value> {
        if is_client(ctx) {
            let me = Self::caller(ctx)?;
            if !self.store.is_member(ctx.project_id, id, me).await? {
                return Err(membership_not_found(id, me));
            }
        }
        Ok(team_json(&self.team(ctx, id).await?))
    }

    pub async fn update(&self, ctx: &Context, id: Uuid, body: &Value) -> Result<Value> {
        if is_client(ctx) {
            permissions::require(
                &self.store,
                ctx.project_id,
                id,
                Self::caller(ctx)?,
                permissions::UPDATE_TEAM,
            )
            .await?;
        }
        let mut team = self.team(ctx, id).await?;
        apply(&mut team, body, is_client(ctx), false)?;
        let json = team_json(&team);
        let event = Event::new(
            "team.updated",
            ctx.project_id,
            self.clock.now_millis(),
            json.clone(),
        );
        self.store.update_team(&team, &[event]).await?;
        Ok(json)
    }

    pub async fn delete(&self, ctx: &Context, id: Uuid) -> Result<()> {
        if is_client(ctx) {
            permissions::require(
                &self.store,
                ctx.project_id,
                id,
                Self::caller(ctx)?,
                permissions::DELETE_TEAM,
            )
            .await?;
        }
        let event = Event::new(
            "team.deleted",
            ctx.project_id,
            self.clock.now_millis(),
            json!({ "id": id }),
        );
        // Auth holds the users' selections: unselect first, so that auth being down fails the
        // deletion with nothing changed, and a reader never sees a deleted team selected.
        self.auth.clear_selected_team(ctx, id, None).await?;
        if self.store.delete_team(ctx.project_id, id, &[event]).await? {
            // Pending invitations to the team go with it (30 §1.5).
            for invitation in self
                .codes
                .pending(ctx.project_id, super::invitations::KIND)
                .await?
            {
                if invitation.data["team_id"] == id.to_string().as_str() {
                    self.codes
                        .delete(ctx.project_id, super::invitations::KIND, invitation.id)
                        .await?;
                }
            }
            Ok(())
        } else {
            Err(team_not_found(id))
        }
    }

    /// `POST /team-memberships` (server): member default permissions, then the events in order.
    pub async fn add_member(&self, ctx: &Context, team: Uuid, user: Uuid) -> Result<()> {
        self.ensure_user(ctx, user).await?;
        self.team(ctx, team).await?;
        self.add_member_with(ctx, team, user, &[]).await
    }

    /// Adds a member with the member defaults plus `extra` grants, emitting the membership
    /// event before the permission events (60 §2.1).
    pub async fn add_member_with(
        &self,
        ctx: &Context,
        team: Uuid,
        user: Uuid,
        extra: &[String],
    ) -> Result<()> {
        let settings = self.auth.settings(ctx).await?;
        let mut grants = default_permissions(&settings, "team_member_default_permissions");
        for p in extra {
            if !grants.contains(p) {
                grants.push(p.clone());
            }
        }
        let now = self.clock.now_millis();
        let mut events = vec![Event::new(
            "team_membership.created",
            ctx.project_id,
            now,
            json!({ "team_id": team, "user_id": user }),
        )];
        events.extend(grants.iter().map(|p| {
            permission_event(
                "team_permission.created",
                ctx.project_id,
                &(team, user, p.clone()),
                now,
            )
        }));
        match self
            .store
            .add_member(ctx.project_id, team, user, &grants, now, &events)
            .await
        {
            Ok(()) => Ok(()),
            Err(StoreError::Conflict) => Err(coded(
                ErrorCode::TeamMembershipAlreadyExists,
                "The user is already a member.",
                Value::Null,
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// `DELETE /team-memberships`: anyone may leave; removing others needs `$remove_members`.
    pub async fn remove_member(&self, ctx: &Context, team: Uuid, user: Uuid) -> Result<()> {
        if is_client(ctx) {
            let me = Self::caller(ctx)?;
            if me != user {
                permissions::require(
                    &self.store,
                    ctx.project_id,
                    team,
                    me,
                    permissions::REMOVE_MEMBERS,
                )
                .await?;
            }
        }
        let event = Event::new(
            "team_membership.deleted",
            ctx.project_id,
            self.clock.now_millis(),
            json!({ "team_id": team, "user_id": user }),
        );
        self.auth.clear_selected_team(ctx, team, Some(user)).await?;
        if self
            .store
            .remove_member(ctx.project_id, team, user, &[event])
            .await?
        {
            Ok(())
        } else {
            Err(membership_not_found(team, user))
        }
    }

    pub async fn check_member(&self, ctx: &Context, team: Uuid, user: Uuid) -> Result<()> {
        if self.store.is_member(ctx.project_id, team, user).await? {
            Ok(())
        } else {
            Err(membership_not_found(team, user))
        }
    }

    /// `GET /team-permissions` (50 §2): filters combine; `recursive` expands containment.
    pub async fn list_permissions(
        &self,
        ctx: &Context,
        team: Option<Uuid>,
        user: Option<Uuid>,
        permission: Option<&str>,
        recursive: bool,
    ) -> Result<Vec<Value>> {
        let grants = self.store.grants(ctx.project_id, team, user).await?;
        let defs = permissions::Definitions::load(&self.store, ctx.project_id).await?;
        let mut rows: Vec<Grant> = Vec::new();
        let mut pairs: Vec<(Uuid, Uuid)> = grants.iter().map(|g| (g.0, g.1)).collect();
        pairs.dedup();
        for (t, u) in pairs {
            let direct = grants
                .iter()
                .filter(|g| g.0 == t && g.1 == u)
                .map(|g| g.2.as_str());
            let ids: Vec<String> = if recursive {
                defs.expand(direct).into_iter().collect()
            } else {
                direct.map(str::to_owned).collect()
            };
            rows.extend(
                ids.into_iter()
                    .filter(|id| permission.is_none_or(|p| p == id))
                    .map(|id| (t, u, id)),
            );
        }
        rows.sort();
        Ok(rows
            .iter()
            .map(|g| json!({ "id": g.2, "team_id": g.0, "user_id": g.1 }))
            .collect())
    }

    async fn check_grantable(&self, ctx: &Context, g: &Grant) -> Result<()> {
        self.ensure_user(ctx, g.1).await?;
        if !self.store.is_member(ctx.project_id, g.0, g.1).await? {
            return Err(membership_not_found(g.0, g.1));
        }
        let defs = permissions::Definitions::load(&self.store, ctx.project_id).await?;
        permissions::check_scope(&defs, &g.2, permissions::Scope::Team)
    }

    /// Grants (idempotently, emitting the event each time, 50 §2.3).
    pub async fn grant(&self, ctx: &Context, g: Grant) -> Result<()> {
        self.check_grantable(ctx, &g).await?;
        let event = permission_event(
            "team_permission.created",
            ctx.project_id,
            &g,
            self.clock.now_millis(),
        );
        self.store.grant(ctx.project_id, &g, &[event]).await?;
        Ok(())
    }

    /// Revokes a direct grant; one held only through containment cannot be revoked alone.
    pub async fn revoke(&self, ctx: &Context, g: Grant) -> Result<()> {
        self.ensure_user(ctx, g.1).await?;
        if !self.store.is_member(ctx.project_id, g.0, g.1).await? {
            return Err(membership_not_found(g.0, g.1));
        }
        let event = permission_event(
            "team_permission.deleted",
            ctx.project_id,
            &g,
            self.clock.now_millis(),
        );
        if self.store.revoke(ctx.project_id, &g, &[event]).await? {
            Ok(())
        } else {
            Err(coded(
                ErrorCode::TeamPermissionNotFound,
                "The user does not hold this permission directly.",
                json!({ "team_id": g.0, "user_id": g.1, "permission_id": g.2 }),
            ))
        }
    }
}
