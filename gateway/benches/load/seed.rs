//! Seed data through the API (users with addresses, teams, one team with members, a webhook
//! endpoint on a loopback receiver), and bulk users straight into the auth database for the
//! large-list comparison.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::Method;
use serde_json::{json, Value};

use crate::stack::Stack;

pub const PASSWORD: &str = "correct-horse-battery-staple";
/// Members of the team whose member profiles are listed.
pub const BIG_TEAM: usize = 100;
/// Users with passwords that the sign-in scenario cycles through.
const SIGNERS: usize = 8;
/// Seeding requests in flight.
const PARALLEL: usize = 32;

pub struct Fixtures {
    pub reader_id: String,
    pub reader_access: String,
    pub reader_refresh: String,
    pub signers: Vec<String>,
    pub big_team: String,
    pub receiver: Receiver,
}

async fn json_of(request: reqwest::RequestBuilder, status: u16) -> anyhow::Result<Value> {
    let res = request.send().await?;
    let got = res.status().as_u16();
    let body: Value = res.json().await.unwrap_or_default();
    anyhow::ensure!(got == status, "seeding got {got}: {body}");
    Ok(body)
}

pub async fn seed(stack: &Stack, users: usize, teams: usize) -> anyhow::Result<Fixtures> {
    let started = std::time::Instant::now();
    let receiver = Receiver::start().await?;
    json_of(
        stack
            .req("admin", Method::POST, "/webhook-endpoints")
            .json(&json!({ "url": receiver.url })),
        201,
    )
    .await?;

    let reader = json_of(
        stack
            .req("client", Method::POST, "/auth/password/sign-up")
            .json(&json!({ "email": "reader@bench.test", "password": PASSWORD })),
        200,
    )
    .await?;
    let field = |k: &str| reader[k].as_str().unwrap_or_default().to_owned();

    let mut signers = Vec::new();
    for i in 0..SIGNERS {
        let email = format!("signer{i}@bench.test");
        json_of(
            stack.req("server", Method::POST, "/users").json(&json!({
                "primary_email": email, "primary_email_auth_enabled": true, "password": PASSWORD,
            })),
            201,
        )
        .await?;
        signers.push(email);
    }

    let ids: Vec<String> = futures::stream::iter(0..users.saturating_sub(SIGNERS + 1))
        .map(|i| {
            let r = stack
                .req("server", Method::POST, "/users")
                .json(&json!({ "primary_email": format!("user{i}@bench.test"), "display_name": format!("User {i}") }));
            async move { json_of(r, 201).await.map(|b| b["id"].as_str().unwrap_or_default().to_owned()) }
        })
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<_>>()?;

    let team_ids: Vec<String> = futures::stream::iter(0..teams)
        .map(|i| {
            let r = stack
                .req("server", Method::POST, "/teams")
                .json(&json!({ "display_name": format!("Team {i}") }));
            async move {
                json_of(r, 201)
                    .await
                    .map(|b| b["id"].as_str().unwrap_or_default().to_owned())
            }
        })
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<_>>()?;
    let big_team = team_ids.first().cloned().unwrap_or_default();
    futures::stream::iter(ids.iter().take(BIG_TEAM))
        .map(|user| {
            let r = stack.req(
                "server",
                Method::POST,
                &format!("/team-memberships/{big_team}/{user}"),
            );
            async move { json_of(r.json(&json!({})), 201).await }
        })
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;

    // Seeding emitted events; let their deliveries finish before the scenarios start.
    receiver.settle(Duration::from_secs(60)).await;
    println!(
        "  {:<12} seeded {users} users, {teams} teams in {:.1} s ({} webhook deliveries)",
        stack.mode,
        started.elapsed().as_secs_f64(),
        receiver.count()
    );
    Ok(Fixtures {
        reader_id: field("user_id"),
        reader_access: field("access_token"),
        reader_refresh: field("refresh_token"),
        signers,
        big_team,
        receiver,
    })
}

/// Adds `n` users (no addresses) to the project straight in the auth database, in batches.
pub async fn bulk_users(database_url: &str, project_id: &str, n: usize) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let pool = sqlx::PgPool::connect(database_url).await?;
    let project = uuid::Uuid::parse_str(project_id)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let mut done = 0usize;
    while done < n {
        let batch = (n - done).min(50_000);
        let ids: Vec<uuid::Uuid> = (0..batch).map(|_| uuid::Uuid::now_v7()).collect();
        sqlx::query(
            "INSERT INTO users (project_id, id, display_name, client_metadata, \
             client_read_only_metadata, server_metadata, otp_auth_enabled, restricted_by_admin, \
             risk_score_bot, risk_score_free_trial_abuse, signed_up_at_millis, last_active_at_millis) \
             SELECT $1, id, 'Bulk user', 'null', 'null', 'null', false, false, 0, 0, $2, $2 \
             FROM UNNEST($3::uuid[]) AS id",
        )
        .bind(project)
        .bind(now + done as i64)
        .bind(&ids)
        .execute(&pool)
        .await?;
        done += batch;
    }
    sqlx::query("ANALYZE users").execute(&pool).await?;
    pool.close().await;
    println!(
        "  distributed  bulk-inserted {n} users in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A webhook receiver on loopback that counts what it is sent.
pub struct Receiver {
    pub url: String,
    received: Arc<AtomicU64>,
    /// When the latest delivery arrived.
    last: Arc<std::sync::Mutex<std::time::Instant>>,
}

impl Receiver {
    async fn start() -> anyhow::Result<Self> {
        let received = Arc::new(AtomicU64::new(0));
        let last = Arc::new(std::sync::Mutex::new(std::time::Instant::now()));
        let (counter, stamp) = (received.clone(), last.clone());
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move || {
                counter.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut at) = stamp.lock() {
                    *at = std::time::Instant::now();
                }
                async { axum::http::StatusCode::NO_CONTENT }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Self {
            url,
            received,
            last,
        })
    }

    pub fn count(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// When the latest delivery arrived.
    pub fn last_arrival(&self) -> std::time::Instant {
        self.last
            .lock()
            .map_or_else(|_| std::time::Instant::now(), |at| *at)
    }

    /// Waits until deliveries stop arriving for a second (at most `within`).
    pub async fn settle(&self, within: Duration) {
        let deadline = std::time::Instant::now() + within;
        let mut last = u64::MAX;
        while self.count() != last && std::time::Instant::now() < deadline {
            last = self.count();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}
