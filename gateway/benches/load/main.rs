//! Load benchmark: drives realistic traffic through the gateway of the distributed stack and of
//! the embedded system and prints, in one run, each scenario's throughput and latency next to
//! the machine's own limits (a bare handler on the same stack, raw argon2id verifications, one
//! ES256 verification), the target ratios, and each component's resident memory after two
//! identical rounds.
//!
//!   cargo bench -p latchkey-gateway --bench load
//!   cargo bench -p latchkey-gateway --bench load -- --seconds 10 --concurrency 32 --users 1000000
//!
//! Needs the servers of the test command's setup (`deploy/local-services.sh`).

mod drive;
mod limits;
mod seed;
mod stack;

use std::time::Duration;

use drive::{expect, Stats};
use reqwest::Method;
use serde_json::json;
use stack::Stack;

struct Args {
    seconds: u64,
    concurrency: usize,
    users: usize,
    teams: usize,
    /// Users for the large-list comparison (0: skipped).
    large_users: usize,
}

impl Args {
    fn parse() -> Self {
        let args: Vec<String> = std::env::args().collect();
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .and_then(|v| v.parse::<u64>().ok())
        };
        Self {
            seconds: value("--seconds").unwrap_or(5),
            concurrency: value("--concurrency").map_or(16, |c| c as usize),
            users: 10_000,
            teams: value("--teams").map_or(1_000, |t| t as usize),
            large_users: value("--users").map_or(0, |u| u as usize),
        }
    }
}

/// Resident memory per component after round one and (distributed) round two.
type Memory = (&'static str, Vec<(String, f64)>, Vec<(String, f64)>);

/// One row of the table.
struct Row {
    mode: &'static str,
    scenario: String,
    stats: Stats,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let duration = Duration::from_secs(args.seconds);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "Latchkey load benchmark: {cores} cores, {} s per scenario, {} workers, {} users and {} teams seeded",
        args.seconds, args.concurrency, args.users, args.teams
    );

    let machine = limits::measure(duration).await?;
    let mut rows = Vec::new();
    let mut memory: Vec<Memory> = Vec::new();

    // Embedded first, then distributed (two identical rounds, for memory growth).
    let embedded = Stack::embedded().await?;
    let fixtures = seed::seed(&embedded, args.users, args.teams).await?;
    rows.extend(round(&embedded, &fixtures, &args, duration).await);
    memory.push(("embedded", embedded.rss(), Vec::new()));
    embedded.stop().await?;

    let distributed = Stack::distributed().await?;
    let fixtures = seed::seed(&distributed, args.users, args.teams).await?;
    rows.extend(round(&distributed, &fixtures, &args, duration).await);
    let after_first = distributed.rss();
    let _second = round(&distributed, &fixtures, &args, duration).await;
    let after_second = distributed.rss();
    memory.push(("distributed", after_first, after_second));

    let large = if args.large_users > args.users {
        let url = distributed
            .auth_db_url()
            .ok_or_else(|| anyhow::anyhow!("no auth database"))?;
        seed::bulk_users(
            url,
            &distributed.keys.project_id,
            args.large_users - args.users,
        )
        .await?;
        let stats = users_list(&distributed, args.concurrency, duration).await;
        rows.push(Row {
            mode: "distributed",
            scenario: format!("GET /users?limit=100 at {} users", args.large_users),
            stats: stats.clone(),
        });
        Some(stats)
    } else {
        None
    };
    distributed.stop().await?;

    report(&machine, &rows, large.as_ref(), &memory, &args);
    Ok(())
}

