//! CLI logins: started by a CLI, completed by its user in the browser, claimed once by the
//! CLI's poll. Codes are kept as hashes; the state changes are single statements whose
//! conditions make them happen once, even under concurrent requests.

use latchkey_shared::db::Database;
use latchkey_shared::with_pool;
use uuid::Uuid;

use super::accounts::SessionRow;
use super::StoreError;

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct CliLogin {
    pub project_id: Uuid,
    pub id: Uuid,
    pub polling_code_hash: String,
    pub login_code_hash: String,
    pub user_id: Option<Uuid>,
    pub session_id: Option<Uuid>,
    pub created_at_millis: i64,
    pub expires_at_millis: i64,
    pub completed_at_millis: Option<i64>,
    pub used_at_millis: Option<i64>,
}

#[derive(Clone)]
pub struct CliLogins {
    db: Database,
}

const COLUMNS: &str = "project_id, id, polling_code_hash, login_code_hash, user_id, session_id, \
                       created_at_millis, expires_at_millis, completed_at_millis, used_at_millis";

impl CliLogins {
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    pub async fn insert(&self, login: &CliLogin) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO cli_logins ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        );
        with_pool!(&self.db, pool => sqlx::query(&sql)
            .bind(login.project_id)
            .bind(login.id)
            .bind(&login.polling_code_hash)
            .bind(&login.login_code_hash)
            .bind(login.user_id)
            .bind(login.session_id)
            .bind(login.created_at_millis)
            .bind(login.expires_at_millis)
            .bind(login.completed_at_millis)
            .bind(login.used_at_millis)
            .execute(pool)
            .await
            .map(drop))?;
        Ok(())
    }

    pub async fn by_polling_code(
        &self,
        project: Uuid,
        hash: &str,
    ) -> Result<Option<CliLogin>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM cli_logins WHERE project_id = $1 AND polling_code_hash = $2"
        );
        Ok(with_pool!(&self.db, pool => sqlx::query_as(&sql)
            .bind(project).bind(hash).fetch_optional(pool).await?))
    }

    /// Names the user and session of a pending login (not completed, not used, not expired at
    /// `now`); false when the code names no such login.
    pub async fn complete(
        &self,
        project: Uuid,
        login_code_hash: &str,
        session: &SessionRow,
        now: i64,
    ) -> Result<bool, StoreError> {
        let sql = "UPDATE cli_logins SET user_id = $1, session_id = $2, completed_at_millis = $3 \
                   WHERE project_id = $4 AND login_code_hash = $5 AND completed_at_millis IS NULL \
                   AND used_at_millis IS NULL AND expires_at_millis > $3";
        let done = with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(session.user_id).bind(session.id).bind(now).bind(project).bind(login_code_hash)
            .execute(pool).await?.rows_affected());
        Ok(done == 1)
    }

    /// Whether the login code names a pending login.
    pub async fn is_pending(
        &self,
        project: Uuid,
        login_code_hash: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let sql = "SELECT id FROM cli_logins WHERE project_id = $1 AND login_code_hash = $2 \
                   AND completed_at_millis IS NULL AND used_at_millis IS NULL AND expires_at_millis > $3";
        let found: Option<(Uuid,)> = with_pool!(&self.db, pool => sqlx::query_as(sql)
            .bind(project).bind(login_code_hash).bind(now).fetch_optional(pool).await?);
        Ok(found.is_some())
    }

    /// Marks a completed, unexpired login used while the session that completed it is live;
    /// false when a concurrent poll did first, or that session has expired meanwhile.
    pub async fn claim(&self, project: Uuid, id: Uuid, now: i64) -> Result<bool, StoreError> {
        let sql = "UPDATE cli_logins SET used_at_millis = $1 WHERE project_id = $2 AND id = $3 \
                   AND completed_at_millis IS NOT NULL AND used_at_millis IS NULL AND expires_at_millis > $1 \
                   AND EXISTS (SELECT 1 FROM sessions s WHERE s.project_id = cli_logins.project_id \
                   AND s.id = cli_logins.session_id AND s.expires_at_millis > $1)";
        let done = with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(now).bind(project).bind(id).execute(pool).await?.rows_affected());
        Ok(done == 1)
    }

    /// Deletes the project's logins that expired before `before` (they answer nothing but
    /// "expired", which a day later no CLI is still asking).
    pub async fn delete_expired(&self, project: Uuid, before: i64) -> Result<(), StoreError> {
        let sql = "DELETE FROM cli_logins WHERE project_id = $1 AND expires_at_millis < $2";
        with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(project).bind(before).execute(pool).await.map(drop))?;
        Ok(())
    }
}
