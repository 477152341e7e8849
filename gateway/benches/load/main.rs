//! Load benchmark: drives realistic traffic through the gateway of the embedded system and of
//! the distributed stack, each in processes of their own, from a lean HTTP/1.1 load generator
//! in this process, and prints in one run each scenario's throughput and latency next to the
//! machine's own limits (a bare axum JSON handler in a process of its own, raw argon2id
//! verifications on every core, one ES256 verification), the target ratios, the hashing lanes'
//! idle time under a sign-in flood, each component's resident memory, where the machine's
//! CPU went per request in the hot scenarios, and the least the distributed `/users/me` could
//! cost here (`floor`).
//!
//!   cargo bench -p latchkey-gateway --bench load
//!   cargo bench -p latchkey-gateway --bench load -- --seconds 10 --concurrency 32 --users 1000000
//!
//! The distributed stack's components get the cores their Kubernetes manifests give them
//! (`k8s/base`: a CPU limit of 500m or 1 is one core for the async runtime, 2 is two), as they
//! run when deployed; `-- --cpus machine` lets every component use every core instead.
//!
//! Needs the servers of the test command's setup (`deploy/local-services.sh`).

mod cpu;
mod drive;
mod floor;
mod limits;
mod seed;
mod stack;

use std::sync::Arc;
use std::time::Duration;

use drive::{expect, http_request, Stats};
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
    /// The systems to run (`--mode embedded` or `--mode distributed`; both by default).
    modes: Vec<&'static str>,
    /// Only the hot paths (`--hot`: `/users/me`, refresh, sign-in, `/users/me` under a
    /// sign-in flood), for profiling one change at a time.
    hot: bool,
    /// The cores each distributed component may use: as its manifest's CPU limit gives it
    /// (default), or every core of the machine (`--cpus machine`).
    cpus: stack::Cpus,
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
            modes: match args
                .iter()
                .position(|a| a == "--mode")
                .map(|i| args.get(i + 1))
            {
                Some(Some(m)) if m == "embedded" => vec!["embedded"],
                Some(Some(m)) if m == "distributed" => vec!["distributed"],
                _ => vec!["embedded", "distributed"],
            },
            hot: args.iter().any(|a| a == "--hot"),
            cpus: match args
                .iter()
                .position(|a| a == "--cpus")
                .and_then(|i| args.get(i + 1))
            {
                Some(c) if c == "machine" => stack::Cpus::Machine,
                _ => stack::Cpus::Manifests,
            },
        }
    }
}

/// One row of the table.
struct Row {
    mode: &'static str,
    scenario: String,
    stats: Stats,
}

/// What one mode measured besides the table.
#[derive(Default)]
struct ModeFigures {
    /// Share of the hashing lanes' time spent waiting for work during the sign-in flood.
    lanes_idle: f64,
    /// Hashes run at normal priority because the lanes were starved, during `/users/me` under
    /// a sign-in flood.
    escalations: f64,
    /// Raw argon2id verifications per second measured right before and right after this
    /// mode's sign-in flood. Their mean is the denominator of its sign-in ratio: this machine's
    /// rate drifts by 15 % over minutes, and a drift across the flood cancels out of a mean of
    /// both sides where one side alone would carry it into the ratio.
    argon2_around: (f64, f64),
    /// CPU per raw verification of those two measurements (this process's, by part).
    argon2_cpu: Vec<cpu::PerRequest>,
    /// Resident memory per component after the run (MiB).
    memory: Vec<(String, f64)>,
    /// CPU per request of the hot scenarios, by part of the machine.
    cpu: Vec<(String, cpu::PerRequest)>,
}

