//! Users, sessions and refresh tokens. The statements are the same on both backends and run
//! through `with_pool!`; every change that others must hear of enqueues its events in the same
//! transaction.

use latchkey_shared::db::coalesce::RowsBy;
use latchkey_shared::db::grouped::Grouped;
use latchkey_shared::db::search::{self, Searchable, Start};
use std::sync::Arc;

use latchkey_shared::db::Database;
use latchkey_shared::events::outbox::Enqueue;
use latchkey_shared::events::Event;
use latchkey_shared::remembered::Remembered;
use latchkey_shared::with_pool;
use uuid::Uuid;

use super::StoreError;

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct UserRow {
    pub project_id: Uuid,
    pub id: Uuid,
    pub display_name: Option<String>,
    pub profile_image_url: Option<String>,
    pub client_metadata: String,
    pub client_read_only_metadata: String,
    pub server_metadata: String,
    pub password_hash: Option<String>,
    pub otp_auth_enabled: bool,
    pub selected_team_id: Option<Uuid>,
    pub restricted_by_admin: bool,
    pub restricted_by_admin_reason: Option<String>,
    pub restricted_by_admin_private_details: Option<String>,
    pub country_code: Option<String>,
    pub risk_score_bot: i32,
    pub risk_score_free_trial_abuse: i32,
    pub signed_up_at_millis: i64,
    pub last_active_at_millis: i64,
    /// Base64 of the raw TOTP secret; set means MFA is required (10 §3).
    pub totp_secret: Option<String>,
    /// Made by anonymous sign-up and not yet signed up for real.
    pub is_anonymous: bool,
    /// Has at least one passkey; written only by the passkey store, never by `update_user`.
    pub passkey_auth_enabled: bool,
}

/// Display names for the users list's search.
const DISPLAY_NAMES: Searchable = Searchable {
    table: "users",
    id: "id",
    text: "display_name",
    indexed: "lower(display_name)",
    fts: "user_search_fts",
    fts_rows: "user_search",
};

const USER_COLUMNS: &str = "project_id, id, display_name, profile_image_url, client_metadata, \
    client_read_only_metadata, server_metadata, password_hash, otp_auth_enabled, selected_team_id, \
    restricted_by_admin, restricted_by_admin_reason, restricted_by_admin_private_details, \
    country_code, risk_score_bot, risk_score_free_trial_abuse, signed_up_at_millis, last_active_at_millis, \
    totp_secret, is_anonymous, passkey_auth_enabled";

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct SessionRow {
    pub project_id: Uuid,
    pub id: Uuid,
    pub user_id: Uuid,
    pub is_impersonation: bool,
    pub created_at_millis: i64,
    pub last_used_at_millis: i64,
    pub expires_at_millis: i64,
}

const SESSION_COLUMNS: &str =
    "project_id, id, user_id, is_impersonation, created_at_millis, last_used_at_millis, expires_at_millis";

/// A session to open with its first refresh token's hash.
#[derive(Debug, Clone)]
pub struct NewSession {
    pub session: SessionRow,
    pub token_hash: String,
}

/// Which sessions a user change ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Revoke {
    None,
    All,
    AllExcept(Option<Uuid>),
}

/// What a refresh token is: its session, and the session's user as the database has it (read
/// in the same statement, since a refresh needs it next).
#[derive(Debug, Clone)]
pub struct TokenLookup {
    pub session: SessionRow,
    pub superseded_at_millis: Option<i64>,
    pub user: UserRow,
}

/// One row of `find_token`: the user's columns under their own names, the session's beside them.
#[derive(Clone, sqlx::FromRow)]
struct FoundToken {
    token_hash: String,
    session_id: Uuid,
    is_impersonation: bool,
    created_at_millis: i64,
    last_used_at_millis: i64,
    expires_at_millis: i64,
    superseded_at_millis: Option<i64>,
    #[sqlx(flatten)]
    user: UserRow,
}

