//! Storage for the projects part of auth, behind one narrow trait. The SQL is the same on both
//! backends, so one macro body is instantiated for each pool type (`sql.rs`); what differs
//! between the backends lives in the migrations.

pub mod accounts;
/// Project rows remembered for a moment.
pub mod cached;
pub mod cli_logins;
#[cfg(test)]
mod contract;
pub mod oauth;
pub mod owned_keys;
pub mod passkeys;
pub mod sealed;
mod sql;

use latchkey_shared::db::coalesce::SharedError;
use uuid::Uuid;

pub use sql::{PostgresStore, SqliteStore};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("already exists")]
    Conflict,
    #[error("not found")]
    NotFound,
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    /// A sealed value that the configured secrets keys cannot open.
    #[error("a stored secret could not be opened (wrong LATCHKEY_SECRETS_KEY, or damaged)")]
    Unopenable,
}

impl SharedError for StoreError {
    fn copy(&self) -> Self {
        match self {
            Self::Conflict => Self::Conflict,
            Self::NotFound => Self::NotFound,
            Self::Db(e) => Self::Db(e.copy()),
            Self::Unopenable => Self::Unopenable,
        }
    }

    fn lost() -> Self {
        Self::Db(sqlx::Error::lost())
    }
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Project {
    pub id: Uuid,
    pub display_name: String,
    pub settings: String,
    pub settings_version: i64,
    pub created_at_millis: i64,
}

/// The three kinds of API key (80 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Client,
    Server,
    Admin,
}

impl KeyKind {
    /// Column holding this kind's hash; a fixed string, never user input.
    fn hash_column(self) -> &'static str {
        match self {
            Self::Client => "client_key_hash",
            Self::Server => "server_key_hash",
            Self::Admin => "admin_key_hash",
        }
    }
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct KeySet {
    pub project_id: Uuid,
    pub id: Uuid,
    pub description: String,
    pub created_at_millis: i64,
    pub expires_at_millis: Option<i64>,
    pub revoked_at_millis: Option<i64>,
    pub client_key_hash: Option<String>,
    pub client_key_last_four: Option<String>,
    pub server_key_hash: Option<String>,
    pub server_key_last_four: Option<String>,
    pub admin_key_hash: Option<String>,
    pub admin_key_last_four: Option<String>,
}

impl KeySet {
    pub fn hash_of(&self, kind: KeyKind) -> Option<&str> {
        match kind {
            KeyKind::Client => self.client_key_hash.as_deref(),
            KeyKind::Server => self.server_key_hash.as_deref(),
            KeyKind::Admin => self.admin_key_hash.as_deref(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct SigningKey {
    pub project_id: Uuid,
    pub kid: String,
    pub audience: String,
    pub private_key: Vec<u8>,
    pub public_x: String,
    pub public_y: String,
    pub created_at_millis: i64,
}

/// Everything a new project starts with, written in one transaction.
#[derive(Debug, Clone)]
pub struct NewProject {
    pub project: Project,
    pub key_set: KeySet,
    pub signing_keys: Vec<SigningKey>,
}

#[async_trait::async_trait]
pub trait ProjectStore: Send + Sync {
    async fn insert_project(&self, new: &NewProject) -> Result<(), StoreError>;
    async fn projects(&self) -> Result<Vec<Project>, StoreError>;
    async fn project(&self, id: Uuid) -> Result<Option<Project>, StoreError>;
    /// The `settings_version` alone of each project of `ids` that exists: a cheap check that
    /// remembered rows are current.
    async fn settings_versions(&self, ids: &[Uuid]) -> Result<Vec<(Uuid, i64)>, StoreError>;
    /// Writes settings if the stored version is still `expected_version`; false if it moved.
    async fn save_settings(
        &self,
        id: Uuid,
        expected_version: i64,
        display_name: &str,
        settings: &str,
    ) -> Result<bool, StoreError>;
    async fn key_set_by_hash(
        &self,
        project_id: Uuid,
        kind: KeyKind,
        hash: &str,
    ) -> Result<Option<KeySet>, StoreError>;
    async fn key_sets(&self, project_id: Uuid) -> Result<Vec<KeySet>, StoreError>;
    async fn insert_key_set(&self, key_set: &KeySet) -> Result<(), StoreError>;
    /// Applies the given changes; `None` when the key set does not exist.
    async fn update_key_set(
        &self,
        project_id: Uuid,
        id: Uuid,
        description: Option<&str>,
        revoked_at_millis: Option<i64>,
    ) -> Result<Option<KeySet>, StoreError>;
    /// Newest first.
    async fn signing_keys(&self, project_id: Uuid) -> Result<Vec<SigningKey>, StoreError>;
    async fn insert_signing_key(&self, key: &SigningKey) -> Result<(), StoreError>;
    /// Rewrites a stored key's private half (re-sealing); `NotFound` when there is no such key.
    async fn replace_signing_key(&self, key: &SigningKey) -> Result<(), StoreError>;
}