/// The users-list variants measured at 10,000 users and again at `--users`.
const LIST_VARIANTS: [&str; 6] = [
    "plain (first page, selected teams)",
    "desc=true",
    "team_id (100 members, selected teams)",
    "query= common prefix",
    "query= rare substring",
    "plain by cursor (paging on)",
];

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    // Drives one recorded request at an address for five seconds (to compare the load
    // generator with others on the same system): `--drive ADDR FILE`.
    if let Some(i) = args.iter().position(|a| a == "--drive") {
        let addr = args.get(i + 1).cloned().unwrap_or_default().parse()?;
        let request = std::fs::read(args.get(i + 2).cloned().unwrap_or_default())?;
        let stats = drive::blast(addr, 16, Duration::from_secs(5), same(request), 200)
            .join()
            .unwrap_or_default();
        print_row("drive", "recorded request", &stats);
        return Ok(());
    }
    if let Some(i) = args.iter().position(|a| a == "--bare-handler") {
        let addr = args.get(i + 1).cloned().unwrap_or_default();
        return stack::serve_bare(&addr);
    }
    if let Some(i) = args.iter().position(|a| a == "--bare-grpc") {
        let addr = args.get(i + 1).cloned().unwrap_or_default();
        return floor::serve_bare_grpc(&addr);
    }
    tokio::runtime::Runtime::new()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    let duration = Duration::from_secs(args.seconds);
    let cores = cores();
    println!(
        "Latchkey load benchmark: {cores} cores, {} s per scenario, {} connections, {} users and {} teams seeded",
        args.seconds, args.concurrency, args.users, args.teams
    );

    let machine = limits::measure(duration).await?;
    let bare = stack::Bare::start().await?;
    let request = http_request("GET", "/", &[], None);
    let meter = cpu::Meter::new(&[("bare handler".into(), bare.pid())]);
    let from = meter.read();
    let bare_stats = drive::blast(bare.addr, args.concurrency, duration, same(request), 200)
        .join()
        .unwrap_or_default();
    let bare_cpu = meter.per_request(&from, &meter.read(), bare_stats.per_second);
    bare.stop();
    print_row(
        "machine",
        "bare axum JSON handler (own process)",
        &bare_stats,
    );

    let floor = match args.modes.contains(&"distributed") {
        true => Some(floor::measure(args.concurrency, duration).await?),
        false => None,
    };

    let mut rows = vec![Row {
        mode: "machine",
        scenario: "bare axum JSON handler (own process)".into(),
        stats: bare_stats,
    }];
    let mut figures = Vec::new();
    for &mode in &args.modes {
        let stack = match mode {
            "embedded" => Stack::embedded().await?,
            _ => Stack::distributed(args.cpus).await?,
        };
        let fixtures = seed::seed(&stack, args.users, args.teams).await?;
        let (mode_rows, mut mode_figures) = round(&stack, &fixtures, &args, duration).await;
        rows.extend(mode_rows);
        if args.hot {
            mode_figures.memory = stack.rss();
            figures.push((stack.mode, mode_figures));
            stack.stop().await?;
            continue;
        }
        rows.extend(
            users_lists(
                &stack,
                &fixtures,
                &args,
                duration,
                &format!("at {}", args.users),
            )
            .await,
        );
        if args.large_users > args.users {
            seed::bulk_users(&stack, args.large_users - args.users).await?;
            rows.extend(
                users_lists(
                    &stack,
                    &fixtures,
                    &args,
                    duration,
                    &format!("at {}", args.large_users),
                )
                .await,
            );
        }
        mode_figures.memory = stack.rss();
        figures.push((stack.mode, mode_figures));
        stack.stop().await?;
    }

    report(&machine, &rows, &figures, &args, cores);
    report_cpu(&bare_cpu, &figures);
    if let Some(floor) = floor {
        report_floor(&floor, &bare_cpu, &figures);
    }
    Ok(())
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Prints a scenario's figures as they come and keeps them for the summary.
fn record(rows: &mut Vec<Row>, mode: &'static str, scenario: &str, stats: Stats) {
    print_row(mode, scenario, &stats);
    rows.push(Row {
        mode,
        scenario: scenario.to_owned(),
        stats,
    });
}

fn print_row(mode: &str, scenario: &str, stats: &Stats) {
    println!(
        "  {mode:<12} {scenario:<46} {:>9.1}/s  p50 {:>7.2} ms  p99 {:>7.2} ms  {} errors",
        stats.per_second, stats.p50_ms, stats.p99_ms, stats.errors
    );
}

/// The headers of a request as `access` (client, server or admin) of the stack's project.
fn access_headers(stack: &Stack, access: &str) -> Vec<(&'static str, String)> {
    let k = &stack.keys;
    let (header, key) = match access {
        "client" => ("x-service-publishable-client-key", &k.client_key),
        "server" => ("x-service-secret-server-key", &k.server_key),
        _ => ("x-service-super-secret-admin-key", &k.admin_key),
    };
    vec![
        ("x-service-access-type", access.to_owned()),
        ("x-service-project-id", k.project_id.clone()),
        (header, key.clone()),
    ]
}

