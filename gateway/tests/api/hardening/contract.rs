//! Contract fuzzing: schemathesis generates requests for every operation of the OpenAPI
//! document the gateway serves, valid and invalid, once per access type, against the
//! distributed stack (Postgres, RabbitMQ). Required: no server error, and every answer's
//! status, content type, headers and body as the document says.

use std::time::Instant;

use reqwest::Method;

use crate::hardening::scale;
use crate::helpers::*;

/// The checks of the contract; the data-acceptance checks are left out because the API may
/// refuse documented-valid data for reasons a schema cannot express (an unknown id, a code
/// that was never issued, a setting that is off).
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
response_headers_conformance,response_schema_conformance";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "hardening tier: deploy/hardening.sh (needs LATCHKEY_SCHEMATHESIS)"]
async fn schemathesis_per_access_type_finds_no_server_error_or_mismatch() {
    let st = std::env::var("LATCHKEY_SCHEMATHESIS").unwrap_or_else(|_| {
        panic!("LATCHKEY_SCHEMATHESIS must name the schemathesis `st` command (deploy/hardening.sh sets it)")
    });
    let app = TestApp::spawn_distributed_with(&[("LATCHKEY_RATE_LIMITS", "off".to_owned())]).await;
    let user = app
        .sign_up(&email("contract"), "contract test password")
        .await;
    let seed = std::env::var("LATCHKEY_SCHEMATHESIS_SEED").unwrap_or_else(|_| "1".into());
    let examples = (15 * scale()).to_string();
    let p = app.project.clone();
    let mut summaries = Vec::new();
    for access in ["client", "server", "admin"] {
        let key = match access {
            "client" => format!("X-Stack-Publishable-Client-Key: {}", p.client_key),
            "server" => format!("X-Stack-Secret-Server-Key: {}", p.server_key),
            _ => format!("X-Stack-Super-Secret-Admin-Key: {}", p.admin_key),
        };
        let mut args = vec![
            "run".to_owned(),
            format!("{}/api/v1/openapi.json", app.base),
            "--checks".into(),
            CHECKS.into(),
            "--phases".into(),
            "examples,coverage,fuzzing".into(),
            "--max-examples".into(),
            examples.clone(),
            "--seed".into(),
            seed.clone(),
            "--workers".into(),
            "2".into(),
            "--request-timeout".into(),
            "20".into(),
            "--no-color".into(),
            "--warnings".into(),
            "off".into(),
            "-H".into(),
            format!("X-Stack-Access-Type: {access}"),
            "-H".into(),
            format!("X-Stack-Project-Id: {}", p.id),
            "-H".into(),
            key,
        ];
        if access == "client" {
            args.extend([
                "-H".into(),
                format!("X-Stack-Access-Token: {}", user.access),
            ]);
        }
        let started = Instant::now();
        let out = tokio::process::Command::new(&st)
            .args(&args)
            .output()
            .await
            .unwrap_or_else(|e| panic!("{st}: {e}"));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let summary: String = text
            .lines()
            .filter(|l| l.contains(" generated") || l.contains(" in ") && l.starts_with('='))
            .collect::<Vec<_>>()
            .join(" / ");
        assert!(
            out.status.success(),
            "schemathesis as {access} failed:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        summaries.push(format!(
            "{access}: {} ({:.0} s)",
            summary.trim(),
            started.elapsed().as_secs_f64()
        ));
    }
    // The stack is still healthy after thousands of hostile requests.
    let ready = send(app.get("/health/ready")).await.status();
    assert_eq!(ready, 200);
    let listed = send(app.as_("server", Method::GET, "/api/v1/users?limit=1")).await;
    assert_eq!(listed.status(), 200);
    for s in &summaries {
        crate::hardening::report(format!("schemathesis {s}"));
    }
    app.finish().await;
}
