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

/// A search text that only one user's address holds (the rare substring).
pub const RARE_TEXT: &str = "rare.bench";
/// A search text every seeded and bulk address starts with (the common prefix).
pub const COMMON_TEXT: &str = "user";

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

    futures::stream::iter(0..users.saturating_sub(SIGNERS + 1))
        .map(|i| {
            // One address holds the rare text, halfway through the list.
            let address = if i == users / 2 {
                format!("user{i}@{RARE_TEXT}.test")
            } else {
                format!("user{i}@bench.test")
            };
            let r = stack
                .req("server", Method::POST, "/users")
                .json(&json!({ "primary_email": address, "display_name": format!("User {i}") }));
            async move { json_of(r, 201).await }
        })
        .buffer_unordered(PARALLEL)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;

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
    // The first page of the list: members of the big team, each with it selected, so that page
    // and the team's page both show selected teams.
    let first_page = json_of(
        stack.req("server", Method::GET, &format!("/users?limit={BIG_TEAM}")),
        200,
    )
    .await?;
    let first: Vec<String> = first_page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| u["id"].as_str().map(str::to_owned))
        .collect();
    futures::stream::iter(first.iter())
        .map(|user| {
            let join = stack.req(
                "server",
                Method::POST,
                &format!("/team-memberships/{big_team}/{user}"),
            );
            let select = stack
                .req("server", Method::PATCH, &format!("/users/{user}"))
                .json(&json!({ "selected_team_id": big_team }));
            async move {
                json_of(join.json(&json!({})), 201).await?;
                json_of(select, 200).await
            }
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

/// Adds `n` users with an address each (`user<i>@bulk.bench.test`) straight into the auth and
/// contacts databases, as the services would have written them: ids minted from their sign-up
/// instant, after every seeded user.
pub async fn bulk_users(stack: &Stack, n: usize) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let project = uuid::Uuid::parse_str(&stack.keys.project_id)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    // Users one millisecond apart, each with its primary address.
    let rows = |from: usize, count: usize| -> Vec<(uuid::Uuid, uuid::Uuid, i64, String)> {
        (from..from + count)
            .map(|i| {
                let at = now + 1_000 + i as i64;
                let id = uuid::Builder::from_unix_timestamp_millis(at as u64, &rand::random())
                    .into_uuid();
                (
                    id,
                    uuid::Uuid::new_v4(),
                    at,
                    format!("user{i}@bulk.bench.test"),
                )
            })
            .collect()
    };
    let auth = stack.database_url("auth");
    let contacts = stack.database_url("contacts");
    const BATCH: usize = 20_000;
    if auth.starts_with("postgres") {
        let users = sqlx::PgPool::connect(&auth).await?;
        let channels = sqlx::PgPool::connect(&contacts).await?;
        let mut done = 0;
        while done < n {
            let batch = rows(done, (n - done).min(BATCH));
            let ids: Vec<uuid::Uuid> = batch.iter().map(|r| r.0).collect();
            let channel_ids: Vec<uuid::Uuid> = batch.iter().map(|r| r.1).collect();
            let at: Vec<i64> = batch.iter().map(|r| r.2).collect();
            let values: Vec<String> = batch.iter().map(|r| r.3.clone()).collect();
            sqlx::query(
                "INSERT INTO users (project_id, id, client_metadata, client_read_only_metadata, \
                 server_metadata, otp_auth_enabled, restricted_by_admin, risk_score_bot, \
                 risk_score_free_trial_abuse, signed_up_at_millis, last_active_at_millis) \
                 SELECT $1, id, 'null', 'null', 'null', false, false, 0, 0, at, at \
                 FROM UNNEST($2::uuid[], $3::bigint[]) AS u(id, at)",
            )
            .bind(project)
            .bind(&ids)
            .bind(&at)
            .execute(&users)
            .await?;
            sqlx::query(
                "INSERT INTO channels (project_id, id, user_id, value, used_for_auth, is_verified, \
                 is_primary, created_at_millis) \
                 SELECT $1, id, user_id, value, true, false, true, at \
                 FROM UNNEST($2::uuid[], $3::uuid[], $4::text[], $5::bigint[]) AS c(id, user_id, value, at)",
            )
            .bind(project)
            .bind(&channel_ids)
            .bind(&ids)
            .bind(&values)
            .bind(&at)
            .execute(&channels)
            .await?;
            done += batch.len();
        }
        // As a database that has been running for a while: statistics and visibility maps up to
        // date.
        for pool in [&users, &channels] {
            sqlx::query("VACUUM ANALYZE").execute(pool).await?;
            pool.close().await;
        }
    } else {
        let users = sqlx::SqlitePool::connect(&auth).await?;
        let channels = sqlx::SqlitePool::connect(&contacts).await?;
        let mut done = 0;
        while done < n {
            let batch = rows(done, (n - done).min(BATCH));
            let mut tx = users.begin().await?;
            for (id, _, at, _) in &batch {
                sqlx::query(
                    "INSERT INTO users (project_id, id, client_metadata, client_read_only_metadata, \
                     server_metadata, otp_auth_enabled, restricted_by_admin, risk_score_bot, \
                     risk_score_free_trial_abuse, signed_up_at_millis, last_active_at_millis) \
                     VALUES ($1, $2, 'null', 'null', 'null', false, false, 0, 0, $3, $3)",
                )
                .bind(project)
                .bind(id)
                .bind(at)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            let mut tx = channels.begin().await?;
            for (id, channel, at, value) in &batch {
                sqlx::query(
                    "INSERT INTO channels (project_id, id, user_id, value, used_for_auth, \
                     is_verified, is_primary, created_at_millis) \
                     VALUES ($1, $2, $3, $4, true, false, true, $5)",
                )
                .bind(project)
                .bind(channel)
                .bind(id)
                .bind(value)
                .bind(at)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            done += batch.len();
        }
        for pool in [&users, &channels] {
            sqlx::query("ANALYZE").execute(pool).await?;
            pool.close().await;
        }
    }
    println!(
        "  {:<12} bulk-inserted {n} users with addresses in {:.1} s",
        stack.mode,
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
