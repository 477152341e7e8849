//! API key sets (80 §3): generation, the access check behind 00 §3.1 step 7, admin changes.

use latchkey_shared::crypto::{constant_time_eq, hash_secret, new_key};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::store::{KeyKind, KeySet, ProjectStore};

/// A generated key set and its plaintext keys, shown to the caller once.
#[derive(Debug, Clone)]
pub struct NewKeys {
    pub key_set: KeySet,
    pub publishable_client_key: Option<String>,
    pub secret_server_key: Option<String>,
    pub super_secret_admin_key: Option<String>,
}

fn last_four(key: &str) -> String {
    key.chars()
        .skip(key.chars().count().saturating_sub(4))
        .collect()
}

/// Makes a key set with the kinds asked for ([client, server, admin]); stores nothing.
pub fn generate(
    project_id: Uuid,
    description: &str,
    expires_at_millis: Option<i64>,
    kinds: [bool; 3],
    now: i64,
) -> NewKeys {
    let make = |wanted: bool, prefix: &str| wanted.then(|| new_key(prefix));
    let client = make(kinds[0], "pck_");
    let server = make(kinds[1], "ssk_");
    let admin = make(kinds[2], "sak_");
    let key_set = KeySet {
        project_id,
        id: Uuid::new_v4(),
        description: description.to_owned(),
        created_at_millis: now,
        expires_at_millis,
        revoked_at_millis: None,
        client_key_hash: client.as_deref().map(hash_secret),
        client_key_last_four: client.as_deref().map(last_four),
        server_key_hash: server.as_deref().map(hash_secret),
        server_key_last_four: server.as_deref().map(last_four),
        admin_key_hash: admin.as_deref().map(hash_secret),
        admin_key_last_four: admin.as_deref().map(last_four),
    };
    NewKeys {
        key_set,
        publishable_client_key: client,
        secret_server_key: server,
        super_secret_admin_key: admin,
    }
}

/// Outcome of checking a presented key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Granted,
    ProjectNotFound,
    KeyInvalid,
}

/// Checks that `project_id` exists and `key` is a live key of `kind` for it.
pub async fn check(
    store: &dyn ProjectStore,
    project_id: Uuid,
    kind: KeyKind,
    key: &str,
    now: i64,
) -> Result<Access> {
    check_hash(store, project_id, kind, &hash_secret(key), now).await
}

/// `check` for a key known only by its hash (an OAuth flow re-checks the key it started with).
pub async fn check_hash(
    store: &dyn ProjectStore,
    project_id: Uuid,
    kind: KeyKind,
    hash: &str,
    now: i64,
) -> Result<Access> {
    if store.project(project_id).await?.is_none() {
        return Ok(Access::ProjectNotFound);
    }
    let Some(set) = store.key_set_by_hash(project_id, kind, hash).await? else {
        return Ok(Access::KeyInvalid);
    };
    // The look-up already matched on the hash; comparing again in constant time keeps the
    // decision itself free of data-dependent branches on secret material.
    let matches = set.hash_of(kind).is_some_and(|h| constant_time_eq(h, hash));
    let live = set.revoked_at_millis.is_none() && set.expires_at_millis.is_none_or(|e| e > now);
    Ok(if matches && live {
        Access::Granted
    } else {
        Access::KeyInvalid
    })
}

pub async fn create(
    store: &dyn ProjectStore,
    project_id: Uuid,
    description: &str,
    expires_at_millis: Option<i64>,
    kinds: [bool; 3],
    now: i64,
) -> Result<NewKeys> {
    if description.chars().count() > 1024 {
        return Err(Error::Invalid("description is too long".into()));
    }
    if !kinds.iter().any(|k| *k) {
        return Err(Error::Invalid("a key set needs at least one key".into()));
    }
    if expires_at_millis.is_some_and(|e| e <= now) {
        return Err(Error::Invalid(
            "expires_at_millis must be in the future".into(),
        ));
    }
    let keys = generate(project_id, description, expires_at_millis, kinds, now);
    store.insert_key_set(&keys.key_set).await?;
    Ok(keys)
}

pub async fn update(
    store: &dyn ProjectStore,
    project_id: Uuid,
    id: Uuid,
    description: Option<&str>,
    revoke: bool,
    now: i64,
) -> Result<KeySet> {
    if description.is_some_and(|d| d.chars().count() > 1024) {
        return Err(Error::Invalid("description is too long".into()));
    }
    store
        .update_key_set(project_id, id, description, revoke.then_some(now))
        .await?
        .ok_or(Error::KeySetNotFound(id))
}

/// Server-key admission for direct gRPC callers of auth, answered from the store.
pub struct LocalServerKeys {
    store: std::sync::Arc<dyn ProjectStore>,
    clock: latchkey_shared::clock::SharedClock,
}

impl LocalServerKeys {
    pub fn new(
        store: std::sync::Arc<dyn ProjectStore>,
        clock: latchkey_shared::clock::SharedClock,
    ) -> Self {
        Self { store, clock }
    }
}

#[async_trait::async_trait]
impl latchkey_shared::grpc::ServerKeys for LocalServerKeys {
    async fn is_server_key(&self, project: Uuid, key: &str) -> Result<bool, tonic::Status> {
        let now = self.clock.now_millis();
        let access = check(&*self.store, project, KeyKind::Server, key, now).await?;
        Ok(access == Access::Granted)
    }
}
