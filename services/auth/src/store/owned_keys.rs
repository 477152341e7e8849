//! API keys owned by a user or a team. Creation and revocation enqueue their events in the
//! same transaction, so a webhook is sent exactly when the change stands.

use latchkey_shared::db::Database;
use latchkey_shared::events::outbox::Enqueue;
use latchkey_shared::events::Event;
use latchkey_shared::with_pool;
use uuid::Uuid;

use super::StoreError;

/// Who a key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    User(Uuid),
    Team(Uuid),
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct OwnedKey {
    pub project_id: Uuid,
    pub id: Uuid,
    pub user_id: Option<Uuid>,
    pub team_id: Option<Uuid>,
    pub description: String,
    pub is_public: bool,
    pub secret_hash: String,
    pub last_four: String,
    pub created_at_millis: i64,
    pub expires_at_millis: Option<i64>,
    pub revoked_at_millis: Option<i64>,
}

impl OwnedKey {
    pub fn owner(&self) -> Option<Owner> {
        match (self.user_id, self.team_id) {
            (Some(user), None) => Some(Owner::User(user)),
            (None, Some(team)) => Some(Owner::Team(team)),
            _ => None,
        }
    }
}

const COLUMNS: &str = "project_id, id, user_id, team_id, description, is_public, secret_hash, \
                       last_four, created_at_millis, expires_at_millis, revoked_at_millis";

#[derive(Clone)]
pub struct OwnedKeys {
    db: Database,
}

impl OwnedKeys {
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    pub async fn insert(&self, key: &OwnedKey, event: &Event) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO owned_api_keys ({COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        );
        with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query(&sql)
                .bind(key.project_id).bind(key.id).bind(key.user_id).bind(key.team_id)
                .bind(&key.description).bind(key.is_public).bind(&key.secret_hash)
                .bind(&key.last_four).bind(key.created_at_millis).bind(key.expires_at_millis)
                .bind(key.revoked_at_millis)
                .execute(&mut *tx).await?;
            (*tx).enqueue(event).await?;
            tx.commit().await?;
        });
        Ok(())
    }

    /// The owner's keys, newest first, revoked and expired ones included.
    pub async fn of(&self, project: Uuid, owner: Owner) -> Result<Vec<OwnedKey>, StoreError> {
        let (column, id) = match owner {
            Owner::User(id) => ("user_id", id),
            Owner::Team(id) => ("team_id", id),
        };
        let sql = format!(
            "SELECT {COLUMNS} FROM owned_api_keys WHERE project_id = $1 AND {column} = $2 \
             ORDER BY created_at_millis DESC, id DESC"
        );
        Ok(with_pool!(&self.db, pool => sqlx::query_as(&sql)
            .bind(project).bind(id).fetch_all(pool).await?))
    }

    pub async fn get(&self, project: Uuid, id: Uuid) -> Result<Option<OwnedKey>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM owned_api_keys WHERE project_id = $1 AND id = $2");
        Ok(with_pool!(&self.db, pool => sqlx::query_as(&sql)
            .bind(project).bind(id).fetch_optional(pool).await?))
    }

    pub async fn by_hash(&self, project: Uuid, hash: &str) -> Result<Option<OwnedKey>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM owned_api_keys WHERE project_id = $1 AND secret_hash = $2"
        );
        Ok(with_pool!(&self.db, pool => sqlx::query_as(&sql)
            .bind(project).bind(hash).fetch_optional(pool).await?))
    }

    /// Applies a new description and a revocation at `revoked_at` with its event. Only the
    /// request that revokes the key enqueues the event (a second revocation keeps the first
    /// time and says nothing). `NotFound` when there is no such key.
    pub async fn update(
        &self,
        project: Uuid,
        id: Uuid,
        description: Option<&str>,
        revocation: Option<(i64, &Event)>,
    ) -> Result<(), StoreError> {
        with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            let done = sqlx::query(
                "UPDATE owned_api_keys SET description = COALESCE($1, description) \
                 WHERE project_id = $2 AND id = $3",
            )
            .bind(description).bind(project).bind(id)
            .execute(&mut *tx).await?;
            if done.rows_affected() == 0 {
                return Err(StoreError::NotFound);
            }
            if let Some((at, event)) = revocation {
                let revoked = sqlx::query(
                    "UPDATE owned_api_keys SET revoked_at_millis = $1 \
                     WHERE project_id = $2 AND id = $3 AND revoked_at_millis IS NULL",
                )
                .bind(at).bind(project).bind(id)
                .execute(&mut *tx).await?;
                if revoked.rows_affected() == 1 {
                    (*tx).enqueue(event).await?;
                }
            }
            tx.commit().await?;
        });
        Ok(())
    }

    /// Deletes a deleted team's keys.
    pub async fn delete_team_keys(&self, project: Uuid, team: Uuid) -> Result<(), StoreError> {
        let sql = "DELETE FROM owned_api_keys WHERE project_id = $1 AND team_id = $2";
        with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(project).bind(team).execute(pool).await.map(drop))?;
        Ok(())
    }
}