#[derive(Debug, Clone)]
pub struct Accounts {
    db: Database,
    /// Users by (project, id) while this process is the database's only writer (SQLite); every
    /// write below forgets the users it touched once it is done.
    remembered: Arc<Remembered<(Uuid, Uuid), UserRow>>,
    /// Users by (project, id), read together with the other requests' (one statement for all
    /// the `/users/me` of a moment).
    users: RowsBy<UserRow>,
    /// Refresh tokens with their session and user by (project, token hash), read together
    /// with the other requests' (one statement for the refreshes of a moment).
    tokens: RowsBy<FoundToken, String>,
    /// Uses of sessions, written together with the other requests' (see `touch_session`).
    touches: Grouped<Touch>,
}

/// A use of a session to record: last-used times, and with rotation the presented token
/// superseded by a new one.
#[derive(Debug)]
struct Touch {
    project_id: Uuid,
    session_id: Uuid,
    user_id: Uuid,
    now: i64,
    presented_hash: String,
    new_hash: Option<String>,
}

/// Records `touches` in one transaction.
async fn touch_all(db: &Database, touches: &[Touch]) -> Result<(), sqlx::Error> {
    match db {
        // One statement for the group's last-used times; with rotation, in a transaction with
        // the group's tokens.
        Database::Postgres(pool) if touches.iter().all(|t| t.new_hash.is_none()) => {
            last_used_together(touches).execute(pool).await?;
            Ok(())
        }
        Database::Postgres(pool) => {
            let mut tx = pool.begin().await?;
            last_used_together(touches).execute(&mut *tx).await?;
            for t in touches {
                rotate(&mut tx, t).await?;
            }
            tx.commit().await
        }
        Database::Sqlite(pool) => {
            let mut tx = pool.begin().await?;
            for t in touches {
                sqlx::query("UPDATE sessions SET last_used_at_millis = $1 WHERE project_id = $2 AND id = $3")
                    .bind(t.now).bind(t.project_id).bind(t.session_id).execute(&mut *tx).await?;
                sqlx::query(
                    "UPDATE users SET last_active_at_millis = $1 WHERE project_id = $2 AND id = $3",
                )
                .bind(t.now)
                .bind(t.project_id)
                .bind(t.user_id)
                .execute(&mut *tx)
                .await?;
                rotate(&mut tx, t).await?;
            }
            tx.commit().await
        }
    }
}

/// The last-used times of `touches`' sessions and users, in one PostgreSQL statement.
fn last_used_together(
    touches: &[Touch],
) -> sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments> {
    sqlx::query(
        "WITH t AS (SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::int8[]) AS t(project_id, id, at)), \
         s AS (UPDATE sessions SET last_used_at_millis = t.at FROM t \
               WHERE sessions.project_id = t.project_id AND sessions.id = t.id \
               RETURNING sessions.project_id, sessions.user_id, t.at) \
         UPDATE users SET last_active_at_millis = s.at FROM s \
         WHERE users.project_id = s.project_id AND users.id = s.user_id",
    )
    .bind(touches.iter().map(|t| t.project_id).collect::<Vec<_>>())
    .bind(touches.iter().map(|t| t.session_id).collect::<Vec<_>>())
    .bind(touches.iter().map(|t| t.now).collect::<Vec<_>>())
}

