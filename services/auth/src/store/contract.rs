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
    assert_eq!(audiences, ["anonymous", "normal", "restricted"]);

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

    // A further signing key comes first; a key's private half can be rewritten.
    let newer =
        crate::domain::signing::generate(id, "normal", 5_000).unwrap_or_else(|e| panic!("{e}"));
    assert!(store.insert_signing_key(&newer).await.is_ok());
    let listed = store.signing_keys(id).await.unwrap_or_default();
    assert_eq!(listed.len(), 4);
    assert_eq!(listed[0], newer);
    let mut replaced = newer.clone();
    replaced.private_key = signing[0].private_key.clone();
    assert!(store.replace_signing_key(&replaced).await.is_ok());
    assert_eq!(
        store.signing_keys(id).await.ok().map(|k| k[0].clone()),
        Some(replaced.clone())
    );
    replaced.kid = "none".into();
    assert!(matches!(
        store.replace_signing_key(&replaced).await,
        Err(StoreError::NotFound)
    ));
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

/// The sealing store hands out the same values as the plain one, and stores none of the
/// project's secrets in the clear underneath.
#[tokio::test]
async fn sealed_store_behaves_and_seals() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let url = format!("sqlite://{}/auth.db", dir.path().display());
    let db = Database::connect_and_migrate(&url, crate::MIGRATIONS).await;
    let Ok(Database::Sqlite(pool)) = db else {
        panic!("sqlite did not open")
    };
    let plain: std::sync::Arc<dyn ProjectStore> = std::sync::Arc::new(SqliteStore::new(pool));
    let key = latchkey_shared::sealed::SecretsKey::generate();
    let sealed = sealed::SealedProjects::new(plain.clone(), key);
    behaves(&sealed).await;

    let clock = ManualClock::new(1_000);
    let created = projects::create(&sealed, &clock, "Sealed")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let id = created.project.id;
    let settings = r#"{"oauth_providers":[{"id":"corp","client_secret":"s3cret-client"}],
        "email":{"smtp_url":"smtps://mailer:m41l-pass@smtp.example.com:465","from":"a@b.c"}}"#;
    assert_eq!(
        sealed.save_settings(id, 1, "Sealed", settings).await.ok(),
        Some(true)
    );
    let stored = plain
        .project(id)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("gone"));
    assert!(!stored.settings.contains("s3cret-client") && !stored.settings.contains("m41l-pass"));
    let opened = sealed
        .project(id)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("gone"));
    let opened: serde_json::Value = serde_json::from_str(&opened.settings).unwrap_or_default();
    assert_eq!(
        opened["oauth_providers"][0]["client_secret"],
        "s3cret-client"
    );
    assert_eq!(
        opened["email"]["smtp_url"],
        "smtps://mailer:m41l-pass@smtp.example.com:465"
    );
    let raw = plain.signing_keys(id).await.unwrap_or_default();
    let keys = sealed.signing_keys(id).await.unwrap_or_default();
    assert_eq!(raw.len(), keys.len());
    for (raw, key) in raw.iter().zip(&keys) {
        assert_ne!(raw.private_key, key.private_key);
        assert!(ring::signature::EcdsaKeyPair::from_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &key.private_key,
            &ring::rand::SystemRandom::new(),
        )
        .is_ok());
    }
    // Under another key nothing opens: a wrong key fails loudly, never as plaintext.
    let stranger =
        sealed::SealedProjects::new(plain, latchkey_shared::sealed::SecretsKey::generate());
    assert!(matches!(
        stranger.signing_keys(id).await,
        Err(StoreError::Unopenable)
    ));
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
