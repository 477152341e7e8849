//! Provider accounts linked to users (10 §5) and the provider tokens kept for connected
//! accounts (10 §6). Same statements on both backends, through `with_pool!`.

use latchkey_shared::db::Database;
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

#[derive(Debug, Clone)]
pub struct OAuthAccounts {
    db: Database,
}

impl OAuthAccounts {
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    pub async fn insert(&self, a: &OAuthAccount) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO oauth_accounts ({COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        );
        with_pool!(&self.db, pool => sqlx::query(&sql)
            .bind(a.project_id).bind(a.id).bind(a.user_id).bind(&a.provider_id)
            .bind(&a.provider_type).bind(&a.account_id).bind(&a.email).bind(a.allow_sign_in)
            .bind(a.allow_connected_accounts).bind(&a.access_token).bind(&a.refresh_token)
            .bind(a.access_token_expires_at_millis).bind(&a.scopes).bind(a.created_at_millis)
            .execute(pool).await.map(drop).map_err(super::sql::conflict_or_db))?;
        Ok(())
    }

    /// Rewrites a record's mutable fields and tokens.
    pub async fn update(&self, a: &OAuthAccount) -> Result<(), StoreError> {
        let sql = "UPDATE oauth_accounts SET account_id = $1, email = $2, allow_sign_in = $3, \
                   allow_connected_accounts = $4, access_token = $5, refresh_token = $6, \
                   access_token_expires_at_millis = $7, scopes = $8 \
                   WHERE project_id = $9 AND id = $10";
        let done = with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(&a.account_id).bind(&a.email).bind(a.allow_sign_in)
            .bind(a.allow_connected_accounts).bind(&a.access_token).bind(&a.refresh_token)
            .bind(a.access_token_expires_at_millis).bind(&a.scopes)
            .bind(a.project_id).bind(a.id)
            .execute(pool).await?.rows_affected());
        if done == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    pub async fn get(&self, project: Uuid, id: Uuid) -> Result<Option<OAuthAccount>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM oauth_accounts WHERE project_id = $1 AND id = $2");
        Ok(
            with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).bind(id).fetch_optional(pool).await?),
        )
    }

    pub async fn of_user(
        &self,
        project: Uuid,
        user: Uuid,
    ) -> Result<Vec<OAuthAccount>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM oauth_accounts WHERE project_id = $1 AND user_id = $2 \
             ORDER BY created_at_millis, id"
        );
        Ok(
            with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).bind(user).fetch_all(pool).await?),
        )
    }

    /// Records of `users`, for composing a page of users at once.
    pub async fn of_users(
        &self,
        project: Uuid,
        users: &[Uuid],
    ) -> Result<Vec<OAuthAccount>, StoreError> {
        let select = format!("SELECT {COLUMNS} FROM oauth_accounts");
        Ok(latchkey_shared::db::select_in(&self.db, &select, project, "user_id", users).await?)
    }

    /// Every record of a project, for composing many users at once.
    pub async fn of_project(&self, project: Uuid) -> Result<Vec<OAuthAccount>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM oauth_accounts WHERE project_id = $1 ORDER BY created_at_millis, id"
        );
        Ok(with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).fetch_all(pool).await?))
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
        Ok(
            with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).bind(provider_id).bind(account_id).fetch_all(pool).await?),
        )
    }

    pub async fn delete(&self, project: Uuid, id: Uuid) -> Result<bool, StoreError> {
        let done = with_pool!(&self.db, pool => sqlx::query("DELETE FROM oauth_accounts WHERE project_id = $1 AND id = $2")
            .bind(project).bind(id).execute(pool).await?.rows_affected());
        Ok(done > 0)
    }
}
