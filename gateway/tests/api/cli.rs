//! The `latchkey` binary as a user runs it: embedded start, project.json, CLI commands.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

fn latchkey(dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    cmd.env("LATCHKEY_DATA_DIR", dir)
        .env("LATCHKEY_HTTP_ADDR", "127.0.0.1:0")
        .env_remove("LATCHKEY_AUTH_DATABASE_URL")
        .env_remove("LATCHKEY_AMQP_URL");
    cmd
}

/// Starts the embedded system and returns (child, base URL, printed credentials).
fn start_embedded(dir: &std::path::Path) -> (std::process::Child, String, Value) {
    let mut child = latchkey(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut lines = BufReader::new(stdout).lines();
    let mut base = String::new();
    let mut json = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap_or_default();
        if let Some(rest) = line.strip_prefix("Latchkey is running at ") {
            base = rest.trim_end_matches("/api/v1/").to_owned();
        } else if line.starts_with('{') || !json.is_empty() {
            json.push_str(&line);
            if line == "}" {
                break;
            }
        }
    }
    let credentials = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    (child, base, credentials)
}

fn stop(mut child: std::process::Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    for _ in 0..100 {
        if let Ok(Some(status)) = child.try_wait() {
            assert!(status.success(), "exit status {status}");
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("latchkey did not stop within 10 s of SIGTERM");
}

#[tokio::test]
async fn embedded_first_start_prints_working_keys_and_later_starts_reprint_them() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (child, base, credentials) = start_embedded(dir.path());
    let file = dir.path().join("project.json");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(0);
    assert_eq!(mode, 0o600);
    for key in [
        "project_id",
        "publishable_client_key",
        "secret_server_key",
        "super_secret_admin_key",
    ] {
        assert!(credentials[key].is_string(), "{key}");
    }
    let res = reqwest::Client::new()
        .get(format!("{base}/api/v1/"))
        .header("x-service-access-type", "server")
        .header(
            "x-service-project-id",
            credentials["project_id"].as_str().unwrap_or_default(),
        )
        .header(
            "x-service-secret-server-key",
            credentials["secret_server_key"]
                .as_str()
                .unwrap_or_default(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);

    // Without SMTP, mail goes to the dev mailbox, readable with its body by admins.
    let header = |k: &str| credentials[k].as_str().unwrap_or_default().to_owned();
    let http = reqwest::Client::new();
    let admin = |req: reqwest::RequestBuilder| {
        req.header("x-service-access-type", "admin")
            .header("x-service-project-id", header("project_id"))
            .header(
                "x-service-super-secret-admin-key",
                header("super_secret_admin_key"),
            )
    };
    let res = admin(http.patch(format!("{base}/api/v1/internal/project")))
        .json(&serde_json::json!({"allow_localhost": true}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
    let res = http
        .post(format!("{base}/api/v1/auth/password/sign-up"))
        .header("x-service-access-type", "client")
        .header("x-service-project-id", header("project_id"))
        .header("x-service-publishable-client-key", header("publishable_client_key"))
        .json(&serde_json::json!({"email": "dev@example.com", "password": "dev-mailbox-pass-1", "verification_callback_url": "http://localhost:3000/verify"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), 200);
    let mut text = String::new();
    for _ in 0..50 {
        let emails: Value = admin(http.get(format!("{base}/api/v1/internal/emails")))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .json()
            .await
            .unwrap_or_default();
        if let Some(t) = emails["items"][0]["text"].as_str() {
            assert_eq!(emails["items"][0]["status"], "sent");
            text = t.to_owned();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        text.contains("http://localhost:3000/verify?code="),
        "{text}"
    );
    stop(child);

    let (child, _, again) = start_embedded(dir.path());
    assert_eq!(again, credentials);
    stop(child);
}

#[test]
fn cli_creates_lists_and_migrates() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = latchkey(dir.path())
        .args(["projects", "create", "--display-name", "From CLI"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let created: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert!(created["secret_server_key"]
        .as_str()
        .unwrap_or_default()
        .starts_with("ssk_"));
    let out = latchkey(dir.path())
        .args(["projects", "list"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(
        (&lines[0]["id"], &lines[0]["display_name"]),
        (&created["project_id"], &Value::from("From CLI"))
    );
    assert!(lines[0]["created_at_millis"].is_i64());
    let out = latchkey(dir.path())
        .arg("migrate")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success());
    for db in ["auth", "teams", "contacts", "webhooks"] {
        assert!(dir.path().join(format!("{db}.db")).exists(), "{db}.db");
    }
    let out = latchkey(dir.path())
        .args(["projects", "create", "--display-name", "  "])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
}
