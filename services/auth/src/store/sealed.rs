//! A project store that seals the project secrets it must read back before they reach the
//! database, and opens them on the way out (issue 18 §4): each signing key's private half, each
//! OAuth provider's client secret and the SMTP URL (which carries the mail password) inside the
//! settings document. The domain sees plain values; a dump of the database holds none of them.
//! Values written before sealing are read as they are and sealed when next written.

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use latchkey_shared::sealed::SecretsKey;
use serde_json::Value;
use uuid::Uuid;

use super::{KeyKind, KeySet, NewProject, Project, ProjectStore, SigningKey, StoreError};

/// Purposes the values are sealed for: one cannot be opened as another.
const SIGNING_KEY: &str = "signing-key";
const CLIENT_SECRET: &str = "oauth-client-secret";
const SMTP_URL: &str = "smtp-url";

pub struct SealedProjects {
    inner: Arc<dyn ProjectStore>,
    secrets: SecretsKey,
}

/// A settings document with `f` applied to every sealed field; the text as it is when it has
/// none (most projects), so it round-trips byte for byte.
fn each_secret(
    text: &str,
    mut f: impl FnMut(&'static str, &str) -> Result<String, StoreError>,
) -> Result<String, StoreError> {
    if !text.contains("\"client_secret\"") && !text.contains("\"smtp_url\"") {
        return Ok(text.to_owned());
    }
    let mut doc: Value = serde_json::from_str(text).map_err(|_| StoreError::Unopenable)?;
    if let Some(providers) = doc["oauth_providers"].as_array_mut() {
        for p in providers {
            if let Some(secret) = p.get_mut("client_secret") {
                if let Some(s) = secret.as_str() {
                    *secret = Value::String(f(CLIENT_SECRET, s)?);
                }
            }
        }
    }
    if let Some(url) = doc.get_mut("email").and_then(|e| e.get_mut("smtp_url")) {
        if let Some(s) = url.as_str() {
            *url = Value::String(f(SMTP_URL, s)?);
        }
    }
    Ok(doc.to_string())
}

impl SealedProjects {
    pub fn new(inner: Arc<dyn ProjectStore>, secrets: SecretsKey) -> Self {
        Self { inner, secrets }
    }

    fn seal_settings(&self, text: &str) -> Result<String, StoreError> {
        each_secret(text, |purpose, plain| Ok(self.secrets.seal(purpose, plain)))
    }

    fn open_settings(&self, text: &str) -> Result<String, StoreError> {
        each_secret(text, |purpose, stored| {
            self.secrets
                .open(purpose, stored)
                .map_err(|_| StoreError::Unopenable)
        })
    }

    fn open_project(&self, mut p: Project) -> Result<Project, StoreError> {
        p.settings = self.open_settings(&p.settings)?;
        Ok(p)
    }

    fn seal_key(&self, key: &SigningKey) -> SigningKey {
        let mut sealed = key.clone();
        sealed.private_key = self
            .secrets
            .seal(SIGNING_KEY, &STANDARD.encode(&key.private_key))
            .into_bytes();
        sealed
    }

    fn open_key(&self, mut key: SigningKey) -> Result<SigningKey, StoreError> {
        // A key stored before sealing is its DER bytes, which are never valid UTF-8 text that
        // starts with the sealed prefix.
        if let Ok(text) = std::str::from_utf8(&key.private_key) {
            if latchkey_shared::sealed::is_sealed(text) {
                let encoded = self
                    .secrets
                    .open(SIGNING_KEY, text)
                    .map_err(|_| StoreError::Unopenable)?;
                key.private_key = STANDARD
                    .decode(encoded)
                    .map_err(|_| StoreError::Unopenable)?;
            }
        }
        Ok(key)
    }
}

#[async_trait::async_trait]
impl ProjectStore for SealedProjects {
    async fn insert_project(&self, new: &NewProject) -> Result<(), StoreError> {
        let mut sealed = new.clone();
        sealed.project.settings = self.seal_settings(&new.project.settings)?;
        sealed.signing_keys = new.signing_keys.iter().map(|k| self.seal_key(k)).collect();
        self.inner.insert_project(&sealed).await
    }

    async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        self.inner
            .projects()
            .await?
            .into_iter()
            .map(|p| self.open_project(p))
            .collect()
    }

    async fn project(&self, id: Uuid) -> Result<Option<Project>, StoreError> {
        self.inner
            .project(id)
            .await?
            .map(|p| self.open_project(p))
            .transpose()
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
        let sealed = self.seal_settings(settings)?;
        self.inner
            .save_settings(id, expected_version, display_name, &sealed)
            .await
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
        self.inner
            .signing_keys(project_id)
            .await?
            .into_iter()
            .map(|k| self.open_key(k))
            .collect()
    }

    async fn insert_signing_key(&self, key: &SigningKey) -> Result<(), StoreError> {
        self.inner.insert_signing_key(&self.seal_key(key)).await
    }

    async fn replace_signing_key(&self, key: &SigningKey) -> Result<(), StoreError> {
        self.inner.replace_signing_key(&self.seal_key(key)).await
    }
}
