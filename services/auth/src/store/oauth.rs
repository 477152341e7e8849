//! Provider accounts linked to users (10 §5) and the provider tokens kept for connected
//! accounts (10 §6). Same statements on both backends, through `with_pool!`. The provider's
//! access and refresh tokens are stored sealed (they must be read back to call the provider)
//! and opened on every read.

use latchkey_shared::db::coalesce::RowsBy;
use latchkey_shared::db::Database;
use latchkey_shared::remembered::Remembered;
use latchkey_shared::sealed::SecretsKey;
use latchkey_shared::with_pool;
use uuid::Uuid;

use super::StoreError;

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct OAuthAccount {
    pub project_id: Uuid,
    pub id: Uuid,
    pub user_id: Uuid,
    pub provider_id: String,
    pub provider_type: String,
    pub account_id: String,
    pub email: Option<String>,
    pub allow_sign_in: bool,
    pub allow_connected_accounts: bool,
    pub access_token: Option<String>,
    pub refresh_token: Option<String>,
    pub access_token_expires_at_millis: Option<i64>,
    /// Space-separated scopes the provider granted with `access_token`.
    pub scopes: String,
    pub created_at_millis: i64,
}

const COLUMNS: &str = "project_id, id, user_id, provider_id, provider_type, account_id, email, \
    allow_sign_in, allow_connected_accounts, access_token, refresh_token, \
    access_token_expires_at_millis, scopes, created_at_millis";

pub const ACCESS_TOKEN: &str = "oauth-access-token";
pub const REFRESH_TOKEN: &str = "oauth-refresh-token";

#[derive(Debug, Clone)]
pub struct OAuthAccounts {
    db: Database,
    secrets: SecretsKey,
    /// A user's records as stored (tokens sealed; opened on each read) by (project, user),
    /// while this process is the database's only writer (SQLite); writes forget them.
    remembered: std::sync::Arc<Remembered<(Uuid, Uuid), Vec<OAuthAccount>>>,
    /// Records by (project, user), read together with the other requests'.
    by_user: RowsBy<OAuthAccount>,
}

impl OAuthAccounts {
    pub fn new(db: Database, secrets: SecretsKey) -> Self {
        Self {
            remembered: std::sync::Arc::new(Remembered::over(&db)),
            by_user: RowsBy::new(
                &db,
                format!("SELECT {COLUMNS} FROM oauth_accounts"),
                "user_id",
                |a: &OAuthAccount| (a.project_id, a.user_id),
            ),
            db,
            secrets,
        }
    }

    fn sealed(&self, a: &OAuthAccount) -> OAuthAccount {
        let seal = |purpose, t: &Option<String>| t.as_ref().map(|t| self.secrets.seal(purpose, t));
        OAuthAccount {
            access_token: seal(ACCESS_TOKEN, &a.access_token),
            refresh_token: seal(REFRESH_TOKEN, &a.refresh_token),
            ..a.clone()
        }
    }

    fn opened(&self, mut a: OAuthAccount) -> Result<OAuthAccount, StoreError> {
        let open = |purpose, t: Option<String>| {
            t.map(|t| self.secrets.open(purpose, &t))
                .transpose()
                .map_err(|_| StoreError::Unopenable)
        };
        a.access_token = open(ACCESS_TOKEN, a.access_token)?;
        a.refresh_token = open(REFRESH_TOKEN, a.refresh_token)?;
        Ok(a)
    }

    fn all_opened(&self, rows: Vec<OAuthAccount>) -> Result<Vec<OAuthAccount>, StoreError> {
        rows.into_iter().map(|a| self.opened(a)).collect()
    }

