//! Passkeys: the WebAuthn credentials of users. Every change also writes the user's
//! `passkey_auth_enabled` and enqueues its event in the same transaction, and forgets the
//! remembered user row, so the user document never disagrees with the credentials.

use std::sync::Arc;

use latchkey_shared::db::Database;
use latchkey_shared::events::outbox::Enqueue;
use latchkey_shared::events::Event;
use latchkey_shared::remembered::Remembered;
use latchkey_shared::with_pool;
use uuid::Uuid;

use super::accounts::UserRow;
use super::StoreError;

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct StoredPasskey {
    pub project_id: Uuid,
    pub id: Uuid,
    pub user_id: Uuid,
    /// base64url of the credential id.
    pub credential_id: String,
    /// The credential as webauthn-rs serializes it (public key, counter, flags).
    pub credential: String,
    pub sign_count: i64,
    pub created_at_millis: i64,
    pub last_used_at_millis: Option<i64>,
}

const COLUMNS: &str = "project_id, id, user_id, credential_id, credential, sign_count, \
                       created_at_millis, last_used_at_millis";

/// Sets the user's flag to whether any credential is left.
const SYNC_FLAG: &str = "UPDATE users SET passkey_auth_enabled = EXISTS (SELECT 1 FROM passkeys p \
     WHERE p.project_id = users.project_id AND p.user_id = users.id) WHERE project_id = $1 AND id = $2";

/// What an insert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    Done,
    /// The user already has the most passkeys allowed.
    Full,
}

/// Takes the user's row lock first, so concurrent changes to one user's passkeys run one after
/// the other and each sees what the one before committed (PostgreSQL reads committed rows per
/// statement; SQLite has one writer).
const LOCK_USER: &str = "UPDATE users SET passkey_auth_enabled = passkey_auth_enabled \
     WHERE project_id = $1 AND id = $2";
const COUNT: &str = "SELECT COUNT(*) FROM passkeys WHERE project_id = $1 AND user_id = $2";

#[derive(Clone)]
pub struct Passkeys {
    db: Database,
    users: Arc<Remembered<(Uuid, Uuid), UserRow>>,
}

impl Passkeys {
    pub fn new(db: Database, users: Arc<Remembered<(Uuid, Uuid), UserRow>>) -> Self {
        Self { db, users }
    }

    /// Stores a new credential unless the user already has `max`; `Conflict` when the project
    /// already has a credential with its id, `NotFound` when the user is gone.
    pub async fn insert(
        &self,
        passkey: &StoredPasskey,
        max: i64,
        event: &Event,
    ) -> Result<Inserted, StoreError> {
        let sql =
            format!("INSERT INTO passkeys ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)");
        let key = (passkey.project_id, passkey.user_id);
        self.users
            .writing(&key, async {
                with_pool!(&self.db, pool => {
                    let mut tx = pool.begin().await?;
                    if sqlx::query(LOCK_USER).bind(key.0).bind(key.1).execute(&mut *tx).await?.rows_affected() == 0 {
                        return Err(StoreError::NotFound);
                    }
                    let held: i64 = sqlx::query_scalar(COUNT)
                        .bind(key.0).bind(key.1).fetch_one(&mut *tx).await?;
                    if held >= max {
                        return Ok(Inserted::Full);
                    }
                    let inserted = sqlx::query(&sql)
                        .bind(passkey.project_id).bind(passkey.id).bind(passkey.user_id)
                        .bind(&passkey.credential_id).bind(&passkey.credential).bind(passkey.sign_count)
                        .bind(passkey.created_at_millis).bind(passkey.last_used_at_millis)
                        .execute(&mut *tx).await;
                    match inserted {
                        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                            return Err(StoreError::Conflict)
                        }
                        other => other?,
                    };
                    sqlx::query(SYNC_FLAG).bind(key.0).bind(key.1).execute(&mut *tx).await?;
                    (*tx).enqueue(event).await?;
                    tx.commit().await?;
                });
                Ok(Inserted::Done)
            })
            .await
    }

    pub async fn by_credential_id(
        &self,
        project: Uuid,
        credential_id: &str,
    ) -> Result<Option<StoredPasskey>, StoreError> {
        let sql =
            format!("SELECT {COLUMNS} FROM passkeys WHERE project_id = $1 AND credential_id = $2");
        Ok(with_pool!(&self.db, pool => sqlx::query_as(&sql)
            .bind(project).bind(credential_id).fetch_optional(pool).await?))
    }

    /// The user's passkeys, oldest first.
    pub async fn of_user(
        &self,
        project: Uuid,
        user: Uuid,
    ) -> Result<Vec<StoredPasskey>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM passkeys WHERE project_id = $1 AND user_id = $2 \
             ORDER BY created_at_millis, id"
        );
        Ok(with_pool!(&self.db, pool => sqlx::query_as(&sql)
            .bind(project).bind(user).fetch_all(pool).await?))
    }

    /// Records a verified sign-in: the new counter and credential, if the stored counter is
    /// still `seen_count`. False when another sign-in with this credential got there first,
    /// which a cloned authenticator would cause.
    pub async fn record_use(
        &self,
        passkey: &StoredPasskey,
        seen_count: i64,
        now: i64,
    ) -> Result<bool, StoreError> {
        let sql = "UPDATE passkeys SET sign_count = $1, credential = $2, last_used_at_millis = $3 \
                   WHERE project_id = $4 AND id = $5 AND sign_count = $6";
        let done = with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(passkey.sign_count).bind(&passkey.credential).bind(now)
            .bind(passkey.project_id).bind(passkey.id).bind(seen_count)
            .execute(pool).await?.rows_affected());
        Ok(done == 1)
    }

    /// Deletes one of the user's passkeys, or all of them, with the event `event_for` makes
    /// from whether any passkey is left, when any was deleted. Returns how many went.
    pub async fn delete(
        &self,
        project: Uuid,
        user: Uuid,
        id: Option<Uuid>,
        event_for: impl FnOnce(bool) -> Event + Send,
    ) -> Result<u64, StoreError> {
        let key = (project, user);
        self.users
            .writing(&key, async {
                let deleted = with_pool!(&self.db, pool => {
                    let mut tx = pool.begin().await?;
                    sqlx::query(LOCK_USER).bind(project).bind(user).execute(&mut *tx).await?;
                    let deleted = sqlx::query(
                        "DELETE FROM passkeys WHERE project_id = $1 AND user_id = $2 \
                         AND ($3 IS NULL OR id = $3)",
                    )
                    .bind(project).bind(user).bind(id)
                    .execute(&mut *tx).await?.rows_affected();
                    if deleted > 0 {
                        sqlx::query(SYNC_FLAG).bind(project).bind(user).execute(&mut *tx).await?;
                        let left: i64 = sqlx::query_scalar(COUNT)
                            .bind(project).bind(user).fetch_one(&mut *tx).await?;
                        (*tx).enqueue(&event_for(left > 0)).await?;
                    }
                    tx.commit().await?;
                    deleted
                });
                Ok(deleted)
            })
            .await
    }
}
