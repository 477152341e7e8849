//! No secret the API hands out is stored or logged in plaintext: every flow that makes one
//! runs, then the database (a `pg_dump` of each service, or the SQLite files byte for byte) and
//! the component logs (at debug level) are searched for each secret.

use base64::Engine;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

const PASSWORD: &str = "a password only this test knows 7f3k";

fn field(body: &Value, name: &str) -> String {
    body[name]
        .as_str()
        .unwrap_or_else(|| panic!("no {name} in {body}"))
        .to_owned()
}

/// Runs every flow that hands out a secret; returns (what, secret) pairs.
async fn exercise(app: &TestApp) -> Vec<(&'static str, String)> {
    let mut secrets = vec![
        ("server key", app.project.server_key.clone()),
        ("admin key", app.project.admin_key.clone()),
        ("password", PASSWORD.to_owned()),
    ];
    app.settings(json!({
        "magic_link_enabled": true,
        "allow_localhost": true,
        "refresh_token_rotation": true,
        "allow_user_api_keys": true,
        "passkey_enabled": true,
    }))
    .await;

    let keys = ok(
        send(
            app.as_("admin", Method::POST, "/api/v1/internal/api-keys")
                .json(&json!({
                    "description": "scan",
                    "has_publishable_client_key": true,
                    "has_secret_server_key": true,
                    "has_super_secret_admin_key": true,
                })),
        )
        .await,
        201,
    )
    .await;
    secrets.push(("new server key", field(&keys, "secret_server_key")));
    secrets.push(("new admin key", field(&keys, "super_secret_admin_key")));

    let address = email("scan");
    let session = app.sign_up(&address, PASSWORD).await;
    secrets.push(("refresh token", session.refresh.clone()));
    let refreshed = ok(
        send(
            app.client(Method::POST, "/api/v1/auth/sessions/current/refresh", None)
                .header("x-service-refresh-token", &session.refresh),
        )
        .await,
        200,
    )
    .await;
    secrets.push(("rotated refresh token", field(&refreshed, "refresh_token")));

    let user_key = ok(
        send(
            app.client(Method::POST, "/api/v1/user-api-keys", Some(&session.access))
                .json(
                    &json!({ "user_id": "me", "description": "scan", "expires_at_millis": null }),
                ),
        )
        .await,
        200,
    )
    .await;
    secrets.push(("user API key", field(&user_key, "value")));
    let cli = ok(
        send(app.client(Method::POST, "/api/v1/auth/cli", None)).await,
        200,
    )
    .await;
    secrets.push(("CLI polling code", field(&cli, "polling_code")));
    secrets.push(("CLI login code", field(&cli, "login_code")));
    let complete = json!({ "login_code": field(&cli, "login_code"), "refresh_token": field(&refreshed, "refresh_token") });
    ok(
        send(
            app.client(Method::POST, "/api/v1/auth/cli/complete", None)
                .json(&complete),
        )
        .await,
        200,
    )
    .await;
    let polled = ok(
        send(
            app.client(Method::POST, "/api/v1/auth/cli/poll", None)
                .json(&json!({ "polling_code": field(&cli, "polling_code") })),
        )
        .await,
        201,
    )
    .await;
    secrets.push(("CLI session refresh token", field(&polled, "refresh_token")));

    // Passkey challenges: a registration's code and a sign-in's, and the session it opens.
    let mut device = crate::authenticator::Authenticator::default();
    let (options, code) = app
        .passkey_options("initiate-passkey-registration", Some(&session.access))
        .await;
    secrets.push(("passkey registration code", code.clone()));
    let credential = device.register(&options, crate::passkeys::ORIGIN);
    ok(
        send(
            app.client(
                Method::POST,
                "/api/v1/auth/passkey/register",
                Some(&session.access),
            )
            .json(&json!({ "credential": credential, "code": code })),
        )
        .await,
        200,
    )
    .await;
    let (options, code) = app
        .passkey_options("initiate-passkey-authentication", None)
        .await;
    secrets.push(("passkey sign-in code", code.clone()));
    let answer = device.sign(0, &options, crate::passkeys::ORIGIN);
    let signed = ok(app.passkey_answer(&answer, &code).await, 200).await;
    secrets.push((
        "passkey session refresh token",
        field(&signed, "refresh_token"),
    ));

    let callback = json!({ "email": address, "callback_url": "http://localhost/cb" });
    ok(
        send(
            app.client(Method::POST, "/api/v1/auth/otp/send-sign-in-code", None)
                .json(&callback),
        )
        .await,
        200,
    )
    .await;
    let otp_mail = app.mail.wait_for(&address).await;
    secrets.push(("sign-in code", crate::smtp::code_in(&otp_mail)));
    ok(
        send(
            app.client(Method::POST, "/api/v1/auth/password/send-reset-code", None)
                .json(&callback),
        )
        .await,
        200,
    )
    .await;
    secrets.push((
        "password-reset code",
        crate::smtp::code_in(&app.mail.wait_for(&address).await),
    ));

    let channels = ok(
        send(app.as_(
            "server",
            Method::GET,
            &format!("/api/v1/contact-channels?user_id={}", session.user_id),
        ))
        .await,
        200,
    )
    .await;
    let channel = channels["items"][0]["id"].as_str().unwrap_or_default();
    ok(
        send(
            app.as_(
                "server",
                Method::POST,
                &format!(
                    "/api/v1/contact-channels/{}/{channel}/send-verification-code",
                    session.user_id
                ),
            )
            .json(&json!({ "callback_url": "http://localhost/verify" })),
        )
        .await,
        200,
    )
    .await;
    secrets.push((
        "verification code",
        crate::smtp::code_in(&app.mail.wait_for(&address).await),
    ));

    let team = ok(
        send(
            app.as_("server", Method::POST, "/api/v1/teams")
                .json(&json!({ "display_name": "scan team" })),
        )
        .await,
        201,
    )
    .await;
    let guest = email("guest");
    ok(
        send(
            app.as_("server", Method::POST, "/api/v1/team-invitations/send-code")
                .json(&json!({
                    "team_id": field(&team, "id"),
                    "email": guest,
                    "callback_url": "http://localhost/join",
                })),
        )
        .await,
        200,
    )
    .await;
    secrets.push((
        "invitation code",
        crate::smtp::code_in(&app.mail.wait_for(&guest).await),
    ));

    let mut seed = [0u8; 20];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed)
        .unwrap_or_else(|_| panic!("random"));
    let seed_b64 = base64::engine::general_purpose::STANDARD.encode(seed);
    let mfa_address = email("scan-mfa");
    ok(
        send(
            app.as_("server", Method::POST, "/api/v1/users")
                .json(&json!({
                    "primary_email": mfa_address,
                    "primary_email_auth_enabled": true,
                    "password": PASSWORD,
                    "totp_secret_base64": seed_b64,
                })),
        )
        .await,
        201,
    )
    .await;
    secrets.push(("TOTP seed (base64)", seed_b64));
    secrets.push(("TOTP seed (base32)", base32(&seed)));
    let (status, body) = app.sign_in(&mfa_address, PASSWORD).await;
    assert_eq!(status, 400, "{body}");
    secrets.push(("MFA attempt code", field(&body["details"], "attempt_code")));

    let endpoint = ok(
        send(
            app.as_("admin", Method::POST, "/api/v1/webhook-endpoints")
                .json(&json!({ "url": "http://127.0.0.1:9/hook" })),
        )
        .await,
        201,
    )
    .await;
    secrets.push(("webhook secret", field(&endpoint, "secret")));
    let rotated = ok(
        send(app.as_(
            "admin",
            Method::POST,
            &format!(
                "/api/v1/webhook-endpoints/{}/rotate-secret",
                field(&endpoint, "id")
            ),
        ))
        .await,
        200,
    )
    .await;
    secrets.push(("rotated webhook secret", field(&rotated, "secret")));
    for (what, secret) in &secrets {
        assert!(
            secret.len() >= 16,
            "{what} is too short to search for: {secret}"
        );
    }
    secrets
}

fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::new();
    let (mut buffer, mut bits) = (0u32, 0);
    for b in bytes {
        buffer = (buffer << 8) | u32::from(*b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((buffer >> bits) & 31) as usize]));
        }
    }
    out
}

/// The secrets found in `haystack`, by name.
fn found_in(haystack: &[u8], secrets: &[(&'static str, String)]) -> Vec<&'static str> {
    secrets
        .iter()
        .filter(|(_, s)| {
            haystack
                .windows(s.len())
                .any(|w| w.eq_ignore_ascii_case(s.as_bytes()))
        })
        .map(|(what, _)| *what)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "hardening tier: deploy/hardening.sh"]
async fn no_secret_in_the_sqlite_files() {
    let app = TestApp::spawn(Mode::Embedded).await;
    let secrets = exercise(&app).await;
    // Reads the files as they are on disk, write-ahead logs included.
    let mut bytes = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(app.data_dir()).unwrap_or_else(|e| panic!("{e}")) {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.contains(".db") {
            bytes.extend(std::fs::read(&path).unwrap_or_default());
            files += 1;
        }
    }
    assert!(
        files >= 4 && bytes.len() > 100_000,
        "{files} files, {} bytes",
        bytes.len()
    );
    // The scan can fail: a value every dump holds in plaintext is found.
    assert_eq!(
        found_in(&bytes, &[("project id", app.project.id.clone())]).len(),
        1
    );
    assert_eq!(
        found_in(&bytes, &secrets),
        Vec::<&str>::new(),
        "secrets in the SQLite files"
    );
    crate::hardening::report(format!(
        "secrets at rest (embedded): {} secrets of {} kinds, 0 found in {} bytes of {files} files",
        secrets.len(),
        secrets.len(),
        bytes.len()
    ));
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "hardening tier: deploy/hardening.sh"]
async fn no_secret_in_a_postgres_dump_or_the_logs() {
    let app = TestApp::spawn_distributed_with(&[("RUST_LOG", "debug".to_owned())]).await;
    let secrets = exercise(&app).await;
    let mut dump = Vec::new();
    for url in app.database_urls() {
        let out = std::process::Command::new("pg_dump")
            .arg("--no-owner")
            .arg(&url)
            .output()
            .unwrap_or_else(|e| panic!("pg_dump: {e}"));
        assert!(
            out.status.success(),
            "pg_dump {url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dump.extend(out.stdout);
    }
    assert_eq!(
        found_in(&dump, &[("project id", app.project.id.clone())]).len(),
        1
    );
    assert_eq!(
        found_in(&dump, &secrets),
        Vec::<&str>::new(),
        "secrets in the database dump"
    );
    let logs = app.all_logs();
    assert!(
        logs.lines().count() > 100,
        "debug logs are on: {} lines",
        logs.lines().count()
    );
    assert_eq!(
        found_in(logs.as_bytes(), &secrets),
        Vec::<&str>::new(),
        "secrets in the component logs"
    );
    crate::hardening::report(format!(
        "secrets at rest (distributed): {} secrets, 0 found in a {} byte dump of 4 databases or {} log lines",
        secrets.len(),
        dump.len(),
        logs.lines().count()
    ));
    app.finish().await;
}