/// Every scenario once against `stack`.
async fn round(stack: &Stack, f: &seed::Fixtures, args: &Args, duration: Duration) -> Vec<Row> {
    let c = args.concurrency;
    let mode = stack.mode;
    let mut rows = Vec::new();
    let mut add = |scenario: &str, stats: Stats| {
        println!(
            "  {mode:<12} {scenario:<46} {:>9.1}/s  p50 {:>7.2} ms  p99 {:>7.2} ms  {} errors",
            stats.per_second, stats.p50_ms, stats.p99_ms, stats.errors
        );
        rows.push(Row {
            mode,
            scenario: scenario.to_owned(),
            stats,
        });
    };

    let http = stack.http.clone();
    let live = format!("{}/health/live", stack.base);
    add(
        "bare handler GET /health/live",
        drive::run(c, duration, move |_| expect(http.get(&live), 200)).await,
    );
    add(
        "GET /users/me",
        me(stack, &f.reader_access, c, duration).await,
    );

    let refresh = stack
        .req("client", Method::POST, "/auth/sessions/current/refresh")
        .header("x-service-refresh-token", &f.reader_refresh);
    add(
        "POST /auth/sessions/current/refresh",
        drive::run(c, duration, move |_| {
            let r = refresh.try_clone();
            async move {
                match r {
                    Some(r) => expect(r, 200).await,
                    None => false,
                }
            }
        })
        .await,
    );

    add(
        "POST /auth/password/sign-in",
        sign_ins(stack, &f.signers, c, duration).await,
    );
    // `GET /users/me` while sign-ins keep the hash pool saturated.
    let (under, _) = tokio::join!(
        me(stack, &f.reader_access, c, duration),
        sign_ins(stack, &f.signers, c, duration)
    );
    add("GET /users/me while sign-ins saturate argon2", under);

    add(
        "GET /users?limit=100 by cursor",
        users_list(stack, c, duration).await,
    );

    let profiles = stack.req(
        "server",
        Method::GET,
        &format!("/team-member-profiles?team_id={}", f.big_team),
    );
    add(
        &format!("GET /team-member-profiles ({} members)", seed::BIG_TEAM),
        drive::run(c, duration, move |_| {
            let r = profiles.try_clone();
            async move {
                match r {
                    Some(r) => expect(r, 200).await,
                    None => false,
                }
            }
        })
        .await,
    );

    let before = f.receiver.count();
    let started = std::time::Instant::now();
    let create = stack.req("server", Method::POST, "/teams");
    let creator = f.reader_id.clone();
    let created = drive::run(c, duration, move |i| {
        let r = create.try_clone().map(|r| {
            r.json(&json!({ "display_name": format!("bench {i}"), "creator_user_id": creator }))
        });
        async move {
            match r {
                Some(r) => expect(r, 201).await,
                None => false,
            }
        }
    })
    .await;
    add("POST /teams with creator (writes + outbox)", created);
    // Every creation emits team, membership and permission events, each delivered once; the
    // rate is what reached the receiver from the first creation to the last delivery.
    f.receiver.settle(Duration::from_secs(120)).await;
    let delivered = f.receiver.count() - before;
    let elapsed = f
        .receiver
        .last_arrival()
        .duration_since(started)
        .as_secs_f64();
    add(
        "webhook deliveries to a loopback receiver",
        Stats {
            per_second: delivered as f64 / elapsed.max(f64::EPSILON),
            p50_ms: f64::NAN,
            p99_ms: f64::NAN,
            errors: 0,
        },
    );
    rows
}

async fn me(stack: &Stack, access: &str, c: usize, duration: Duration) -> Stats {
    let request = stack
        .req("client", Method::GET, "/users/me")
        .header("x-service-access-token", access);
    drive::run(c, duration, move |_| {
        let r = request.try_clone();
        async move {
            match r {
                Some(r) => expect(r, 200).await,
                None => false,
            }
        }
    })
    .await
}

async fn sign_ins(stack: &Stack, signers: &[String], c: usize, duration: Duration) -> Stats {
    let request = stack.req("client", Method::POST, "/auth/password/sign-in");
    let signers = signers.to_vec();
    drive::run(c, duration, move |i| {
        let email = &signers[i % signers.len()];
        let r = request
            .try_clone()
            .map(|r| r.json(&json!({ "email": email, "password": seed::PASSWORD })));
        async move {
            match r {
                Some(r) => expect(r, 200).await,
                None => false,
            }
        }
    })
    .await
}