/// With rotation: the presented token superseded, the new one stored.
async fn rotate<DB>(
    tx: &mut latchkey_shared::db::Transaction<DB>,
    t: &Touch,
) -> Result<(), sqlx::Error>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Uuid: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let Some(new_hash) = t.new_hash.as_deref() else {
        return Ok(());
    };
    sqlx::query(
        "UPDATE refresh_tokens SET superseded_at_millis = COALESCE(superseded_at_millis, $1) \
         WHERE project_id = $2 AND token_hash = $3",
    )
    .bind(t.now)
    .bind(t.project_id)
    .bind(t.presented_hash.as_str())
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "INSERT INTO refresh_tokens (project_id, token_hash, session_id, created_at_millis) \
         VALUES ($1, $2, $3, $4)",
    )
    .bind(t.project_id)
    .bind(new_hash)
    .bind(t.session_id)
    .bind(t.now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Refresh tokens with their session and the session's user; `select_in` adds the condition,
/// on the token's project (the user's, the same) and hash.
fn found_tokens_select() -> String {
    // `u` is the user's columns exactly as `user` reads them, for `FoundToken`'s flatten.
    format!(
        "SELECT * FROM (SELECT u.*, t.token_hash, s.id AS session_id, s.is_impersonation, \
         s.created_at_millis, s.last_used_at_millis, s.expires_at_millis, t.superseded_at_millis \
         FROM refresh_tokens t \
         JOIN sessions s ON s.project_id = t.project_id AND s.id = t.session_id \
         JOIN (SELECT {USER_COLUMNS} FROM users) u ON u.project_id = s.project_id AND u.id = s.user_id) found"
    )
}

macro_rules! insert_user_sql {
    () => {
        "INSERT INTO users (project_id, id, display_name, profile_image_url, client_metadata, \
         client_read_only_metadata, server_metadata, password_hash, otp_auth_enabled, selected_team_id, \
         restricted_by_admin, restricted_by_admin_reason, restricted_by_admin_private_details, \
         country_code, risk_score_bot, risk_score_free_trial_abuse, signed_up_at_millis, last_active_at_millis, \
         totp_secret, is_anonymous) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)"
    };
}

impl Accounts {
    pub fn new(db: Database) -> Self {
        Self {
            remembered: Arc::new(Remembered::over(&db)),
            users: RowsBy::new(
                &db,
                format!("SELECT {USER_COLUMNS} FROM users"),
                "id",
                |u: &UserRow| (u.project_id, u.id),
            ),
            tokens: RowsBy::new(
                &db,
                found_tokens_select(),
                "token_hash",
                |t: &FoundToken| (t.user.project_id, t.token_hash.clone()),
            ),
            touches: Grouped::new({
                let db = db.clone();
                move |touches: Vec<Touch>| {
                    let db = db.clone();
                    async move { touch_all(&db, &touches).await }
                }
            }),
            db,
        }
    }

    /// Creates a user, optionally with a first session, and its events, in one transaction.
    pub async fn insert_user(
        &self,
        u: &UserRow,
        session: Option<&NewSession>,
        events: &[Event],
    ) -> Result<(), StoreError> {
        self.remembered
            .writing(&(u.project_id, u.id), async {
                with_pool!(&self.db, pool => {
                    let mut tx = pool.begin().await?;
                    sqlx::query(insert_user_sql!())
                        .bind(u.project_id).bind(u.id).bind(&u.display_name).bind(&u.profile_image_url)
                        .bind(&u.client_metadata).bind(&u.client_read_only_metadata).bind(&u.server_metadata)
                        .bind(&u.password_hash).bind(u.otp_auth_enabled).bind(u.selected_team_id)
                        .bind(u.restricted_by_admin).bind(&u.restricted_by_admin_reason)
                        .bind(&u.restricted_by_admin_private_details).bind(&u.country_code)
                        .bind(u.risk_score_bot).bind(u.risk_score_free_trial_abuse)
                        .bind(u.signed_up_at_millis).bind(u.last_active_at_millis).bind(&u.totp_secret)
                        .bind(u.is_anonymous)
                        .execute(&mut *tx).await?;
                    if let Some(s) = session {
                        insert_session!(&mut *tx, s);
                    }
                    for e in events {
                        (*tx).enqueue(e).await?;
                    }
                    tx.commit().await?;
                });
                Ok(())
            })
            .await
    }

    /// The remembered users, for stores that write a user's row beside their own tables.
    pub fn remembered(&self) -> Arc<Remembered<(Uuid, Uuid), UserRow>> {
        self.remembered.clone()
    }

    pub async fn user(&self, project: Uuid, id: Uuid) -> Result<Option<UserRow>, StoreError> {
        self.remembered
            .or_read((project, id), self.user_from_database(project, id))
            .await
    }

    /// The user as the database has it, never from memory: for password sign-in, where an
    /// address without an account must take exactly the steps of one with (no answer may be
    /// faster for accounts that exist).
    pub async fn user_from_database(
        &self,
        project: Uuid,
        id: Uuid,
    ) -> Result<Option<UserRow>, StoreError> {
        Ok(self.users.one(project, id).await?)
    }

    /// The users among `ids` (any order; unknown ids are skipped).
    pub async fn users_by_ids(
        &self,
        project: Uuid,
        ids: &[Uuid],
    ) -> Result<Vec<UserRow>, StoreError> {
        let select = format!("SELECT {USER_COLUMNS} FROM users");
        Ok(latchkey_shared::db::select_in(&self.db, &select, project, "id", ids).await?)
    }

    /// Up to `limit` users in list order (user ids are minted from the sign-up instant, so id
    /// order is sign-up order, ties by id) from `start` on: a page of the primary key (or of
    /// the anonymous or known users' partial index) whatever the project's size.
    pub async fn users_page(
        &self,
        project: Uuid,
        start: Start,
        limit: usize,
        anonymous: Option<bool>,
    ) -> Result<Vec<UserRow>, StoreError> {
        // Fixed text, not a parameter, so both databases see the partial index's predicate.
        let kind = match anonymous {
            Some(true) => "AND is_anonymous",
            Some(false) => "AND NOT is_anonymous",
            None => "",
        };
        let sql = format!(
            "SELECT {USER_COLUMNS} FROM users WHERE project_id = $1 {kind} {from} ORDER BY id {order} LIMIT {limit}",
            from = start.condition("id", 2),
            order = start.order(),
        );
        Ok(with_pool!(&self.db, pool => {
            let mut query = sqlx::query_as(&sql).bind(project);
            if let Some(id) = start.id {
                query = query.bind(id);
            }
            query.fetch_all(pool).await?
        }))
    }

    /// Users whose display name contains `text` (case-insensitive), in list order from `start`
    /// on, at most `want`, from the display-name index (see `shared::db::search`).
    pub async fn search_display_names(
        &self,
        project: Uuid,
        text: &str,
        start: Start,
        want: usize,
    ) -> Result<search::Ids, StoreError> {
        Ok(search::matching(&self.db, &DISPLAY_NAMES, project, text, start, want).await?)
    }

    /// Rewrites a user, ends sessions as asked and enqueues `events`, atomically. Returns the
    /// ids of the sessions it ended.
    pub async fn update_user(
        &self,
        u: &UserRow,
        revoke: Revoke,
        events: &[Event],
    ) -> Result<Vec<Uuid>, StoreError> {
        self.remembered
            .writing(&(u.project_id, u.id), async {
                let revoked = with_pool!(&self.db, pool => {
                    let mut tx = pool.begin().await?;
                    let done = sqlx::query(
                        "UPDATE users SET display_name = $1, profile_image_url = $2, client_metadata = $3, \
                         client_read_only_metadata = $4, server_metadata = $5, password_hash = $6, \
                         otp_auth_enabled = $7, selected_team_id = $8, restricted_by_admin = $9, \
                         restricted_by_admin_reason = $10, restricted_by_admin_private_details = $11, \
                         country_code = $12, risk_score_bot = $13, risk_score_free_trial_abuse = $14, \
                         last_active_at_millis = $15, totp_secret = $16 WHERE project_id = $17 AND id = $18",
                    )
                    .bind(&u.display_name).bind(&u.profile_image_url).bind(&u.client_metadata)
                    .bind(&u.client_read_only_metadata).bind(&u.server_metadata).bind(&u.password_hash)
                    .bind(u.otp_auth_enabled).bind(u.selected_team_id).bind(u.restricted_by_admin)
                    .bind(&u.restricted_by_admin_reason).bind(&u.restricted_by_admin_private_details)
                    .bind(&u.country_code).bind(u.risk_score_bot).bind(u.risk_score_free_trial_abuse)
                    .bind(u.last_active_at_millis).bind(&u.totp_secret).bind(u.project_id).bind(u.id)
                    .execute(&mut *tx).await?;
                    if done.rows_affected() == 0 {
                        return Err(StoreError::NotFound);
                    }
                    let mut ids: Vec<Uuid> = Vec::new();
                    if revoke != Revoke::None {
                        let all: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM sessions WHERE project_id = $1 AND user_id = $2")
                            .bind(u.project_id).bind(u.id).fetch_all(&mut *tx).await?;
                        let keep = match revoke { Revoke::AllExcept(keep) => keep, _ => None };
                        for id in all.into_iter().filter(|id| Some(*id) != keep) {
                            sqlx::query("DELETE FROM sessions WHERE project_id = $1 AND id = $2")
                                .bind(u.project_id).bind(id).execute(&mut *tx).await?;
                            ids.push(id);
                        }
                    }
                    for e in events {
                        (*tx).enqueue(e).await?;
                    }
                    if !ids.is_empty() {
                        (*tx).enqueue(&revocation_event(u.project_id, u.id, &ids, u.last_active_at_millis)).await?;
                    }
                    tx.commit().await?;
                    ids
                });
                Ok(revoked)
            })
            .await
    }

    /// Makes anonymous user `u` a full user with the way to sign in its sign-up set on `u`
    /// (a password, one-time codes, and the name and image an OAuth provider gave, where it had
    /// none), and enqueues `events`. Only these fields are written, so edits made meanwhile
    /// stand; false when the user is no longer anonymous (upgraded or deleted meanwhile), so
    /// two concurrent sign-ups cannot both upgrade it.
    pub async fn upgrade_anonymous(
        &self,
        u: &UserRow,
        events: &[Event],
    ) -> Result<bool, StoreError> {
        self.remembered
            .writing(&(u.project_id, u.id), async {
                let done = with_pool!(&self.db, pool => {
                    let mut tx = pool.begin().await?;
                    let done = sqlx::query(
                        "UPDATE users SET is_anonymous = FALSE, password_hash = COALESCE($1, password_hash), \
                         otp_auth_enabled = (otp_auth_enabled OR $2), display_name = COALESCE(display_name, $3), \
                         profile_image_url = COALESCE(profile_image_url, $4) \
                         WHERE project_id = $5 AND id = $6 AND is_anonymous",
                    )
                    .bind(&u.password_hash).bind(u.otp_auth_enabled).bind(&u.display_name)
                    .bind(&u.profile_image_url).bind(u.project_id).bind(u.id)
                    .execute(&mut *tx).await?
                    .rows_affected();
                    if done == 1 {
                        for e in events {
                            (*tx).enqueue(e).await?;
                        }
                    }
                    tx.commit().await?;
                    done
                });
                Ok(done == 1)
            })
            .await
    }

    /// Deletes `id` if it is still an anonymous user who signed up before `before`, with
    /// `events`; false when it is not (upgraded meanwhile, or already deleted).
    pub async fn delete_anonymous_user(
        &self,
        project: Uuid,
        id: Uuid,
        before: i64,
        events: &[Event],
    ) -> Result<bool, StoreError> {
        self.remembered
            .writing(&(project, id), async {
                let done = with_pool!(&self.db, pool => {
                    let mut tx = pool.begin().await?;
                    let done = sqlx::query(
                        "DELETE FROM users WHERE project_id = $1 AND id = $2 AND is_anonymous \
                         AND signed_up_at_millis < $3",
                    )
                    .bind(project).bind(id).bind(before)
                    .execute(&mut *tx).await?
                    .rows_affected();
                    if done == 1 {
                        for e in events {
                            (*tx).enqueue(e).await?;
                        }
                    }
                    tx.commit().await?;
                    done
                });
                Ok(done == 1)
            })
            .await
    }

    /// Up to `limit` anonymous users who signed up before `before`, oldest first.
    pub async fn anonymous_before(
        &self,
        project: Uuid,
        before: i64,
        limit: i64,
    ) -> Result<Vec<Uuid>, StoreError> {
        let sql = "SELECT id FROM users WHERE project_id = $1 AND is_anonymous \
                   AND signed_up_at_millis < $2 ORDER BY id LIMIT $3";
        Ok(with_pool!(&self.db, pool => sqlx::query_scalar(sql)
            .bind(project).bind(before).bind(limit).fetch_all(pool).await?))
    }

    /// Records `step` as the user's last accepted TOTP step; false when it (or a later one) was
    /// accepted before, so that one code cannot sign in twice, even concurrently.
    pub async fn claim_totp_step(
        &self,
        project: Uuid,
        user: Uuid,
        step: i64,
    ) -> Result<bool, StoreError> {
        let sql = "UPDATE users SET totp_last_step = $1 WHERE project_id = $2 AND id = $3 \
                   AND (totp_last_step IS NULL OR totp_last_step < $1)";
        let done = with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(step).bind(project).bind(user).execute(pool).await?.rows_affected());
        Ok(done == 1)
    }

    /// Deletes a user (sessions and tokens go with it) and enqueues `events`.
    pub async fn delete_user(
        &self,
        project: Uuid,
        id: Uuid,
        events: &[Event],
    ) -> Result<(), StoreError> {
        self.remembered
            .writing(&(project, id), async {
                with_pool!(&self.db, pool => {
                    let mut tx = pool.begin().await?;
                    let done = sqlx::query("DELETE FROM users WHERE project_id = $1 AND id = $2")
                        .bind(project).bind(id).execute(&mut *tx).await?;
                    if done.rows_affected() == 0 {
                        return Err(StoreError::NotFound);
                    }
                    for e in events {
                        (*tx).enqueue(e).await?;
                    }
                    tx.commit().await?;
                });
                Ok(())
            })
            .await
    }

    /// Selects a team for a user (personal team at creation).
    pub async fn set_selected_team(
        &self,
        project: Uuid,
        user: Uuid,
        team: Uuid,
    ) -> Result<(), StoreError> {
        self.remembered
            .writing(&(project, user), async {
                with_pool!(&self.db, pool => sqlx::query("UPDATE users SET selected_team_id = $1 WHERE project_id = $2 AND id = $3")
                    .bind(team).bind(project).bind(user).execute(pool).await.map(drop))?;
                Ok(())
            })
            .await
    }

    /// Clears a selected team that no longer holds the user (all its users when `user` is None).
    pub async fn clear_selected_team(
        &self,
        project: Uuid,
        team: Uuid,
        user: Option<Uuid>,
    ) -> Result<u64, StoreError> {
        let written: Result<u64, StoreError> = async {
            let done = match user {
                Some(user) => with_pool!(&self.db, pool => sqlx::query(
                    "UPDATE users SET selected_team_id = NULL WHERE project_id = $1 AND selected_team_id = $2 AND id = $3")
                    .bind(project).bind(team).bind(user).execute(pool).await?.rows_affected()),
                None => with_pool!(&self.db, pool => sqlx::query(
                    "UPDATE users SET selected_team_id = NULL WHERE project_id = $1 AND selected_team_id = $2")
                    .bind(project).bind(team).execute(pool).await?.rows_affected()),
            };
            Ok(done)
        }
        .await;
        match user {
            Some(user) => self.remembered.forget(&(project, user)),
            None => self.remembered.forget_all(),
        };
        written
    }

    /// Opens a session and marks the user active; `false` (and nothing written) when the user
    /// is gone, which a sign-in racing the user's deletion can meet. The user's row is updated
    /// first, so a deletion either came before (nothing is inserted) or waits for this write.
    pub async fn insert_session(&self, s: &NewSession) -> Result<bool, StoreError> {
        let n = &s.session;
        // Both backends' statements take the same eight values.
        macro_rules! opening {
            ($sql:expr) => {
                sqlx::query($sql)
                    .bind(n.project_id)
                    .bind(n.id)
                    .bind(n.user_id)
                    .bind(n.is_impersonation)
                    .bind(n.created_at_millis)
                    .bind(n.last_used_at_millis)
                    .bind(n.expires_at_millis)
                    .bind(&s.token_hash)
            };
        }
        self.remembered
            .writing(&(n.project_id, n.user_id), async {
                let opened = match &self.db {
                    // One statement (one round trip) on PostgreSQL: each insert reads the row
                    // the step before returned, so the three run in order or not at all.
                    Database::Postgres(pool) => {
                        let sql = format!(
                            "WITH u AS (UPDATE users SET last_active_at_millis = $5 \
                             WHERE project_id = $1 AND id = $3 RETURNING id), \
                             s AS (INSERT INTO sessions ({SESSION_COLUMNS}) \
                             SELECT $1, $2, u.id, $4, $5, $6, $7 FROM u RETURNING id) \
                             INSERT INTO refresh_tokens (project_id, token_hash, session_id, created_at_millis) \
                             SELECT $1, $8, s.id, $5 FROM s"
                        );
                        opening!(&sql)
                            .execute(pool)
                            .await?
                            .rows_affected()
                            > 0
                    }
                    // One command (one trip to the connection's thread) inside the
                    // transaction: each insert runs only if the statement before it wrote its
                    // row (`changes()`), so for a gone user nothing is written.
                    Database::Sqlite(pool) => {
                        let sql = format!(
                            "UPDATE users SET last_active_at_millis = $5 WHERE project_id = $1 AND id = $3; \
                             INSERT INTO sessions ({SESSION_COLUMNS}) \
                             SELECT $1, $2, $3, $4, $5, $6, $7 WHERE changes() > 0; \
                             INSERT INTO refresh_tokens (project_id, token_hash, session_id, created_at_millis) \
                             SELECT $1, $8, $2, $5 WHERE changes() > 0"
                        );
                        let mut tx = pool.begin().await?;
                        let written = opening!(&sql)
                            .execute(&mut *tx)
                            .await?
                            .rows_affected();
                        tx.commit().await?;
                        written > 0
                    }
                };
                Ok(opened)
            })
            .await
    }

    pub async fn session(&self, project: Uuid, id: Uuid) -> Result<Option<SessionRow>, StoreError> {
        let sql =
            format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE project_id = $1 AND id = $2");
        Ok(
            with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).bind(id).fetch_optional(pool).await?),
        )
    }

    /// The user's sessions, newest first.
    pub async fn sessions_of(
        &self,
        project: Uuid,
        user: Uuid,
    ) -> Result<Vec<SessionRow>, StoreError> {
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE project_id = $1 AND user_id = $2 \
             ORDER BY created_at_millis DESC, id DESC"
        );
        Ok(
            with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).bind(user).fetch_all(pool).await?),
        )
    }

    pub async fn find_token(
        &self,
        project: Uuid,
        token_hash: &str,
    ) -> Result<Option<TokenLookup>, StoreError> {
        let found = self.tokens.one(project, token_hash.to_owned()).await?;
        Ok(found.map(|f| TokenLookup {
            session: SessionRow {
                project_id: f.user.project_id,
                id: f.session_id,
                user_id: f.user.id,
                is_impersonation: f.is_impersonation,
                created_at_millis: f.created_at_millis,
                last_used_at_millis: f.last_used_at_millis,
                expires_at_millis: f.expires_at_millis,
            },
            superseded_at_millis: f.superseded_at_millis,
            user: f.user,
        }))
    }

    /// Records a use of a session: last-used times, and with rotation the presented token
    /// superseded by `new_token_hash`.
    pub async fn touch_session(
        &self,
        s: &SessionRow,
        now: i64,
        presented_hash: &str,
        new_token_hash: Option<&str>,
    ) -> Result<(), StoreError> {
        self.remembered
            .writing(&(s.project_id, s.user_id), async {
                let touch = Touch {
                    project_id: s.project_id,
                    session_id: s.id,
                    user_id: s.user_id,
                    now,
                    presented_hash: presented_hash.to_owned(),
                    new_hash: new_token_hash.map(str::to_owned),
                };
                // The refreshes of a moment share one statement on PostgreSQL, one commit on
                // SQLite (one writer at a time, and a sync per commit: 16 concurrent refreshes
                // otherwise queue for the lock one by one and leave the machine idle).
                self.touches.write(touch).await?;
                Ok(())
            })
            .await
    }

    /// Ends sessions and announces it; returns whether any existed.
    pub async fn delete_sessions(
        &self,
        project: Uuid,
        user: Uuid,
        ids: &[Uuid],
        now: i64,
    ) -> Result<bool, StoreError> {
        let deleted = with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            let mut deleted = Vec::new();
            for id in ids {
                let done = sqlx::query("DELETE FROM sessions WHERE project_id = $1 AND id = $2")
                    .bind(project).bind(id).execute(&mut *tx).await?;
                if done.rows_affected() > 0 {
                    deleted.push(*id);
                }
            }
            if !deleted.is_empty() {
                (*tx).enqueue(&revocation_event(project, user, &deleted, now)).await?;
            }
            tx.commit().await?;
            deleted
        });
        Ok(!deleted.is_empty())
    }
}

