//! Every stored secret sealed, and the sealing key rotated (issue 18 §4): a dump of the
//! databases holds no OAuth client secret, SMTP password, webhook secret or private signing key,
//! before and after `latchkey secrets rotate` moves them to a new key; and a project's signing
//! keys rotate without failing a token in use.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

const CLIENT_SECRET: &str = "client-secret-only-this-test-knows-5k2";
const SMTP_PASSWORD: &str = "smtp-password-only-this-test-knows-8q1";
/// "sealed:v1:" as pg_dump prints the start of a sealed bytea value in COPY text (hex, its
/// backslash escaped).
const SEALED_BYTEA: &str = r"\\x7365616c65643a76313a";

fn dump(urls: &[String]) -> String {
    let mut out = String::new();
    for url in urls {
        let dumped = std::process::Command::new("pg_dump")
            .arg("--no-owner")
            .arg(url)
            .output()
            .unwrap_or_else(|e| panic!("pg_dump: {e}"));
        assert!(
            dumped.status.success(),
            "pg_dump: {}",
            String::from_utf8_lossy(&dumped.stderr)
        );
        out.push_str(&String::from_utf8_lossy(&dumped.stdout));
    }
    out
}

/// The private signing keys of the dump (its `signing_keys` rows' `private_key` column).
fn private_keys(dump: &str) -> Vec<String> {
    let Some(start) = dump.find("COPY public.signing_keys") else {
        return Vec::new();
    };
    let header = &dump[start..dump[start..].find('\n').map_or(dump.len(), |i| start + i)];
    let columns: Vec<&str> = header
        .split('(')
        .nth(1)
        .unwrap_or_default()
        .split(')')
        .next()
        .unwrap_or_default()
        .split(", ")
        .collect();
    let at = columns.iter().position(|c| *c == "private_key");
    dump[start..]
        .lines()
        .skip(1)
        .take_while(|l| *l != "\\.")
        .filter_map(|l| Some(l.split('\t').nth(at?)?.to_owned()))
        .collect()
}

