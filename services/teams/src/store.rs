//! The teams database. The statements are the same on both backends and run through
//! `with_pool!`; every change enqueues its events in its own transaction.

use latchkey_shared::db::coalesce::RowsBy;
use latchkey_shared::db::search::Start;
use latchkey_shared::db::{is_unique_violation, Database};
use latchkey_shared::events::outbox::Enqueue;
use latchkey_shared::events::Event;
use latchkey_shared::remembered::Remembered;
use latchkey_shared::with_pool;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("conflict")]
    Conflict,
    #[error(transparent)]
    Db(sqlx::Error),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if is_unique_violation(&e) {
            Self::Conflict
        } else {
            Self::Db(e)
        }
    }
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Team {
    pub project_id: Uuid,
    pub id: Uuid,
    pub display_name: String,
    pub profile_image_url: Option<String>,
    pub client_metadata: String,
    pub client_read_only_metadata: String,
    pub server_metadata: String,
    pub created_at_millis: i64,
}

const TEAM_COLUMNS: &str = "project_id, id, display_name, profile_image_url, client_metadata, \
    client_read_only_metadata, server_metadata, created_at_millis";

/// A membership with its member profile.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Member {
    pub team_id: Uuid,
    pub user_id: Uuid,
    pub display_name: Option<String>,
    pub profile_image_url: Option<String>,
    pub created_at_millis: i64,
}

/// A direct grant (team, user, permission).
pub type Grant = (Uuid, Uuid, String);

#[derive(Debug, Clone)]
pub struct Store {
    db: Database,
    /// Teams by (project, id) while this process is the database's only writer (SQLite): a
    /// user read shows the selected team on every `/users/me`. Every team write below forgets
    /// the team it touched once it is done.
    remembered: std::sync::Arc<Remembered<(Uuid, Uuid), Team>>,
    /// Teams by (project, id), read together with the other requests' (the selected team of
    /// every `/users/me` of a moment).
    teams: RowsBy<Team>,
}

impl Store {
    pub fn new(db: Database) -> Self {
        Self {
            remembered: std::sync::Arc::new(Remembered::over(&db)),
            teams: RowsBy::new(
                &db,
                format!("SELECT {TEAM_COLUMNS} FROM teams"),
                "id",
                |t: &Team| (t.project_id, t.id),
            ),
            db,
        }
    }