/// One request rendered for the load generator.
fn rendered(
    stack: &Stack,
    access: &str,
    method: &str,
    path: &str,
    extra: &[(&'static str, String)],
    body: Option<&str>,
) -> Vec<u8> {
    let mut headers = access_headers(stack, access);
    headers.extend(extra.iter().cloned());
    let borrowed: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    http_request(method, &format!("/api/v1{path}"), &borrowed, body)
}

/// The same request over and over.
fn same(request: Vec<u8>) -> drive::Requests {
    Arc::new(move |_| request.clone())
}

/// Sign-ins cycling through the seeded signers.
fn sign_ins(stack: &Stack, signers: &[String]) -> drive::Requests {
    let requests: Vec<Vec<u8>> = signers
        .iter()
        .map(|email| {
            let body = json!({ "email": email, "password": seed::PASSWORD }).to_string();
            rendered(
                stack,
                "client",
                "POST",
                "/auth/password/sign-in",
                &[],
                Some(&body),
            )
        })
        .collect();
    Arc::new(move |i| requests[i % requests.len()].clone())
}

/// The value of auth's series `name` whose line contains `labels` (0 when absent).
async fn auth_metric(stack: &Stack, name: &str, labels: &str) -> f64 {
    let text = stack.metrics("auth").await;
    text.lines()
        .find(|l| l.starts_with(name) && l.contains(labels))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// Seconds the hashing lanes have spent busy.
async fn lane_busy_seconds(stack: &Stack) -> f64 {
    auth_metric(
        stack,
        "latchkey_password_lane_seconds_total",
        "state=\"busy\"",
    )
    .await
}

/// Hashes run at normal priority because the lanes were starved.
async fn escalations(stack: &Stack) -> f64 {
    auth_metric(stack, "latchkey_password_hash_escalations_total", "").await
}

/// Every scenario once against `stack`.
async fn round(
    stack: &Stack,
    f: &seed::Fixtures,
    args: &Args,
    duration: Duration,
) -> (Vec<Row>, ModeFigures) {
    let c = args.concurrency;
    let mode = stack.mode;
    let mut rows = Vec::new();
    let mut figures = ModeFigures::default();
    let mut add = |scenario: &str, stats: Stats| record(&mut rows, mode, scenario, stats);
    let me = rendered(
        stack,
        "client",
        "GET",
        "/users/me",
        &[("x-service-access-token", f.reader_access.clone())],
        None,
    );
    let blast = |requests: drive::Requests, expect: u16| {
        drive::blast(stack.addr, c, duration, requests, expect)
            .join()
            .unwrap_or_default()
    };
    // The hot scenarios' CPU per request, by part of the machine.
    let meter = cpu::Meter::new(&stack.processes());
    let metered = |scenario: &str, figures: &mut ModeFigures, requests, expect| {
        let from = meter.read();
        let stats: Stats = blast(requests, expect);
        let spent = meter.per_request(&from, &meter.read(), stats.per_second);
        figures.cpu.push((scenario.to_owned(), spent));
        stats
    };
    add(
        "GET /users/me",
        metered("GET /users/me", &mut figures, same(me.clone()), 200),
    );
    let refresh = rendered(
        stack,
        "client",
        "POST",
        "/auth/sessions/current/refresh",
        &[("x-service-refresh-token", f.reader_refresh.clone())],
        None,
    );
    add(
        "POST /auth/sessions/current/refresh",
        metered(
            "POST /auth/sessions/current/refresh",
            &mut figures,
            same(refresh),
            200,
        ),
    );

    let raw_argon2 = || async {
        limits::argon2_per_second(duration)
            .await
            .unwrap_or((f64::NAN, cpu::PerRequest::default()))
    };
    let (before, before_cpu) = raw_argon2().await;
    // The lanes' idle share: of the wall time the flood lasted on every lane, what they did not
    // spend hashing (auth runs one lane per core).
    let busy_before = lane_busy_seconds(stack).await;
    let flood_started = std::time::Instant::now();
    add(
        "POST /auth/password/sign-in",
        metered(
            "POST /auth/password/sign-in",
            &mut figures,
            sign_ins(stack, &f.signers),
            200,
        ),
    );
    let lane_time = flood_started.elapsed().as_secs_f64() * cores() as f64;
    let busy = lane_busy_seconds(stack).await - busy_before;
    figures.lanes_idle = (1.0 - busy / lane_time.max(f64::EPSILON)).max(0.0);
    let (after, after_cpu) = raw_argon2().await;
    figures.argon2_around = (before, after);
    figures.argon2_cpu = vec![before_cpu, after_cpu];

    // `GET /users/me` while sign-ins keep the hash pool saturated, each from its own generator.
    let escalated_before = escalations(stack).await;
    let flood = drive::blast(stack.addr, c, duration, sign_ins(stack, &f.signers), 200);
    let under = drive::blast(stack.addr, c, duration, same(me), 200)
        .join()
        .unwrap_or_default();
    let _ = flood.join();
    figures.escalations = escalations(stack).await - escalated_before;
    add("GET /users/me while sign-ins saturate argon2", under);
    if args.hot {
        return (rows, figures);
    }

    let profiles = rendered(
        stack,
        "server",
        "GET",
        &format!("/team-member-profiles?team_id={}", f.big_team),
        &[],
        None,
    );
    add(
        &format!("GET /team-member-profiles ({} members)", seed::BIG_TEAM),
        blast(same(profiles), 200),
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
    (rows, figures)
}

/// The users-list variants, one page of 100 each (the plain list also paged through by cursor).
async fn users_lists(
    stack: &Stack,
    f: &seed::Fixtures,
    args: &Args,
    duration: Duration,
    at: &str,
) -> Vec<Row> {
    let page = |query: String| {
        rendered(
            stack,
            "server",
            "GET",
            &format!("/users?limit=100{query}"),
            &[],
            None,
        )
    };
    let variants = [
        page(String::new()),
        page("&desc=true".into()),
        page(format!("&team_id={}", f.big_team)),
        page(format!("&query={}", seed::COMMON_TEXT)),
        page(format!("&query={}", seed::RARE_TEXT)),
    ];
    let mut rows = Vec::new();
    for (name, request) in LIST_VARIANTS.iter().zip(variants) {
        let stats = drive::blast(stack.addr, args.concurrency, duration, same(request), 200)
            .join()
            .unwrap_or_default();
        record(
            &mut rows,
            stack.mode,
            &format!("GET /users {name} {at}"),
            stats,
        );
    }
    let stats = paging(stack, args.concurrency, duration).await;
    let paging_name = LIST_VARIANTS[5];
    record(
        &mut rows,
        stack.mode,
        &format!("GET /users {paging_name} {at}"),
        stats,
    );
    rows
}

/// Pages through the users 100 at a time, each worker following its own cursor.
async fn paging(stack: &Stack, c: usize, duration: Duration) -> Stats {
    let first = stack.req("server", Method::GET, "/users?limit=100");
    let cursors: Arc<Vec<std::sync::Mutex<Option<String>>>> =
        Arc::new((0..c).map(|_| std::sync::Mutex::new(None)).collect());
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
    figures: &[(&'static str, ModeFigures)],
    args: &Args,
    cores: usize,
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
    let bare = find("machine", "bare axum JSON handler (own process)");
    let mut targets: Vec<(String, f64, &str, f64)> = Vec::new();
    for (mode, fig) in figures {
        let me = find(mode, "GET /users/me");
        targets.push((
            format!("{mode}: GET /users/me / bare axum handler"),
            me.per_second / bare.per_second,
            ">=",
            if *mode == "embedded" { 0.15 } else { 0.10 },
        ));
        targets.push((
            format!(
                "{mode}: sign-ins / raw argon2id ({:.1}/s before, {:.1}/s after)",
                fig.argon2_around.0, fig.argon2_around.1
            ),
            find(mode, "POST /auth/password/sign-in").per_second
                / ((fig.argon2_around.0 + fig.argon2_around.1) / 2.0),
            ">=",
            0.90,
        ));
        targets.push((
            format!("{mode}: token refreshes/s per vCPU"),
            find(mode, "POST /auth/sessions/current/refresh").per_second / cores as f64,
            ">=",
            1_000.0,
        ));
        let under = find(mode, "GET /users/me while sign-ins saturate argon2");
        targets.push((
            format!("{mode}: /users/me p99 under sign-ins / alone"),
            under.p99_ms / me.p99_ms,
            "<=",
            2.0,
        ));
        let auth_memory = fig
            .memory
            .iter()
            .find(|(name, _)| name.starts_with("auth") || name.starts_with("embedded"))
            .map_or(f64::NAN, |(_, mib)| *mib);
        targets.push((
            format!("{mode}: auth resident memory after the run (MiB)"),
            auth_memory,
            "<=",
            150.0,
        ));
        if args.large_users > args.users {
            for variant in LIST_VARIANTS {
                let small = find(mode, &format!("GET /users {variant} at {}", args.users));
                let large = find(
                    mode,
                    &format!("GET /users {variant} at {}", args.large_users),
                );
                targets.push((
                    format!(
                        "{mode}: users list {variant} p50 at {} / at {}",
                        args.large_users, args.users
                    ),
                    large.p50_ms / small.p50_ms,
                    "<=",
                    1.5,
                ));
            }
        }
    }
    println!();
    println!("Targets (ratios in this run):");
    for (name, value, op, bound) in targets {
        let holds = if op == ">=" {
            value >= bound
        } else {
            value <= bound
        };
        println!(
            "  {name:<78} {value:>8.2}  ({op} {bound})  {}",
            if holds { "holds" } else { "MISSES" }
        );
    }
    if args.large_users <= args.users {
        println!("  users list p50 at 1,000,000 users: run with `-- --users 1000000`");
    }
    println!();
    println!("Hashing lanes idle during the sign-in flood (share of their time):");
    for (mode, fig) in figures {
        println!("  {mode:<12} {:.1}%", 100.0 * fig.lanes_idle);
    }
    println!();
    println!("Hashes escalated to normal priority during /users/me under the sign-in flood:");
    for (mode, fig) in figures {
        println!("  {mode:<12} {:.0}", fig.escalations);
    }
    println!();
    println!("Resident memory after the run (MiB):");
    for (mode, fig) in figures {
        for (name, mib) in &fig.memory {
            println!("  {mode:<12} {name:<26} {mib:>7.1}");
        }
    }
}

/// The hot scenarios' CPU per request by part, and for sign-ins the factors their ratio to raw
/// argon2id is made of: the lanes' share of the machine's time during the flood (what a
/// sign-in's other work leaves them) over their share during the raw measurement, and a raw
/// verification's CPU over a sign-in's.
fn report_cpu(bare: &cpu::PerRequest, figures: &[(&'static str, ModeFigures)]) {
    println!();
    println!("CPU per request (µs), the machine's time split by where it went:");
    println!(
        "| mode | scenario | system (its processes) | hashing lanes | PostgreSQL | Redis | RabbitMQ | load generator | rest of machine | busy | idle |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let row = |mode: &str, scenario: &str, spent: &cpu::PerRequest| {
        let own = spent.system();
        let total = own.iter().fold(0.0, |t, (_, us)| t + us);
        let split = own
            .iter()
            .map(|(name, us)| format!("{name} {us:.0}"))
            .collect::<Vec<_>>()
            .join(", ");
        println!(
            "| {mode} | {scenario} | {total:.0} ({split}) | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            spent.lanes(),
            spent.of("PostgreSQL"),
            spent.of("Redis"),
            spent.of("RabbitMQ"),
            spent.of("load generator"),
            spent.rest,
            spent.busy(),
            spent.idle
        );
    };
    row("machine", "bare axum JSON handler", bare);
    for (mode, fig) in figures {
        for (scenario, spent) in &fig.cpu {
            row(mode, scenario, spent);
        }
    }
    println!();
    println!("Sign-ins ÷ raw argon2id = (lanes' share of all CPU time during the flood ÷ during the raw measurement) × a raw verification's CPU ÷ a sign-in's lane CPU:");
    for (mode, fig) in figures {
        let Some((_, spent)) = fig.cpu.iter().find(|(s, _)| s.contains("sign-in")) else {
            continue;
        };
        let raw = &fig.argon2_cpu;
        let mean = |f: fn(&cpu::PerRequest) -> f64| {
            raw.iter().map(f).sum::<f64>() / raw.len().max(1) as f64
        };
        let raw_share = mean(cpu::PerRequest::lanes_share);
        let raw_micros = mean(cpu::PerRequest::lanes);
        let flood_share = spent.lanes_share();
        let speed = raw_micros / spent.lanes().max(f64::EPSILON);
        println!(
            "  {mode:<12} ({flood_share:.2} ÷ {raw_share:.2}) × {speed:.2} = {:.2}  (raw {raw_micros:.0} µs, sign-in {:.0} µs)",
            flood_share / raw_share * speed,
            spent.lanes()
        );
    }
}

/// The distributed `/users/me`'s floor next to what it spent: the row's target is out of reach
/// on this machine when even the floor is dearer than the target allows.
fn report_floor(
    floor: &floor::Floor,
    bare: &cpu::PerRequest,
    figures: &[(&'static str, ModeFigures)],
) {
    let http = bare.whole();
    let least = floor.users_me(http);
    println!();
    println!("Floor of the distributed GET /users/me on this machine (its fixed parts, each bare, CPU of both sides):");
    println!(
        "  bare HTTP request {http:.0} µs + {:.0} gRPC calls × {:.0} µs + {:.0} PostgreSQL reads × {:.0} µs = {least:.0} µs: at most {:.3} of the bare handler",
        floor::GRPC_CALLS,
        floor.grpc_call,
        floor::READS,
        floor.read,
        http / least
    );
    for (mode, fig) in figures.iter().filter(|(mode, _)| *mode == "distributed") {
        if let Some((_, spent)) = fig.cpu.iter().find(|(s, _)| s == "GET /users/me") {
            println!(
                "  {mode:<12} GET /users/me spent {:.0} µs ({:.1}× the floor)",
                spent.whole(),
                spent.whole() / least
            );
        }
    }
}
