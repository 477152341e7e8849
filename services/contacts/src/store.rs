//! The contacts database: channels and sent mail. The statements are the same on Postgres and
//! SQLite, so each runs through `with_pool!` against whichever pool the service was given.

use latchkey_shared::db::coalesce::RowsBy;
use latchkey_shared::db::search::{self, Searchable, Start};
use latchkey_shared::db::{is_unique_violation, Database};
use latchkey_shared::remembered::Remembered;
use latchkey_shared::with_pool;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A unique index refused the write (same address twice for a user, or an auth address
    /// already signing in another user).
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
pub struct Channel {
    pub project_id: Uuid,
    pub id: Uuid,
    pub user_id: Uuid,
    pub value: String,
    pub used_for_auth: bool,
    pub is_verified: bool,
    pub is_primary: bool,
    pub created_at_millis: i64,
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Email {
    pub project_id: Uuid,
    pub id: Uuid,
    pub recipient: String,
    pub subject: String,
    pub template: String,
    pub status: String,
    pub error: Option<String>,
    pub text_body: Option<String>,
    pub html_body: Option<String>,
    pub created_at_millis: i64,
}

/// Channel values for the users list's search; values are stored lower-case.
const SEARCHABLE: Searchable = Searchable {
    table: "channels",
    id: "user_id",
    text: "value",
    indexed: "value",
    fts: "channel_search_fts",
    fts_rows: "channel_search",
};

const CHANNEL_COLUMNS: &str =
    "project_id, id, user_id, value, used_for_auth, is_verified, is_primary, created_at_millis";

#[derive(Debug, Clone)]
pub struct Store {
    db: Database,
    /// One user's channels by (project, user) while this process is the database's only writer
    /// (SQLite); every write below forgets the users it touched once it is done.
    remembered: std::sync::Arc<Remembered<(Uuid, Uuid), Vec<Channel>>>,
    /// One user's channels by (project, user), read together with the other requests'.
    by_user: RowsBy<Channel>,
}

impl Store {
    pub fn new(db: Database) -> Self {
        Self {
            remembered: std::sync::Arc::new(Remembered::over(&db)),
            by_user: RowsBy::new(
                &db,
                format!("SELECT {CHANNEL_COLUMNS} FROM channels"),
                "user_id",
                |c: &Channel| (c.project_id, c.user_id),
            ),
            db,
        }
    }

    pub async fn channel(&self, project: Uuid, id: Uuid) -> Result<Option<Channel>, StoreError> {
        let sql =
            format!("SELECT {CHANNEL_COLUMNS} FROM channels WHERE project_id = $1 AND id = $2");
        Ok(
            with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).bind(id).fetch_optional(pool).await?),
        )
    }

    pub async fn auth_channel(
        &self,
        project: Uuid,
        value: &str,
    ) -> Result<Option<Channel>, StoreError> {
        let sql = format!(
            "SELECT {CHANNEL_COLUMNS} FROM channels WHERE project_id = $1 AND value = $2 AND used_for_auth"
        );
        Ok(
            with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).bind(value).fetch_optional(pool).await?),
        )
    }

    /// Every channel of the user whose auth channel is `value` (none when no channel is), in
    /// creation order: a sign-in's look-up and its owner's channels in one statement.
    pub async fn auth_owner_channels(
        &self,
        project: Uuid,
        value: &str,
    ) -> Result<Vec<Channel>, StoreError> {
        let sql = format!(
            "SELECT {CHANNEL_COLUMNS} FROM channels WHERE project_id = $1 AND user_id = \
             (SELECT user_id FROM channels WHERE project_id = $1 AND value = $2 AND used_for_auth) \
             ORDER BY created_at_millis, id"
        );
        Ok(
            with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).bind(value).fetch_all(pool).await?),
        )
    }

    /// Channels of `users`, or of the whole project when `users` is empty, in creation order.
    pub async fn channels_of(
        &self,
        project: Uuid,
        users: &[Uuid],
    ) -> Result<Vec<Channel>, StoreError> {
        if users.is_empty() {
            let sql = format!(
                "SELECT {CHANNEL_COLUMNS} FROM channels WHERE project_id = $1 ORDER BY created_at_millis, id"
            );
            return Ok(
                with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).fetch_all(pool).await?),
            );
        }
        // One user's channels (a user read) may be remembered, and are read together with
        // other requests'; a page's are one statement of their own.
        let mut found = match users {
            [one] => {
                let read =
                    async { Ok::<_, StoreError>(Some(self.by_user.all(project, *one).await?)) };
                self.remembered
                    .or_read((project, *one), read)
                    .await?
                    .unwrap_or_default()
            }
            _ => {
                let select = format!("SELECT {CHANNEL_COLUMNS} FROM channels");
                latchkey_shared::db::select_in(&self.db, &select, project, "user_id", users).await?
            }
        };
        found.sort_by_key(|c| (c.created_at_millis, c.id));
        Ok(found)
    }

    /// Users with a channel whose value contains `text`, in user id order from `start` on, at
    /// most `want` (see `shared::db::search`).
    pub async fn search_users(
        &self,
        project: Uuid,
        text: &str,
        start: Start,
        want: usize,
    ) -> Result<Vec<Uuid>, StoreError> {
        Ok(
            search::matching(&self.db, &SEARCHABLE, project, text, start, want)
                .await?
                .ids,
        )
    }

    /// Inserts a channel; when it is primary, the user's previous primary is demoted in the
    /// same transaction.
    pub async fn insert(&self, c: &Channel) -> Result<(), StoreError> {
        self.remembered
            .writing(&(c.project_id, c.user_id), async {
                with_pool!(&self.db, pool => {
                    let mut tx = pool.begin().await?;
                    if c.is_primary {
                        sqlx::query("UPDATE channels SET is_primary = FALSE WHERE project_id = $1 AND user_id = $2 AND is_primary")
                            .bind(c.project_id).bind(c.user_id).execute(&mut *tx).await?;
                    }
                    let sql = format!("INSERT INTO channels ({CHANNEL_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)");
                    sqlx::query(&sql)
                        .bind(c.project_id).bind(c.id).bind(c.user_id).bind(&c.value)
                        .bind(c.used_for_auth).bind(c.is_verified).bind(c.is_primary).bind(c.created_at_millis)
                        .execute(&mut *tx).await?;
                    tx.commit().await?;
                });
                Ok(())
            })
            .await
    }

    /// Rewrites a channel's flags and value; demotes the user's other primary when it becomes
    /// primary.
    pub async fn update(&self, c: &Channel) -> Result<(), StoreError> {
        self.remembered
            .writing(&(c.project_id, c.user_id), async {
                with_pool!(&self.db, pool => {
                    let mut tx = pool.begin().await?;
                    if c.is_primary {
                        sqlx::query("UPDATE channels SET is_primary = FALSE WHERE project_id = $1 AND user_id = $2 AND is_primary AND id <> $3")
                            .bind(c.project_id).bind(c.user_id).bind(c.id).execute(&mut *tx).await?;
                    }
                    sqlx::query("UPDATE channels SET value = $1, used_for_auth = $2, is_verified = $3, is_primary = $4 WHERE project_id = $5 AND id = $6")
                        .bind(&c.value).bind(c.used_for_auth).bind(c.is_verified).bind(c.is_primary)
                        .bind(c.project_id).bind(c.id)
                        .execute(&mut *tx).await?;
                    tx.commit().await?;
                });
                Ok(())
            })
            .await
    }

    pub async fn delete(&self, project: Uuid, id: Uuid) -> Result<(), StoreError> {
        let sql = "DELETE FROM channels WHERE project_id = $1 AND id = $2";
        let deleted = with_pool!(&self.db, pool => sqlx::query(sql).bind(project).bind(id).execute(pool).await.map(drop));
        // The id names no user: forget every user's channels (deletions are rare).
        self.remembered.forget_all();
        Ok(deleted?)
    }

    pub async fn delete_user(&self, project: Uuid, user: Uuid) -> Result<u64, StoreError> {
        let sql = "DELETE FROM channels WHERE project_id = $1 AND user_id = $2";
        let deleted = with_pool!(&self.db, pool => sqlx::query(sql).bind(project).bind(user).execute(pool).await.map(|r| r.rows_affected()));
        self.remembered.forget(&(project, user));
        Ok(deleted?)
    }

    pub async fn insert_email(&self, e: &Email) -> Result<(), StoreError> {
        let sql = "INSERT INTO emails (project_id, id, recipient, subject, template, status, error, \
                   text_body, html_body, created_at_millis) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";
        with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(e.project_id).bind(e.id).bind(&e.recipient).bind(&e.subject).bind(&e.template)
            .bind(&e.status).bind(&e.error).bind(&e.text_body).bind(&e.html_body).bind(e.created_at_millis)
            .execute(pool).await.map(drop)?);
        Ok(())
    }

    pub async fn set_email_status(
        &self,
        project: Uuid,
        id: Uuid,
        status: &str,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        let sql = "UPDATE emails SET status = $1, error = $2 WHERE project_id = $3 AND id = $4";
        with_pool!(&self.db, pool => sqlx::query(sql).bind(status).bind(error).bind(project).bind(id).execute(pool).await.map(drop)?);
        Ok(())
    }

    pub async fn emails(&self, project: Uuid) -> Result<Vec<Email>, StoreError> {
        let sql = "SELECT project_id, id, recipient, subject, template, status, error, text_body, html_body, \
                   created_at_millis FROM emails WHERE project_id = $1 ORDER BY created_at_millis DESC, id DESC";
        Ok(with_pool!(&self.db, pool => sqlx::query_as(sql).bind(project).fetch_all(pool).await?))
    }
}