fn assert_sealed(dump: &str, secrets: &[(&str, String)], when: &str) {
    for (what, secret) in secrets {
        assert!(!dump.contains(secret.as_str()), "{what} in the dump {when}");
    }
    let keys = private_keys(dump);
    assert!(keys.len() >= 2, "signing keys in the dump {when}: {keys:?}");
    for key in keys {
        assert!(
            key.starts_with(SEALED_BYTEA),
            "a private key in the clear {when}: {}",
            &key[..key.len().min(40)]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_holds_no_secret_before_or_after_the_key_is_rotated() {
    let old_key = latchkey_shared::sealed::SecretsKey::generate_base64();
    let app = TestApp::spawn_distributed_with(&[("LATCHKEY_SECRETS_KEY", old_key.clone())]).await;
    app.settings(json!({
        "oauth_providers": [{
            "id": "corp", "type": "oidc", "client_id": "corp-client",
            "client_secret": CLIENT_SECRET, "issuer": "https://id.example.com",
        }],
        "email": {
            "smtp_url": format!("smtps://mailer:{SMTP_PASSWORD}@smtp.example.com:465"),
            "from": "Acme <noreply@example.com>",
        },
    }))
    .await;
    let endpoint = ok(
        send(
            app.as_("admin", Method::POST, "/api/v1/webhook-endpoints")
                .json(&json!({ "url": "http://127.0.0.1:9/hook" })),
        )
        .await,
        201,
    )
    .await;
    let webhook_secret = endpoint["secret"].as_str().unwrap_or_default().to_owned();
    assert!(webhook_secret.starts_with("whsec_"), "{endpoint}");
    let session = app
        .sign_up(&email("sealed"), "cedar-lattice-beacon-58")
        .await;
    let secrets = [
        ("the OAuth client secret", CLIENT_SECRET.to_owned()),
        ("the SMTP password", SMTP_PASSWORD.to_owned()),
        (
            "the webhook secret",
            webhook_secret.trim_start_matches("whsec_").to_owned(),
        ),
    ];
    let urls = app.database_urls();
    assert_sealed(&dump(&urls), &secrets, "before the rotation");
    // The running system reads them back: the admin view says the secret is set.
    let view = ok(
        send(app.as_("admin", Method::GET, "/api/v1/internal/project")).await,
        200,
    )
    .await;
    assert_eq!(
        view["oauth_providers"][0]["client_secret_set"], true,
        "{view}"
    );

    // Rotate: the new key seals, the previous one still opens what it sealed.
    let new_key = latchkey_shared::sealed::SecretsKey::generate_base64();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut rotate = std::process::Command::new(env!("CARGO_BIN_EXE_latchkey"));
    rotate
        .args(["secrets", "rotate"])
        .env_clear()
        .current_dir(dir.path())
        .env("LATCHKEY_SECRETS_KEY", &new_key)
        .env("LATCHKEY_SECRETS_KEY_PREVIOUS", &old_key)
        .env("RUST_LOG", "warn");
    for url in &urls {
        for service in ["AUTH", "TEAMS", "CONTACTS", "WEBHOOKS"] {
            if url.contains(&format!("_{}_", service.to_lowercase())) {
                rotate.env(format!("LATCHKEY_{service}_DATABASE_URL"), url);
            }
        }
    }
    let rotated = rotate.output().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        rotated.status.success(),
        "{}",
        String::from_utf8_lossy(&rotated.stderr)
    );
    let counts: Value = serde_json::from_slice(&rotated.stdout).unwrap_or_default();
    // Settings and both signing keys in auth; the endpoint secret in webhooks.
    assert!(counts["resealed"]["auth"].as_u64() >= Some(3), "{counts}");
    assert!(
        counts["resealed"]["webhooks"].as_u64() >= Some(1),
        "{counts}"
    );
    assert!(!dir.path().join("latchkey-data").exists());
    let after = dump(&urls);
    assert_sealed(&after, &secrets, "after the rotation");

    // Everything now opens with the new key alone and no longer with the old one.
    let new = latchkey_shared::sealed::SecretsKey::from_base64(&new_key)
        .unwrap_or_else(|e| panic!("{e}"));
    let old = latchkey_shared::sealed::SecretsKey::from_base64(&old_key)
        .unwrap_or_else(|e| panic!("{e}"));
    let webhooks_db = urls
        .iter()
        .find(|u| u.contains("_webhooks_"))
        .unwrap_or_else(|| panic!("no webhooks database in {urls:?}"));
    let pool = sqlx::PgPool::connect(webhooks_db)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let stored: String = sqlx::query_scalar("SELECT secret FROM endpoints")
        .fetch_one(&pool)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    pool.close().await;
    assert_eq!(
        new.open("webhook-endpoint-secret", &stored).ok().as_deref(),
        Some(webhook_secret.as_str())
    );
    assert!(old.open("webhook-endpoint-secret", &stored).is_err());
    // The system, still running with the old key only, signed its tokens before the rotation.
    assert!(!session.access.is_empty());
    app.finish().await;
}

// The signing-key rotation route: new tokens carry the new key id, tokens signed before still
// verify, and the JWKS publishes both keys.
both_modes!(
    signing_keys_rotate_without_failing_a_token,
    |app: &TestApp| async move {
        let address = email("rotate");
        let before = app.sign_up(&address, "cedar-lattice-beacon-58").await;
        let kid = |token: &str| {
            jsonwebtoken::decode_header(token)
                .ok()
                .and_then(|h| h.kid)
                .unwrap_or_default()
        };
        let old_kid = kid(&before.access);
        let rotated = ok(
            send(app.as_(
                "admin",
                Method::POST,
                "/api/v1/internal/signing-keys/rotate",
            ))
            .await,
            200,
        )
        .await;
        let items = rotated["items"].as_array().cloned().unwrap_or_default();
        let normal: Vec<&Value> = items.iter().filter(|k| k["audience"] == "normal").collect();
        assert_eq!(normal.len(), 2, "{rotated}");
        assert_eq!(
            normal[1]["kid"],
            old_kid.as_str(),
            "newest first: {rotated}"
        );
        let new_kid = normal[0]["kid"].as_str().unwrap_or_default().to_owned();
        assert_ne!(new_kid, old_kid);

        let after = app.signed_in(&address, "cedar-lattice-beacon-58").await;
        assert_eq!(kid(&after.access), new_kid);
        for token in [&before.access, &after.access] {
            let me = send(app.client(Method::GET, "/api/v1/users/me", Some(token))).await;
            assert_eq!(me.status(), 200);
        }
        let jwks: Value = send(app.get(&format!(
            "/api/v1/projects/{}/.well-known/jwks.json",
            app.project.id
        )))
        .await
        .json()
        .await
        .unwrap_or_default();
        let published: Vec<&str> = jwks["keys"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|k| k["kid"].as_str())
            .collect();
        assert!(
            published.contains(&old_kid.as_str()) && published.contains(&new_kid.as_str()),
            "{jwks}"
        );
        // Only admins rotate.
        let refused = send(app.as_(
            "server",
            Method::POST,
            "/api/v1/internal/signing-keys/rotate",
        ))
        .await;
        assert_eq!(refused.status(), 401);
    }
);