    /// Creates a team, optionally with its creator and the creator's grants, and its events.
    pub async fn insert_team(
        &self,
        t: &Team,
        creator: Option<(Uuid, &[String])>,
        events: &[Event],
    ) -> Result<(), StoreError> {
        with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            let sql = format!("INSERT INTO teams ({TEAM_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)");
            sqlx::query(&sql)
                .bind(t.project_id).bind(t.id).bind(&t.display_name).bind(&t.profile_image_url)
                .bind(&t.client_metadata).bind(&t.client_read_only_metadata).bind(&t.server_metadata)
                .bind(t.created_at_millis)
                .execute(&mut *tx).await?;
            if let Some((user, grants)) = creator {
                add_member!(&mut *tx, t.project_id, t.id, user, grants, t.created_at_millis);
            }
            for e in events {
                (*tx).enqueue(e).await?;
            }
            tx.commit().await?;
        });
        Ok(())
    }

    pub async fn team(&self, project: Uuid, id: Uuid) -> Result<Option<Team>, StoreError> {
        let read = async { Ok::<_, StoreError>(self.teams.one(project, id).await?) };
        self.remembered.or_read((project, id), read).await
    }

    /// The teams with these ids, in no particular order.
    pub async fn teams_by_ids(&self, project: Uuid, ids: &[Uuid]) -> Result<Vec<Team>, StoreError> {
        if let [one] = ids {
            return Ok(self.team(project, *one).await?.into_iter().collect());
        }
        let select = format!("SELECT {TEAM_COLUMNS} FROM teams");
        Ok(latchkey_shared::db::select_in(&self.db, &select, project, "id", ids).await?)
    }

    /// Teams of the project, or of one user, oldest first.
    pub async fn teams(
        &self,
        project: Uuid,
        member: Option<Uuid>,
    ) -> Result<Vec<Team>, StoreError> {
        Ok(match member {
            None => {
                let sql = format!("SELECT {TEAM_COLUMNS} FROM teams WHERE project_id = $1 ORDER BY created_at_millis, id");
                with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).fetch_all(pool).await?)
            }
            Some(user) => {
                let columns = TEAM_COLUMNS
                    .split(", ")
                    .map(|c| format!("t.{c}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let sql = format!(
                    "SELECT {columns} FROM teams t JOIN memberships m ON m.project_id = t.project_id AND m.team_id = t.id \
                     WHERE t.project_id = $1 AND m.user_id = $2 ORDER BY t.created_at_millis, t.id"
                );
                with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).bind(user).fetch_all(pool).await?)
            }
        })
    }

    pub async fn update_team(&self, t: &Team, events: &[Event]) -> Result<(), StoreError> {
        self.remembered
            .writing(&(t.project_id, t.id), async {
                with_pool!(&self.db, pool => {
                    let mut tx = pool.begin().await?;
                    sqlx::query("UPDATE teams SET display_name = $1, profile_image_url = $2, client_metadata = $3, \
                                 client_read_only_metadata = $4, server_metadata = $5 WHERE project_id = $6 AND id = $7")
                        .bind(&t.display_name).bind(&t.profile_image_url).bind(&t.client_metadata)
                        .bind(&t.client_read_only_metadata).bind(&t.server_metadata).bind(t.project_id).bind(t.id)
                        .execute(&mut *tx).await?;
                    for e in events {
                        (*tx).enqueue(e).await?;
                    }
                    tx.commit().await?;
                });
                Ok(())
            })
            .await
    }

    /// Deletes a team; memberships and grants go with it.
    pub async fn delete_team(
        &self,
        project: Uuid,
        id: Uuid,
        events: &[Event],
    ) -> Result<bool, StoreError> {
        self.remembered
            .writing(&(project, id), async {
                let done = with_pool!(&self.db, pool => {
                    let mut tx = pool.begin().await?;
                    // SQLite applies ON DELETE CASCADE only with foreign keys on, which the pool sets;
                    // the explicit deletes keep the result independent of that setting.
                    sqlx::query("DELETE FROM team_permissions WHERE project_id = $1 AND team_id = $2").bind(project).bind(id).execute(&mut *tx).await?;
                    sqlx::query("DELETE FROM memberships WHERE project_id = $1 AND team_id = $2").bind(project).bind(id).execute(&mut *tx).await?;
                    let done = sqlx::query("DELETE FROM teams WHERE project_id = $1 AND id = $2").bind(project).bind(id).execute(&mut *tx).await?;
                    if done.rows_affected() > 0 {
                        for e in events {
                            (*tx).enqueue(e).await?;
                        }
                    }
                    tx.commit().await?;
                    done.rows_affected() > 0
                });
                Ok(done)
            })
            .await
    }

    /// Memberships with profiles, oldest first, optionally of one team and/or one user.
    pub async fn profiles(
        &self,
        project: Uuid,
        team: Option<Uuid>,
        user: Option<Uuid>,
    ) -> Result<Vec<Member>, StoreError> {
        let sql = "SELECT team_id, user_id, display_name, profile_image_url, created_at_millis FROM memberships \
                   WHERE project_id = $1 ORDER BY created_at_millis, team_id, user_id";
        let all: Vec<Member> =
            with_pool!(&self.db, pool => sqlx::query_as(sql).bind(project).fetch_all(pool).await?);
        Ok(all
            .into_iter()
            .filter(|m| team.is_none_or(|t| t == m.team_id) && user.is_none_or(|u| u == m.user_id))
            .collect())
    }

    /// Rewrites a member profile; false when there is no such membership.
    pub async fn update_profile(&self, project: Uuid, m: &Member) -> Result<bool, StoreError> {
        let sql = "UPDATE memberships SET display_name = $1, profile_image_url = $2 \
                   WHERE project_id = $3 AND team_id = $4 AND user_id = $5";
        let done = with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(&m.display_name).bind(&m.profile_image_url).bind(project).bind(m.team_id).bind(m.user_id)
            .execute(pool).await?.rows_affected());
        Ok(done == 1)
    }

    /// Members of a team, oldest membership first.
    /// Members of a team in user id order from `start` on, at most `limit`: a page of the
    /// primary key, whatever the team's size.
    pub async fn members_page(
        &self,
        project: Uuid,
        team: Uuid,
        start: Start,
        limit: Option<usize>,
    ) -> Result<Vec<Uuid>, StoreError> {
        let sql = format!(
            "SELECT user_id FROM memberships WHERE project_id = $1 AND team_id = $2 {from} \
             ORDER BY user_id {order} {limit}",
            from = start.condition("user_id", 3),
            order = start.order(),
            limit = limit.map(|l| format!("LIMIT {l}")).unwrap_or_default(),
        );
        Ok(with_pool!(&self.db, pool => {
            let mut query = sqlx::query_scalar(&sql).bind(project).bind(team);
            if let Some(id) = start.id {
                query = query.bind(id);
            }
            query.fetch_all(pool).await?
        }))
    }

    pub async fn is_member(
        &self,
        project: Uuid,
        team: Uuid,
        user: Uuid,
    ) -> Result<bool, StoreError> {
        let sql = "SELECT COUNT(*) FROM memberships WHERE project_id = $1 AND team_id = $2 AND user_id = $3";
        let n: i64 = with_pool!(&self.db, pool => sqlx::query_scalar(sql).bind(project).bind(team).bind(user).fetch_one(pool).await?);
        Ok(n > 0)
    }

    /// Adds a member with `grants` and enqueues `events`; `Conflict` if already a member.
    pub async fn add_member(
        &self,
        project: Uuid,
        team: Uuid,
        user: Uuid,
        grants: &[String],
        now: i64,
        events: &[Event],
    ) -> Result<(), StoreError> {
        with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            add_member!(&mut *tx, project, team, user, grants, now);
            for e in events {
                (*tx).enqueue(e).await?;
            }
            tx.commit().await?;
        });
        Ok(())
    }

    /// Removes a membership and its grants; false when there was none.
    pub async fn remove_member(
        &self,
        project: Uuid,
        team: Uuid,
        user: Uuid,
        events: &[Event],
    ) -> Result<bool, StoreError> {
        Ok(with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query("DELETE FROM team_permissions WHERE project_id = $1 AND team_id = $2 AND user_id = $3")
                .bind(project).bind(team).bind(user).execute(&mut *tx).await?;
            let done = sqlx::query("DELETE FROM memberships WHERE project_id = $1 AND team_id = $2 AND user_id = $3")
                .bind(project).bind(team).bind(user).execute(&mut *tx).await?;
            if done.rows_affected() > 0 {
                for e in events {
                    (*tx).enqueue(e).await?;
                }
            }
            tx.commit().await?;
            done.rows_affected() > 0
        }))
    }

    /// Removes every membership and grant of a deleted user; no events.
    pub async fn remove_user(&self, project: Uuid, user: Uuid) -> Result<u64, StoreError> {
        Ok(with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query("DELETE FROM project_permissions WHERE project_id = $1 AND user_id = $2")
                .bind(project).bind(user).execute(&mut *tx).await?;
            sqlx::query("DELETE FROM team_permissions WHERE project_id = $1 AND user_id = $2")
                .bind(project).bind(user).execute(&mut *tx).await?;
            let done = sqlx::query("DELETE FROM memberships WHERE project_id = $1 AND user_id = $2")
                .bind(project).bind(user).execute(&mut *tx).await?;
            tx.commit().await?;
            done.rows_affected()
        }))
    }

    /// Direct grants of the project, sorted by team, user, permission.
    /// Team permission grants, of one team and/or one user when given (each from an index).
    pub async fn grants(
        &self,
        project: Uuid,
        team: Option<Uuid>,
        user: Option<Uuid>,
    ) -> Result<Vec<Grant>, StoreError> {
        let mut filter = String::new();
        let mut values = Vec::new();
        for (column, value) in [("team_id", team), ("user_id", user)] {
            if let Some(v) = value {
                values.push(v);
                filter.push_str(&format!(" AND {column} = ${}", values.len() + 1));
            }
        }
        let sql = format!(
            "SELECT team_id, user_id, permission_id FROM team_permissions WHERE project_id = $1{filter} \
             ORDER BY team_id, user_id, permission_id"
        );
        Ok(with_pool!(&self.db, pool => {
            let mut query = sqlx::query_as(&sql).bind(project);
            for v in &values {
                query = query.bind(v);
            }
            query.fetch_all(pool).await?
        }))
    }

    /// Grants a permission (idempotent) and enqueues `events`.
    pub async fn grant(
        &self,
        project: Uuid,
        g: &Grant,
        events: &[Event],
    ) -> Result<(), StoreError> {
        with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query("INSERT INTO team_permissions (project_id, team_id, user_id, permission_id) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING")
                .bind(project).bind(g.0).bind(g.1).bind(&g.2).execute(&mut *tx).await?;
            for e in events {
                (*tx).enqueue(e).await?;
            }
            tx.commit().await?;
        });
        Ok(())
    }

    /// Revokes a direct grant; false when it was not held directly.
    pub async fn revoke(
        &self,
        project: Uuid,
        g: &Grant,
        events: &[Event],
    ) -> Result<bool, StoreError> {
        Ok(with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            let done = sqlx::query("DELETE FROM team_permissions WHERE project_id = $1 AND team_id = $2 AND user_id = $3 AND permission_id = $4")
                .bind(project).bind(g.0).bind(g.1).bind(&g.2).execute(&mut *tx).await?;
            if done.rows_affected() > 0 {
                for e in events {
                    (*tx).enqueue(e).await?;
                }
            }
            tx.commit().await?;
            done.rows_affected() > 0
        }))
    }
}