    pub async fn insert(&self, a: &OAuthAccount) -> Result<(), StoreError> {
        let a = &self.sealed(a);
        let sql = format!(
            "INSERT INTO oauth_accounts ({COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        );
        self.remembered
            .writing(&(a.project_id, a.user_id), async {
                with_pool!(&self.db, pool => sqlx::query(&sql)
                    .bind(a.project_id).bind(a.id).bind(a.user_id).bind(&a.provider_id)
                    .bind(&a.provider_type).bind(&a.account_id).bind(&a.email).bind(a.allow_sign_in)
                    .bind(a.allow_connected_accounts).bind(&a.access_token).bind(&a.refresh_token)
                    .bind(a.access_token_expires_at_millis).bind(&a.scopes).bind(a.created_at_millis)
                    .execute(pool).await.map(drop).map_err(super::sql::conflict_or_db))
            })
            .await
    }

    /// Rewrites a record's mutable fields and tokens.
    pub async fn update(&self, a: &OAuthAccount) -> Result<(), StoreError> {
        let a = &self.sealed(a);
        let sql = "UPDATE oauth_accounts SET account_id = $1, email = $2, allow_sign_in = $3, \
                   allow_connected_accounts = $4, access_token = $5, refresh_token = $6, \
                   access_token_expires_at_millis = $7, scopes = $8 \
                   WHERE project_id = $9 AND id = $10";
        let done = self
            .remembered
            .writing(&(a.project_id, a.user_id), async {
                with_pool!(&self.db, pool => sqlx::query(sql)
                    .bind(&a.account_id).bind(&a.email).bind(a.allow_sign_in)
                    .bind(a.allow_connected_accounts).bind(&a.access_token).bind(&a.refresh_token)
                    .bind(a.access_token_expires_at_millis).bind(&a.scopes)
                    .bind(a.project_id).bind(a.id)
                    .execute(pool).await.map(|r| r.rows_affected()))
            })
            .await;
        if done? == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    pub async fn get(&self, project: Uuid, id: Uuid) -> Result<Option<OAuthAccount>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM oauth_accounts WHERE project_id = $1 AND id = $2");
        let row: Option<OAuthAccount> = with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).bind(id).fetch_optional(pool).await?);
        row.map(|a| self.opened(a)).transpose()
    }

    pub async fn of_user(
        &self,
        project: Uuid,
        user: Uuid,
    ) -> Result<Vec<OAuthAccount>, StoreError> {
        let read = async {
            let mut rows = self.by_user.all(project, user).await?;
            rows.sort_by_key(|a| (a.created_at_millis, a.id));
            Ok::<_, StoreError>(Some(rows))
        };
        let rows = self.remembered.or_read((project, user), read).await?;
        self.all_opened(rows.unwrap_or_default())
    }

    /// Records of `users`, for composing a page of users at once.
    pub async fn of_users(
        &self,
        project: Uuid,
        users: &[Uuid],
    ) -> Result<Vec<OAuthAccount>, StoreError> {
        let select = format!("SELECT {COLUMNS} FROM oauth_accounts");
        let rows =
            latchkey_shared::db::select_in(&self.db, &select, project, "user_id", users).await?;
        self.all_opened(rows)
    }

    /// Every record of a project, for composing many users at once.
    pub async fn of_project(&self, project: Uuid) -> Result<Vec<OAuthAccount>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM oauth_accounts WHERE project_id = $1 ORDER BY created_at_millis, id"
        );
        let rows =
            with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).fetch_all(pool).await?);
        self.all_opened(rows)
    }

    /// Records of one provider account, on whichever users hold it.
    pub async fn of_account(
        &self,
        project: Uuid,
        provider_id: &str,
        account_id: &str,
    ) -> Result<Vec<OAuthAccount>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM oauth_accounts WHERE project_id = $1 AND provider_id = $2 \
             AND account_id = $3 ORDER BY created_at_millis, id"
        );
        let rows = with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).bind(provider_id).bind(account_id).fetch_all(pool).await?);
        self.all_opened(rows)
    }

    pub async fn delete(&self, project: Uuid, id: Uuid) -> Result<bool, StoreError> {
        let done = with_pool!(&self.db, pool => sqlx::query("DELETE FROM oauth_accounts WHERE project_id = $1 AND id = $2")
            .bind(project).bind(id).execute(pool).await.map(|r| r.rows_affected()));
        // Deletions are rare and name no user: forget every user's records.
        self.remembered.forget_all();
        Ok(done? > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn provider_tokens_are_stored_sealed_and_read_plain() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let url = format!("sqlite://{}/auth.db", dir.path().display());
        Database::connect_and_migrate(&url, crate::MIGRATIONS)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .close()
            .await;
        // Records without their user and project: only the columns are under test.
        let options = <sqlx::sqlite::SqliteConnectOptions as std::str::FromStr>::from_str(&url)
            .unwrap_or_else(|e| panic!("{e}"))
            .foreign_keys(false);
        let pool = latchkey_shared::db::Pool::connect(
            options,
            1,
            std::time::Duration::from_secs(3),
            latchkey_shared::db::Writers::Concurrent,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let db = Database::Sqlite(pool);
        let store = OAuthAccounts::new(db.clone(), SecretsKey::generate());
        let account = OAuthAccount {
            project_id: Uuid::new_v4(),
            id: Uuid::new_v4(),
            user_id: Uuid::new_v4(),
            provider_id: "github".into(),
            provider_type: "github".into(),
            account_id: "42".into(),
            email: None,
            allow_sign_in: true,
            allow_connected_accounts: true,
            access_token: Some("gho_access_only_this_test_knows".into()),
            refresh_token: Some("ghr_refresh_only_this_test_knows".into()),
            access_token_expires_at_millis: None,
            scopes: "repo".into(),
            created_at_millis: 1,
        };
        store
            .insert(&account)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let raw: (String, String) = with_pool!(&db, pool => sqlx::query_as(
            "SELECT access_token, refresh_token FROM oauth_accounts"
        )
        .fetch_one(pool)
        .await
        .unwrap_or_else(|e| panic!("{e}")));
        assert!(
            latchkey_shared::sealed::is_sealed(&raw.0)
                && latchkey_shared::sealed::is_sealed(&raw.1)
        );
        assert!(!raw.0.contains("gho_") && !raw.1.contains("ghr_"));
        let read = store
            .get(account.project_id, account.id)
            .await
            .ok()
            .flatten();
        assert_eq!(read, Some(account.clone()));
        let mut updated = account.clone();
        updated.access_token = Some("gho_second".into());
        store
            .update(&updated)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let listed = store
            .of_user(account.project_id, account.user_id)
            .await
            .unwrap_or_default();
        assert_eq!(listed, vec![updated]);
    }
}
