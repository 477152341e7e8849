//! Creating, listing and configuring projects.

use latchkey_shared::clock::Clock;
use serde_json::Value;
use uuid::Uuid;

use super::keys::{self, NewKeys};
use super::settings::Settings;
use super::signing;
use crate::error::{Error, Result};
use crate::store::{NewProject, Project, ProjectStore};

/// A new project with its plaintext keys, which exist only in this value.
#[derive(Debug)]
pub struct Created {
    pub project: Project,
    pub keys: NewKeys,
}

/// Creates a project with default settings, one key set holding all three keys, and a signing
/// key per audience (so restricted keys are in the JWKS from the start, 80 §11.17).
pub async fn create(
    store: &dyn ProjectStore,
    clock: &dyn Clock,
    display_name: &str,
) -> Result<Created> {
    let display_name = display_name.trim();
    if display_name.is_empty() || display_name.chars().count() > 256 {
        return Err(Error::Invalid(
            "display_name must be a non-empty string of at most 256 characters".into(),
        ));
    }
    let now = clock.now_millis();
    let id = Uuid::new_v4();
    let project = Project {
        id,
        display_name: display_name.to_owned(),
        settings: Settings::default().to_json(),
        settings_version: 1,
        created_at_millis: now,
    };
    let keys = keys::generate(id, "Default keys", None, [true, true, true], now);
    let signing_keys = signing::AUDIENCES
        .iter()
        .map(|audience| signing::generate(id, audience, now))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    store
        .insert_project(&NewProject {
            project: project.clone(),
            key_set: keys.key_set.clone(),
            signing_keys,
        })
        .await?;
    Ok(Created { project, keys })
}

/// Adds a new signing key per audience to project `id`; new tokens are signed with them (the
/// newest key signs). Returns the keys published now.
pub async fn rotate_signing_keys(
    store: &dyn ProjectStore,
    clock: &dyn Clock,
    id: Uuid,
) -> Result<Vec<crate::store::SigningKey>> {
    get(store, id).await?;
    let now = clock.now_millis();
    for audience in signing::AUDIENCES {
        store
            .insert_signing_key(&signing::generate(id, audience, now)?)
            .await?;
    }
    published_keys(store, clock, id).await
}

/// The keys a project's JWKS lists now (see `signing::published`).
pub async fn published_keys(
    store: &dyn ProjectStore,
    clock: &dyn Clock,
    id: Uuid,
) -> Result<Vec<crate::store::SigningKey>> {
    Ok(signing::published(
        store.signing_keys(id).await?,
        clock.now_millis(),
    ))
}

pub async fn get(store: &dyn ProjectStore, id: Uuid) -> Result<(Project, Settings)> {
    let project = store.project(id).await?.ok_or(Error::ProjectNotFound(id))?;
    let settings = Settings::from_json(&project.settings)?;
    Ok((project, settings))
}

/// Applies a partial settings document; retries when another writer got in between.
pub async fn update_settings(
    store: &dyn ProjectStore,
    id: Uuid,
    patch: &Value,
) -> Result<(Project, Settings)> {
    for _ in 0..5 {
        let (project, current) = get(store, id).await?;
        let (next, display_name) = current.patch(patch)?;
        let name = display_name.unwrap_or_else(|| project.display_name.clone());
        if store
            .save_settings(id, project.settings_version, &name, &next.to_json())
            .await?
        {
            return get(store, id).await;
        }
    }
    Err(Error::Contended)
}