macro_rules! add_member {
    ($conn:expr, $project:expr, $team:expr, $user:expr, $grants:expr, $now:expr) => {{
        sqlx::query("INSERT INTO memberships (project_id, team_id, user_id, created_at_millis) VALUES ($1, $2, $3, $4)")
            .bind($project).bind($team).bind($user).bind($now)
            .execute($conn).await?;
        for permission in $grants {
            sqlx::query("INSERT INTO team_permissions (project_id, team_id, user_id, permission_id) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING")
                .bind($project).bind($team).bind($user).bind(permission)
                .execute($conn).await?;
        }
    }};
}
use add_member;

/// A stored permission definition.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct DefinitionRow {
    pub id: String,
    pub scope: String,
    pub description: Option<String>,
    pub contained: String,
}

impl Store {
    /// The project's stored definitions; `None` while it still uses the defaults.
    pub async fn definitions(
        &self,
        project: Uuid,
    ) -> Result<Option<Vec<DefinitionRow>>, StoreError> {
        let marked: i64 = with_pool!(&self.db, pool => sqlx::query_scalar("SELECT COUNT(*) FROM definition_sets WHERE project_id = $1")
            .bind(project).fetch_one(pool).await?);
        if marked == 0 {
            return Ok(None);
        }
        let sql = "SELECT id, scope, description, contained FROM permission_definitions WHERE project_id = $1 ORDER BY id";
        Ok(Some(
            with_pool!(&self.db, pool => sqlx::query_as(sql).bind(project).fetch_all(pool).await?),
        ))
    }

