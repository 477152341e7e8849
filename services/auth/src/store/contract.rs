//! One behaviour suite for `ProjectStore`, run against SQLite and a fresh Postgres database.

use latchkey_shared::clock::{Clock, ManualClock};
use latchkey_shared::db::Database;

use super::*;
use crate::domain::{keys, projects};

async fn behaves(store: &dyn ProjectStore) {
    let clock = ManualClock::new(1_000);
    let created = projects::create(store, &clock, "Acme")
        .await
        .map_err(|e| e.to_string());
    let created = created.unwrap_or_else(|e| panic!("{e}"));
    let id = created.project.id;

    // Read back, listed, signing keys for both audiences.
    assert_eq!(
        store.project(id).await.ok().flatten(),
        Some(created.project.clone())
    );
    assert!(store
        .projects()
        .await
        .unwrap_or_default()
        .iter()
        .any(|p| p.id == id));
    let signing = store.signing_keys(id).await.unwrap_or_default();
    let mut audiences: Vec<_> = signing.iter().map(|k| k.audience.as_str()).collect();
    audiences.sort_unstable();
    assert_eq!(audiences, ["normal", "restricted"]);

    // Keys: stored hashed, found by hash, the wrong kind does not match.
    let server = created.keys.secret_server_key.clone().unwrap_or_default();
    let set = &created.keys.key_set;
    assert_ne!(set.server_key_hash.as_deref(), Some(server.as_str()));
    let now = clock.now_millis();
    let check =
        |kind, key: String| async move { keys::check(store, id, kind, &key, now).await.ok() };
    assert_eq!(
        check(KeyKind::Server, server.clone()).await,
        Some(keys::Access::Granted)
    );
    assert_eq!(
        check(KeyKind::Admin, server.clone()).await,
        Some(keys::Access::KeyInvalid)
    );

    // Duplicate project id is a conflict, not a crash.
    let again = NewProject {
        project: created.project.clone(),
        key_set: created.keys.key_set.clone(),
        signing_keys: vec![],
    };
    assert!(matches!(
        store.insert_project(&again).await,
        Err(StoreError::Conflict)
    ));

    // Settings compare-and-set.
    assert_eq!(
        store.save_settings(id, 1, "Acme 2", "{}").await.ok(),
        Some(true)
    );
    assert_eq!(
        store.save_settings(id, 1, "Lost", "{}").await.ok(),
        Some(false)
    );
    assert_eq!(
        store
            .project(id)
            .await
            .ok()
            .flatten()
            .map(|p| p.display_name),
        Some("Acme 2".into())
    );

    // Revocation is sticky and makes the key invalid.
    let revoked = store
        .update_key_set(id, set.id, Some("old"), Some(2_000))
        .await;
    let revoked = revoked
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("key set missing"));
    assert_eq!(
        (revoked.description.as_str(), revoked.revoked_at_millis),
        ("old", Some(2_000))
    );
    let again = store
        .update_key_set(id, set.id, None, Some(3_000))
        .await
        .ok()
        .flatten();
    assert_eq!(again.and_then(|s| s.revoked_at_millis), Some(2_000));
    assert_eq!(
        check(KeyKind::Server, server).await,
        Some(keys::Access::KeyInvalid)
    );
    assert!(store
        .update_key_set(id, uuid::Uuid::new_v4(), None, None)
        .await
        .ok()
        .flatten()
        .is_none());
    assert_eq!(store.key_sets(id).await.map(|s| s.len()).ok(), Some(1));
}

#[tokio::test]
async fn sqlite_store_behaves() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("sqlite://{}/auth.db", dir.path().display());
    let db = Database::connect_and_migrate(&url, crate::MIGRATIONS).await;
    let Ok(Database::Sqlite(pool)) = db else {
        panic!("sqlite did not open")
    };
    behaves(&SqliteStore::new(pool)).await;
}

#[tokio::test]
async fn postgres_store_behaves() {
    let infra = latchkey_shared::testing::Infra::new();
    let url = infra
        .postgres_database("auth")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let db = Database::connect_and_migrate(&url, crate::MIGRATIONS).await;
    let Ok(Database::Postgres(pool)) = db else {
        panic!("postgres did not open")
    };
    behaves(&PostgresStore::new(pool.clone())).await;
    pool.close().await;
    infra.cleanup().await;
}