/// Internal event telling every gateway to refuse access tokens of these sessions (80 §6).
pub fn revocation_event(project: Uuid, user: Uuid, sessions: &[Uuid], now: i64) -> Event {
    Event::new(
        latchkey_shared::events::SESSIONS_REVOKED,
        project,
        now,
        serde_json::json!({ "user_id": user, "session_ids": sessions }),
    )
}

macro_rules! insert_session {
    ($conn:expr, $s:expr) => {{
        let s: &NewSession = $s;
        let sql = format!(
            "INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
        );
        sqlx::query(&sql)
            .bind(s.session.project_id).bind(s.session.id).bind(s.session.user_id)
            .bind(s.session.is_impersonation).bind(s.session.created_at_millis)
            .bind(s.session.last_used_at_millis).bind(s.session.expires_at_millis)
            .execute($conn).await?;
        sqlx::query("INSERT INTO refresh_tokens (project_id, token_hash, session_id, created_at_millis) VALUES ($1, $2, $3, $4)")
            .bind(s.session.project_id).bind(&s.token_hash).bind(s.session.id).bind(s.session.created_at_millis)
            .execute($conn).await?;
    }};
}
use insert_session;

#[cfg(test)]
mod tests {
    use latchkey_shared::clock::ManualClock;

    use super::*;
    use crate::domain::{projects, sessions, users};
    use crate::store::{PostgresStore, SqliteStore};

