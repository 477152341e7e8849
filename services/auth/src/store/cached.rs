//! A project store that remembers project rows (with their settings): nearly every request reads
//! its project's settings, and they change rarely. Writes through this store forget the entry at
//! once. When other replicas may write the same database (`Freshness::CheckVersion`), a
//! remembered row is used only after a one-column read confirms its `settings_version`, so a
//! settings change is in force on every replica for every request that starts after the write
//! answered (80 §11.14). A single replica (the embedded system) skips the check: its own writes
//! are the only ones.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use latchkey_shared::db::coalesce::Coalesced;
use uuid::Uuid;

use super::{KeyKind, KeySet, NewProject, Project, ProjectStore, SigningKey, StoreError};

/// Rows unused for this long are dropped, so the map holds only active projects.
const IDLE: Duration = Duration::from_secs(60);

/// How long signing keys are used without asking the database again when other replicas may
/// rotate them. A replaced key stays published until the token lifetime plus a minute after its
/// replacement was made (`signing::RETIRED_AFTER_MILLIS`), so a token signed with the old key
/// up to this long after a rotation elsewhere still verifies until it expires. This process's
/// own rotations are in force at once.
const KEYS_UNCHECKED: Duration = Duration::from_secs(30);

/// Whether a remembered row must be confirmed against the database before use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Other replicas may change settings: confirm the version on every read.
    CheckVersion,
    /// This process is the only writer: forgetting on write is enough.
    OnlyWriter,
}

pub struct CachedProjects {
    inner: Arc<dyn ProjectStore>,
    freshness: Freshness,
    projects: Mutex<HashMap<Uuid, (Instant, Project)>>,
    /// Signing keys (opened) by project, with when they were read.
    keys: Mutex<HashMap<Uuid, (Instant, Vec<SigningKey>)>>,
    /// The version checks of concurrent requests, one statement for all of a moment's.
    versions: Coalesced<Uuid, i64, StoreError>,
}

impl CachedProjects {
    pub fn new(inner: Arc<dyn ProjectStore>, freshness: Freshness) -> Self {
        let store = inner.clone();
        let versions = Coalesced::new(move |ids: Vec<Uuid>| {
            let store = store.clone();
            async move { store.settings_versions(&ids).await }
        });
        Self {
            inner,
            versions,
            freshness,
            projects: Mutex::new(HashMap::new()),
            keys: Mutex::new(HashMap::new()),
        }
    }

    fn remembered(&self, id: Uuid) -> Option<Project> {
        let cache = self.projects.lock().ok()?;
        cache.get(&id).map(|(_, p)| p.clone())
    }

    fn forget_keys(&self, id: Uuid) {
        if let Ok(mut keys) = self.keys.lock() {
            keys.remove(&id);
        }
    }

    fn forget(&self, id: Uuid) {
        if let Ok(mut cache) = self.projects.lock() {
            cache.remove(&id);
        }
    }
}

#[async_trait::async_trait]
impl ProjectStore for CachedProjects {
    async fn insert_project(&self, new: &NewProject) -> Result<(), StoreError> {
        self.inner.insert_project(new).await
    }

    async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        self.inner.projects().await
    }

    async fn project(&self, id: Uuid) -> Result<Option<Project>, StoreError> {
        if let Some(project) = self.remembered(id) {
            let current = match self.freshness {
                Freshness::OnlyWriter => true,
                Freshness::CheckVersion => {
                    self.versions.get(id).await? == Some(project.settings_version)
                }
            };
            if current {
                if let Ok(mut cache) = self.projects.lock() {
                    cache.insert(id, (Instant::now(), project.clone()));
                }
                return Ok(Some(project));
            }
        }
        let project = self.inner.project(id).await?;
        if let Ok(mut cache) = self.projects.lock() {
            cache.retain(|_, (used, _)| used.elapsed() < IDLE);
            match &project {
                Some(p) => cache.insert(id, (Instant::now(), p.clone())),
                None => cache.remove(&id),
            };
        }
        Ok(project)
    }

    async fn settings_versions(&self, ids: &[Uuid]) -> Result<Vec<(Uuid, i64)>, StoreError> {
        self.inner.settings_versions(ids).await
    }

    async fn save_settings(
        &self,
        id: Uuid,
        expected_version: i64,
        display_name: &str,
        settings: &str,
    ) -> Result<bool, StoreError> {
        // Forgotten whatever the outcome: a lost race means the cached version is stale too.
        let saved = self
            .inner
            .save_settings(id, expected_version, display_name, settings)
            .await;
        self.forget(id);
        saved
    }

    async fn key_set_by_hash(
        &self,
        project_id: Uuid,
        kind: KeyKind,
        hash: &str,
    ) -> Result<Option<KeySet>, StoreError> {
        self.inner.key_set_by_hash(project_id, kind, hash).await
    }

    async fn key_sets(&self, project_id: Uuid) -> Result<Vec<KeySet>, StoreError> {
        self.inner.key_sets(project_id).await
    }

    async fn insert_key_set(&self, key_set: &KeySet) -> Result<(), StoreError> {
        self.inner.insert_key_set(key_set).await
    }

    async fn update_key_set(
        &self,
        project_id: Uuid,
        id: Uuid,
        description: Option<&str>,
        revoked_at_millis: Option<i64>,
    ) -> Result<Option<KeySet>, StoreError> {
        self.inner
            .update_key_set(project_id, id, description, revoked_at_millis)
            .await
    }

    async fn signing_keys(&self, project_id: Uuid) -> Result<Vec<SigningKey>, StoreError> {
        let fresh_enough = |read: &Instant| {
            self.freshness == Freshness::OnlyWriter || read.elapsed() < KEYS_UNCHECKED
        };
        if let Ok(keys) = self.keys.lock() {
            if let Some((_, keys)) = keys.get(&project_id).filter(|(read, _)| fresh_enough(read)) {
                return Ok(keys.clone());
            }
        }
        let keys = self.inner.signing_keys(project_id).await?;
        if let Ok(mut cache) = self.keys.lock() {
            cache.retain(|_, (read, _)| read.elapsed() < IDLE);
            cache.insert(project_id, (Instant::now(), keys.clone()));
        }
        Ok(keys)
    }

    async fn insert_signing_key(&self, key: &SigningKey) -> Result<(), StoreError> {
        let inserted = self.inner.insert_signing_key(key).await;
        self.forget_keys(key.project_id);
        inserted
    }

    async fn replace_signing_key(&self, key: &SigningKey) -> Result<(), StoreError> {
        let replaced = self.inner.replace_signing_key(key).await;
        self.forget_keys(key.project_id);
        replaced
    }
}
