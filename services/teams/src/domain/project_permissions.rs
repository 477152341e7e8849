//! Project permissions (50 §3): grants of project-scope definitions to users.

use latchkey_shared::error::ErrorCode;
use latchkey_shared::events::Event;
use latchkey_shared::grpc::Context;
use serde_json::{json, Value};
use uuid::Uuid;

use super::permissions::{check_scope, Definitions, Scope};
use super::teams::Teams;
use crate::error::{coded, Result};

impl Teams {
    async fn ensure_user_exists(&self, ctx: &Context, user: Uuid) -> Result<()> {
        if self.auth.user_exists(ctx, &user.to_string()).await? {
            Ok(())
        } else {
            Err(coded(
                ErrorCode::UserNotFound,
                "No such user.",
                json!({ "user_id": user }),
            ))
        }
    }

    pub async fn list_project_permissions(
        &self,
        ctx: &Context,
        user: Option<Uuid>,
        permission: Option<&str>,
        recursive: bool,
    ) -> Result<Vec<Value>> {
        let defs = Definitions::load(&self.store, ctx.project_id).await?;
        let grants = self.store.project_grants(ctx.project_id, user).await?;
        let mut users: Vec<Uuid> = grants.iter().map(|g| g.0).collect();
        users.dedup();
        let mut rows: Vec<(Uuid, String)> = Vec::new();
        for u in users {
            let direct = grants.iter().filter(|g| g.0 == u).map(|g| g.1.as_str());
            let ids: Vec<String> = if recursive {
                defs.expand(direct).into_iter().collect()
            } else {
                direct.map(str::to_owned).collect()
            };
            rows.extend(
                ids.into_iter()
                    .filter(|id| permission.is_none_or(|p| p == id))
                    .map(|id| (u, id)),
            );
        }
        rows.sort();
        Ok(rows
            .iter()
            .map(|(u, id)| json!({ "id": id, "user_id": u }))
            .collect())
    }

    pub async fn grant_project(&self, ctx: &Context, user: Uuid, id: &str) -> Result<()> {
        self.ensure_user_exists(ctx, user).await?;
        let defs = Definitions::load(&self.store, ctx.project_id).await?;
        check_scope(&defs, id, Scope::Project)?;
        let event = Event::new(
            "project_permission.created",
            ctx.project_id,
            self.clock.now_millis(),
            json!({ "id": id, "user_id": user }),
        );
        self.store
            .grant_project(ctx.project_id, user, &[id.to_owned()], &[event])
            .await?;
        Ok(())
    }

    pub async fn revoke_project(&self, ctx: &Context, user: Uuid, id: &str) -> Result<()> {
        self.ensure_user_exists(ctx, user).await?;
        let event = Event::new(
            "project_permission.deleted",
            ctx.project_id,
            self.clock.now_millis(),
            json!({ "id": id, "user_id": user }),
        );
        if self
            .store
            .revoke_project(ctx.project_id, user, id, &[event])
            .await?
        {
            Ok(())
        } else {
            Err(coded(
                ErrorCode::PermissionNotFound,
                format!("The user does not hold {id} directly."),
                json!({ "permission_id": id }),
            ))
        }
    }

    /// The project's `user_default_permissions` for a new user; no events (50 §1.2).
    pub async fn grant_user_defaults(&self, ctx: &Context, user: Uuid) -> Result<()> {
        let settings = self.auth.settings(ctx).await?;
        let defs = Definitions::load(&self.store, ctx.project_id).await?;
        let ids: Vec<String> = settings["user_default_permissions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["id"].as_str().map(str::to_owned))
            .filter(|id| defs.scope_of(id) == Some(Scope::Project))
            .collect();
        if !ids.is_empty() {
            self.store
                .grant_project(ctx.project_id, user, &ids, &[])
                .await?;
        }
        Ok(())
    }
}