    /// A session opens for a user that is there, marking it active, and for no other: a
    /// sign-in that lost a race with the user's deletion writes nothing and says so.
    async fn sessions_open_only_for_present_users(accounts: &Accounts, project: Uuid) {
        let user = users::new_row(project, 1_000);
        accounts
            .insert_user(&user, None, &[])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let (new, _) = sessions::new_session(project, user.id, 5_000, 60_000, false);
        assert_eq!(accounts.insert_session(&new).await.ok(), Some(true));
        let found = accounts.find_token(project, &new.token_hash).await;
        assert_eq!(
            found.ok().flatten().map(|t| t.session.id),
            Some(new.session.id)
        );
        let row = accounts.user_from_database(project, user.id).await;
        assert_eq!(
            row.ok().flatten().map(|r| r.last_active_at_millis),
            Some(5_000)
        );

        accounts
            .delete_user(project, user.id, &[])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        for user_id in [user.id, Uuid::new_v4()] {
            let (late, _) = sessions::new_session(project, user_id, 6_000, 60_000, false);
            assert_eq!(accounts.insert_session(&late).await.ok(), Some(false));
            let found = accounts.find_token(project, &late.token_hash).await;
            assert!(matches!(found, Ok(None)), "{found:?}");
            assert!(matches!(
                accounts.session(project, late.session.id).await,
                Ok(None)
            ));
        }
    }

    #[tokio::test]
    async fn sqlite_sessions_open_only_for_present_users() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("sqlite://{}/auth.db", dir.path().display());
        let db = Database::connect_and_migrate(&url, crate::MIGRATIONS)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let Database::Sqlite(pool) = db.clone() else {
            panic!("sqlite did not open")
        };
        let created = projects::create(&SqliteStore::new(pool), &ManualClock::new(1), "A")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        sessions_open_only_for_present_users(&Accounts::new(db), created.project.id).await;
    }

    #[tokio::test]
    async fn postgres_sessions_open_only_for_present_users() {
        let infra = latchkey_shared::testing::Infra::new();
        let url = infra
            .postgres_database("auth_sessions")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let db = Database::connect_and_migrate(&url, crate::MIGRATIONS)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let Database::Postgres(pool) = db.clone() else {
            panic!("postgres did not open")
        };
        let created =
            projects::create(&PostgresStore::new(pool.clone()), &ManualClock::new(1), "A")
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        sessions_open_only_for_present_users(&Accounts::new(db), created.project.id).await;
        pool.close().await;
        infra.cleanup().await;
    }
}
