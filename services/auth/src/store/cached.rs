//! A project store that remembers project rows (with their settings) for a moment: nearly every
//! request reads its project's settings, and they change rarely. Writes through this store
//! forget the entry at once, so this process reads its own writes; other auth replicas see a
//! settings change within `TTL`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::{KeyKind, KeySet, NewProject, Project, ProjectStore, SigningKey, StoreError};

const TTL: Duration = Duration::from_secs(1);

pub struct CachedProjects {
    inner: Arc<dyn ProjectStore>,
    projects: Mutex<HashMap<Uuid, (Instant, Project)>>,
}

impl CachedProjects {
    pub fn new(inner: Arc<dyn ProjectStore>) -> Self {
        Self {
            inner,
            projects: Mutex::new(HashMap::new()),
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
        if let Ok(cache) = self.projects.lock() {
            if let Some((at, project)) = cache.get(&id) {
                if at.elapsed() < TTL {
                    return Ok(Some(project.clone()));
                }
            }
        }
        let project = self.inner.project(id).await?;
        if let (Some(p), Ok(mut cache)) = (&project, self.projects.lock()) {
            cache.retain(|_, (at, _)| at.elapsed() < TTL);
            cache.insert(id, (Instant::now(), p.clone()));
        }
        Ok(project)
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
        self.inner.signing_keys(project_id).await
    }
}
