//! The `ProjectStore` for Postgres and for SQLite. Both run the same statements: UUIDs bind
//! natively on Postgres and as 16-byte BLOBs on SQLite, and `$n` placeholders work on both.

use latchkey_shared::db::Pool;
type PgPool = Pool<sqlx::Postgres>;
type SqlitePool = Pool<sqlx::Sqlite>;
use uuid::Uuid;

use super::{KeyKind, KeySet, NewProject, Project, ProjectStore, SigningKey, StoreError};

const KEY_SET_COLUMNS: &str = "project_id, id, description, created_at_millis, expires_at_millis, \
     revoked_at_millis, client_key_hash, client_key_last_four, server_key_hash, \
     server_key_last_four, admin_key_hash, admin_key_last_four";

pub(super) fn conflict_or_db(e: sqlx::Error) -> StoreError {
    if latchkey_shared::db::is_unique_violation(&e) {
        StoreError::Conflict
    } else {
        StoreError::Db(e)
    }
}

macro_rules! sql_store {
    ($(#[$doc:meta])* $store:ident, $pool:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $store {
            pool: $pool,
        }

        impl $store {
            pub fn new(pool: $pool) -> Self {
                Self { pool }
            }
        }

        #[async_trait::async_trait]
        impl ProjectStore for $store {
            async fn insert_project(&self, new: &NewProject) -> Result<(), StoreError> {
                let mut tx = self.pool.begin().await?;
                let p = &new.project;
                sqlx::query(
                    "INSERT INTO projects (id, display_name, settings, settings_version, created_at_millis) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(p.id)
                .bind(&p.display_name)
                .bind(&p.settings)
                .bind(p.settings_version)
                .bind(p.created_at_millis)
                .execute(&mut *tx)
                .await
                .map_err(conflict_or_db)?;
                insert_key_set!(&mut *tx, &new.key_set);
                for key in &new.signing_keys {
                    insert_signing_key!(&mut *tx, key);
                }
                tx.commit().await?;
                Ok(())
            }

            async fn projects(&self) -> Result<Vec<Project>, StoreError> {
                Ok(sqlx::query_as::<_, Project>(
                    "SELECT id, display_name, settings, settings_version, created_at_millis \
                     FROM projects ORDER BY created_at_millis, id",
                )
                .fetch_all(&self.pool)
                .await?)
            }

            async fn project(&self, id: Uuid) -> Result<Option<Project>, StoreError> {
                Ok(sqlx::query_as::<_, Project>(
                    "SELECT id, display_name, settings, settings_version, created_at_millis \
                     FROM projects WHERE id = $1",
                )
                .bind(id)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn settings_versions(
                &self,
                ids: &[Uuid],
            ) -> Result<Vec<(Uuid, i64)>, StoreError> {
                // A handful of projects at most (those of the requests of one moment), bound
                // one by one as both databases take them.
                let list = (1..=ids.len())
                    .map(|i| format!("${i}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let sql = format!("SELECT id, settings_version FROM projects WHERE id IN ({list})");
                let mut query = sqlx::query_as(&sql);
                for id in ids {
                    query = query.bind(id);
                }
                Ok(query.fetch_all(&self.pool).await?)
            }

            async fn save_settings(
                &self,
                id: Uuid,
                expected_version: i64,
                display_name: &str,
                settings: &str,
            ) -> Result<bool, StoreError> {
                let done = sqlx::query(
                    "UPDATE projects SET display_name = $1, settings = $2, \
                     settings_version = settings_version + 1 \
                     WHERE id = $3 AND settings_version = $4",
                )
                .bind(display_name)
                .bind(settings)
                .bind(id)
                .bind(expected_version)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn key_set_by_hash(
                &self,
                project_id: Uuid,
                kind: KeyKind,
                hash: &str,
            ) -> Result<Option<KeySet>, StoreError> {
                let sql = format!(
                    "SELECT {KEY_SET_COLUMNS} FROM key_sets WHERE project_id = $1 AND {} = $2",
                    kind.hash_column()
                );
                Ok(sqlx::query_as::<_, KeySet>(&sql)
                    .bind(project_id)
                    .bind(hash)
                    .fetch_optional(&self.pool)
                    .await?)
            }

            async fn key_sets(&self, project_id: Uuid) -> Result<Vec<KeySet>, StoreError> {
                let sql = format!(
                    "SELECT {KEY_SET_COLUMNS} FROM key_sets WHERE project_id = $1 \
                     ORDER BY created_at_millis, id"
                );
                Ok(sqlx::query_as::<_, KeySet>(&sql)
                    .bind(project_id)
                    .fetch_all(&self.pool)
                    .await?)
            }

            async fn insert_key_set(&self, key_set: &KeySet) -> Result<(), StoreError> {
                insert_key_set!(&self.pool, key_set);
                Ok(())
            }

            async fn update_key_set(
                &self,
                project_id: Uuid,
                id: Uuid,
                description: Option<&str>,
                revoked_at_millis: Option<i64>,
            ) -> Result<Option<KeySet>, StoreError> {
                // COALESCE keeps what is not being changed; a revoked set stays revoked at its
                // first revocation time.
                sqlx::query(
                    "UPDATE key_sets SET description = COALESCE($1, description), \
                     revoked_at_millis = COALESCE(revoked_at_millis, $2) \
                     WHERE project_id = $3 AND id = $4",
                )
                .bind(description)
                .bind(revoked_at_millis)
                .bind(project_id)
                .bind(id)
                .execute(&self.pool)
                .await?;
                let sql = format!(
                    "SELECT {KEY_SET_COLUMNS} FROM key_sets WHERE project_id = $1 AND id = $2"
                );
                Ok(sqlx::query_as::<_, KeySet>(&sql)
                    .bind(project_id)
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?)
            }

            async fn signing_keys(&self, project_id: Uuid) -> Result<Vec<SigningKey>, StoreError> {
                Ok(sqlx::query_as::<_, SigningKey>(
                    "SELECT project_id, kid, audience, private_key, public_x, public_y, \
                     created_at_millis FROM signing_keys WHERE project_id = $1 \
                     ORDER BY created_at_millis DESC, kid",
                )
                .bind(project_id)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn insert_signing_key(&self, key: &SigningKey) -> Result<(), StoreError> {
                insert_signing_key!(&self.pool, key);
                Ok(())
            }

            async fn replace_signing_key(&self, key: &SigningKey) -> Result<(), StoreError> {
                let done = sqlx::query(
                    "UPDATE signing_keys SET private_key = $1 WHERE project_id = $2 AND kid = $3",
                )
                .bind(&key.private_key)
                .bind(key.project_id)
                .bind(&key.kid)
                .execute(&self.pool)
                .await?
                .rows_affected();
                if done == 0 {
                    return Err(StoreError::NotFound);
                }
                Ok(())
            }
        }
    };
}

macro_rules! insert_signing_key {
    ($executor:expr, $key:expr) => {{
        let key: &SigningKey = $key;
        sqlx::query(
            "INSERT INTO signing_keys (project_id, kid, audience, private_key, public_x, \
             public_y, created_at_millis) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(key.project_id)
        .bind(&key.kid)
        .bind(&key.audience)
        .bind(&key.private_key)
        .bind(&key.public_x)
        .bind(&key.public_y)
        .bind(key.created_at_millis)
        .execute($executor)
        .await
        .map_err(conflict_or_db)?;
    }};
}

macro_rules! insert_key_set {
    ($executor:expr, $ks:expr) => {{
        let ks: &KeySet = $ks;
        let sql = format!(
            "INSERT INTO key_sets ({KEY_SET_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        );
        sqlx::query(&sql)
            .bind(ks.project_id)
            .bind(ks.id)
            .bind(&ks.description)
            .bind(ks.created_at_millis)
            .bind(ks.expires_at_millis)
            .bind(ks.revoked_at_millis)
            .bind(&ks.client_key_hash)
            .bind(&ks.client_key_last_four)
            .bind(&ks.server_key_hash)
            .bind(&ks.server_key_last_four)
            .bind(&ks.admin_key_hash)
            .bind(&ks.admin_key_last_four)
            .execute($executor)
            .await
            .map_err(conflict_or_db)?;
    }};
}

sql_store!(
    /// Production backend.
    PostgresStore,
    PgPool
);
sql_store!(
    /// Embedded backend.
    SqliteStore,
    SqlitePool
);
