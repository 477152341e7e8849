//! Accounts benchmark: boots the embedded system in this process and prints, side by side,
//! what the machine can do and what Latchkey does with it:
//!
//! - raw argon2id verifications per second (same parameters, one task per core),
//! - password sign-ins per second through the gateway (HTTP, gRPC, argon2, session, token),
//! - `GET /users/me` requests per second with a valid access token.
//!
//! Run with `cargo bench -p latchkey-gateway --bench accounts` (optionally `-- --seconds N`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey_gateway::system::{self, Databases, SystemConfig};
use latchkey_shared::password::Passwords;
use serde_json::{json, Value};

const PASSWORD: &str = "correct-horse-battery-staple";

fn seconds() -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--seconds")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

/// Runs `op` from `workers` tasks for `duration`; returns operations per second.
async fn rate<F, Fut>(workers: usize, duration: Duration, op: F) -> f64
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let op = Arc::new(op);
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let (op, done, failed) = (op.clone(), done.clone(), failed.clone());
            tokio::spawn(async move {
                while started.elapsed() < duration {
                    if op().await {
                        done.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    let failed = failed.load(Ordering::Relaxed);
    if failed > 0 {
        eprintln!("  ({failed} operations failed)");
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let duration = Duration::from_secs(seconds());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let dir = tempfile::tempdir()?;
    let running = system::start(SystemConfig {
        http_addr: "127.0.0.1:0".into(),
        public_url: None,
        databases: Databases::sqlite_in(dir.path()),
        amqp_url: None,
        mail: Default::default(),
        max_body_bytes: 1 << 20,
        key_cache_ttl: Duration::from_secs(2),
        webhooks: latchkey_webhooks::Config {
            database_url: String::new(),
            retry_schedule: latchkey_webhooks::default_schedule(),
            url_policy: latchkey_webhooks::UrlPolicy::EMBEDDED,
        },
    })
    .await?;
    let project = running
        .auth_client()?
        .create_project(latchkey_proto::auth::v1::CreateProjectRequest {
            display_name: "Bench".into(),
        })
        .await?
        .into_inner();
    let base = format!("http://{}/api/v1", running.http_addr);
    let http = reqwest::Client::new();
    let client = {
        let (http, project) = (http.clone(), project.clone());
        move |method: reqwest::Method, path: &str| {
            http.request(method, format!("{base}{path}"))
                .header("x-service-access-type", "client")
                .header("x-service-project-id", &project.project_id)
                .header(
                    "x-service-publishable-client-key",
                    &project.publishable_client_key,
                )
        }
    };
    let signed_up: Value = client(reqwest::Method::POST, "/auth/password/sign-up")
        .json(&json!({ "email": "bench@example.com", "password": PASSWORD }))
        .send()
        .await?
        .json()
        .await?;
    let token = signed_up["access_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    println!(
        "Latchkey accounts benchmark: {cores} cores, {}s per scenario, embedded mode (SQLite)",
        duration.as_secs()
    );

    let passwords = Passwords::default();
    let hash = passwords.hash(PASSWORD).await?;
    let raw = rate(cores, duration, move || {
        let (p, h) = (passwords.clone(), hash.clone());
        async move { p.verify(PASSWORD, Some(&h)).await.unwrap_or(false) }
    })
    .await;
    println!("  raw argon2id verifications (m=19456 KiB, t=2, p=1):  {raw:>9.1} /s");

    let sign_in = client.clone();
    let sign_ins = rate(cores * 4, duration, move || {
        let req = sign_in(reqwest::Method::POST, "/auth/password/sign-in")
            .json(&json!({ "email": "bench@example.com", "password": PASSWORD }));
        async move { req.send().await.is_ok_and(|r| r.status() == 200) }
    })
    .await;
    println!("  password sign-ins through the gateway:               {sign_ins:>9.1} /s  ({:.0}% of raw)", 100.0 * sign_ins / raw);

    let me = client.clone();
    let reads = rate(64, duration, move || {
        let req = me(reqwest::Method::GET, "/users/me").header("x-service-access-token", &token);
        async move { req.send().await.is_ok_and(|r| r.status() == 200) }
    })
    .await;
    println!("  GET /users/me with a valid access token:             {reads:>9.1} /s");

    running.shutdown().await?;
    Ok(())
}