/// Pages through the users 100 at a time, each worker following its own cursor.
async fn users_list(stack: &Stack, c: usize, duration: Duration) -> Stats {
    let first = stack.req("server", Method::GET, "/users?limit=100");
    let cursors: std::sync::Arc<Vec<std::sync::Mutex<Option<String>>>> =
        std::sync::Arc::new((0..c).map(|_| std::sync::Mutex::new(None)).collect());
    drive::run(c, duration, move |i| {
        let slot = i % c;
        let cursor = cursors[slot].lock().ok().and_then(|g| g.clone());
        let r = first.try_clone().map(|r| match &cursor {
            Some(cursor) => r.query(&[("cursor", cursor)]),
            None => r,
        });
        let cursors = cursors.clone();
        async move {
            let Some(r) = r else { return false };
            let Ok(res) = r.send().await else {
                return false;
            };
            if res.status() != 200 {
                return false;
            }
            let body: serde_json::Value = res.json().await.unwrap_or_default();
            let next = body["pagination"]["next_cursor"]
                .as_str()
                .map(str::to_owned);
            if let Ok(mut g) = cursors[slot].lock() {
                *g = next;
            }
            true
        }
    })
    .await
}

fn report(
    machine: &limits::Machine,
    rows: &[Row],
    large: Option<&Stats>,
    memory: &[Memory],
    args: &Args,
) {
    println!();
    println!("| mode | scenario | req/s | p50 ms | p99 ms | errors |");
    println!("|---|---|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {:.1} | {:.2} | {:.2} | {} |",
            r.mode, r.scenario, r.stats.per_second, r.stats.p50_ms, r.stats.p99_ms, r.stats.errors
        );
    }
    println!();
    println!("Machine limits (same run):");
    println!(
        "  raw argon2id verifications: {:.1}/s ({} lanes, m=19456 KiB, t=2, p=1)",
        machine.argon2_per_second, machine.lanes
    );
    println!(
        "  one ES256 verification:     {:.1} µs",
        machine.es256_micros
    );

    let find = |mode: &str, scenario: &str| {
        rows.iter()
            .find(|r| r.mode == mode && r.scenario == scenario)
            .map(|r| r.stats.clone())
            .unwrap_or_default()
    };
    let mut targets = Vec::new();
    for mode in ["distributed", "embedded"] {
        let sign_in = find(mode, "POST /auth/password/sign-in");
        targets.push((
            format!("{mode}: sign-ins / raw argon2id"),
            sign_in.per_second / machine.argon2_per_second,
            ">=",
            0.90,
        ));
        let me = find(mode, "GET /users/me");
        let bare = find(mode, "bare handler GET /health/live");
        targets.push((
            format!("{mode}: GET /users/me / bare handler"),
            me.per_second / bare.per_second,
            ">=",
            0.15,
        ));
        let under = find(mode, "GET /users/me while sign-ins saturate argon2");
        targets.push((
            format!("{mode}: /users/me p99 under sign-ins / alone"),
            under.p99_ms / me.p99_ms,
            "<=",
            2.0,
        ));
    }
    let list = find("distributed", "GET /users?limit=100 by cursor");
    if let Some(large) = large {
        targets.push((
            format!("users list p50 at {} / at {}", args.large_users, args.users),
            large.p50_ms / list.p50_ms,
            "<=",
            1.5,
        ));
    }
    targets.push((
        "GET /users/me p50 distributed / embedded".to_owned(),
        find("distributed", "GET /users/me").p50_ms / find("embedded", "GET /users/me").p50_ms,
        "<=",
        1.5,
    ));
    println!();
    println!("Targets (ratios in this run):");
    for (name, value, op, bound) in targets {
        let holds = if op == ">=" {
            value >= bound
        } else {
            value <= bound
        };
        println!(
            "  {name:<52} {value:>6.2}  ({op} {bound})  {}",
            if holds { "holds" } else { "MISSES" }
        );
    }
    if large.is_none() {
        println!("  users list p50 at 1,000,000 users: run with `-- --users 1000000`");
    }
    println!();
    println!("Resident memory (MiB) after round 1 / round 2 / growth:");
    for (mode, first, second) in memory {
        for (i, (name, mib)) in first.iter().enumerate() {
            match second.get(i) {
                Some((_, after)) => println!(
                    "  {mode:<12} {name:<26} {mib:>7.1} / {after:>7.1} / {:>+5.1}%",
                    100.0 * (after - mib) / mib
                ),
                None => println!("  {mode:<12} {name:<26} {mib:>7.1}"),
            }
        }
    }
}
