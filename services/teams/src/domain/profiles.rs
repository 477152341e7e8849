//! Team member profiles (30 §3): a member's per-team name and image, falling back to the
//! user's own, with the full user (from auth, one batch call) for servers.

use latchkey_shared::error::ErrorCode;
use latchkey_shared::grpc::Context;
use latchkey_shared::headers::AccessType;
use serde_json::{json, Value};
use uuid::Uuid;

use super::permissions::{self, membership_not_found};
use super::teams::Teams;
use crate::error::{coded, Error, Result};
use crate::store::Member;

impl Teams {
    /// Server shape of each profile; the gateway drops `user` for clients. Auth is the source of
    /// truth for who exists: a membership whose user auth no longer knows (a deletion that an
    /// outage interrupted, finished later by the `user.deleted` event) is not shown.
    async fn compose(&self, ctx: &Context, members: &[Member]) -> Result<Vec<Value>> {
        let ids: Vec<String> = members.iter().map(|m| m.user_id.to_string()).collect();
        let users = if ids.is_empty() {
            Vec::new()
        } else {
            self.auth.users(ctx, &ids).await?
        };
        let by_id: std::collections::HashMap<&str, &Value> = users
            .iter()
            .filter_map(|u| u["id"].as_str().map(|id| (id, u)))
            .collect();
        Ok(members
            .iter()
            .filter_map(|m| {
                let user = (*by_id.get(m.user_id.to_string().as_str())?).clone();
                Some(json!({
                    "team_id": m.team_id,
                    "user_id": m.user_id,
                    "display_name": m.display_name.clone().map_or_else(|| user["display_name"].clone(), Value::from),
                    "profile_image_url": m.profile_image_url.clone().map_or_else(|| user["profile_image_url"].clone(), Value::from),
                    "user": user,
                }))
            })
            .collect())
    }

    /// One profile; a member whose user auth no longer knows is no member.
    async fn compose_one(&self, ctx: &Context, member: Member) -> Result<Value> {
        let (team, user) = (member.team_id, member.user_id);
        self.compose(ctx, &[member])
            .await?
            .pop()
            .ok_or_else(|| membership_not_found(team, user))
    }

    /// `GET /team-member-profiles` with the client rules of 30 §3.
    pub async fn list_profiles(
        &self,
        ctx: &Context,
        team: Option<Uuid>,
        user: Option<Uuid>,
    ) -> Result<Vec<Value>> {
        if ctx.access_type == AccessType::Client {
            let me = ctx.user_id.ok_or_else(|| {
                coded(
                    ErrorCode::CannotGetOwnUserWithoutUser,
                    "Sign in first.",
                    Value::Null,
                )
            })?;
            let team = team.ok_or_else(|| {
                coded(
                    ErrorCode::BadRequest,
                    "Clients must pass team_id.",
                    Value::Null,
                )
            })?;
            if !self.store.is_member(ctx.project_id, team, me).await? {
                return Err(membership_not_found(team, me));
            }
            if user != Some(me) {
                permissions::require(
                    &self.store,
                    ctx.project_id,
                    team,
                    me,
                    permissions::READ_MEMBERS,
                )
                .await?;
            }
        } else {
            if let Some(team) = team {
                self.get(ctx, team).await?;
            }
            if let Some(user) = user {
                if !self.auth.user_exists(ctx, &user.to_string()).await? {
                    return Err(coded(
                        ErrorCode::UserNotFound,
                        "No such user.",
                        json!({ "user_id": user }),
                    ));
                }
            }
        }
        let members = self.store.profiles(ctx.project_id, team, user).await?;
        self.compose(ctx, &members).await
    }

    async fn member(&self, ctx: &Context, team: Uuid, user: Uuid) -> Result<Member> {
        let found = self
            .store
            .profiles(ctx.project_id, Some(team), Some(user))
            .await?;
        found
            .into_iter()
            .next()
            .ok_or_else(|| membership_not_found(team, user))
    }

    /// `GET /team-member-profiles/{team}/{user}`: others' profiles need `$read_members`.
    pub async fn get_profile(&self, ctx: &Context, team: Uuid, user: Uuid) -> Result<Value> {
        if ctx.access_type == AccessType::Client && ctx.user_id != Some(user) {
            let me = ctx.user_id.ok_or_else(|| {
                coded(
                    ErrorCode::CannotGetOwnUserWithoutUser,
                    "Sign in first.",
                    Value::Null,
                )
            })?;
            permissions::require(
                &self.store,
                ctx.project_id,
                team,
                me,
                permissions::READ_MEMBERS,
            )
            .await?;
        }
        let member = self.member(ctx, team, user).await?;
        self.compose_one(ctx, member).await
    }

    /// `PATCH /team-member-profiles/{team}/{user}`: `display_name` (string) and
    /// `profile_image_url` (string or null); no event (30 §3).
    pub async fn update_profile(
        &self,
        ctx: &Context,
        team: Uuid,
        user: Uuid,
        body: &Value,
    ) -> Result<Value> {
        let Value::Object(map) = body else {
            return Err(Error::Invalid("the body must be a JSON object".into()));
        };
        let unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !["display_name", "profile_image_url"].contains(k))
            .collect();
        if !unknown.is_empty() {
            return Err(Error::Invalid(format!(
                "body contains unknown properties: {}",
                unknown.join(", ")
            )));
        }
        let mut member = self.member(ctx, team, user).await?;
        if let Some(v) = map.get("display_name") {
            member.display_name = Some(
                v.as_str()
                    .ok_or_else(|| Error::Invalid("display_name must be a string".into()))?
                    .to_owned(),
            );
        }
        if let Some(v) = map.get("profile_image_url") {
            member.profile_image_url =
                super::teams::image(v, ctx.access_type == AccessType::Client)?;
        }
        if !self.store.update_profile(ctx.project_id, &member).await? {
            return Err(membership_not_found(team, user));
        }
        self.compose_one(ctx, member).await
    }
}