    /// Replaces the project's whole definition set, renaming and dropping grants as told:
    /// `renamed` maps old ids to new ones, `removed` lists deleted ids.
    pub async fn save_definitions(
        &self,
        project: Uuid,
        defs: &[DefinitionRow],
        renamed: Option<(&str, &str)>,
        removed: Option<&str>,
    ) -> Result<(), StoreError> {
        with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query("DELETE FROM permission_definitions WHERE project_id = $1").bind(project).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO definition_sets (project_id) VALUES ($1) ON CONFLICT DO NOTHING").bind(project).execute(&mut *tx).await?;
            for d in defs {
                sqlx::query("INSERT INTO permission_definitions (project_id, id, scope, description, contained) VALUES ($1, $2, $3, $4, $5)")
                    .bind(project).bind(&d.id).bind(&d.scope).bind(&d.description).bind(&d.contained)
                    .execute(&mut *tx).await?;
            }
            if let Some((old, new)) = renamed {
                for table in ["team_permissions", "project_permissions"] {
                    sqlx::query(&format!("UPDATE {table} SET permission_id = $1 WHERE project_id = $2 AND permission_id = $3"))
                        .bind(new).bind(project).bind(old).execute(&mut *tx).await?;
                }
            }
            if let Some(id) = removed {
                for table in ["team_permissions", "project_permissions"] {
                    sqlx::query(&format!("DELETE FROM {table} WHERE project_id = $1 AND permission_id = $2"))
                        .bind(project).bind(id).execute(&mut *tx).await?;
                }
            }
            tx.commit().await?;
        });
        Ok(())
    }

    /// Direct project grants, sorted by user then permission.
    /// Project permission grants, of one user when given (from the primary key).
    pub async fn project_grants(
        &self,
        project: Uuid,
        user: Option<Uuid>,
    ) -> Result<Vec<(Uuid, String)>, StoreError> {
        let filter = if user.is_some() {
            " AND user_id = $2"
        } else {
            ""
        };
        let sql = format!(
            "SELECT user_id, permission_id FROM project_permissions WHERE project_id = $1{filter} \
             ORDER BY user_id, permission_id"
        );
        Ok(with_pool!(&self.db, pool => {
            let mut query = sqlx::query_as(&sql).bind(project);
            if let Some(u) = user {
                query = query.bind(u);
            }
            query.fetch_all(pool).await?
        }))
    }

    /// Grants project permissions (idempotent) and enqueues `events`.
    pub async fn grant_project(
        &self,
        project: Uuid,
        user: Uuid,
        ids: &[String],
        events: &[Event],
    ) -> Result<(), StoreError> {
        with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            for id in ids {
                sqlx::query("INSERT INTO project_permissions (project_id, user_id, permission_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
                    .bind(project).bind(user).bind(id).execute(&mut *tx).await?;
            }
            for e in events {
                (*tx).enqueue(e).await?;
            }
            tx.commit().await?;
        });
        Ok(())
    }

    /// Revokes a direct project grant; false when it was not held directly.
    pub async fn revoke_project(
        &self,
        project: Uuid,
        user: Uuid,
        id: &str,
        events: &[Event],
    ) -> Result<bool, StoreError> {
        Ok(with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            let done = sqlx::query("DELETE FROM project_permissions WHERE project_id = $1 AND user_id = $2 AND permission_id = $3")
                .bind(project).bind(user).bind(id).execute(&mut *tx).await?;
            if done.rows_affected() > 0 {
                for e in events {
                    (*tx).enqueue(e).await?;
                }
            }
            tx.commit().await?;
            done.rows_affected() > 0
        }))
    }
}
