//! Scaling out spreads the load (issue 16): every gRPC client balances per call over all ready
//! replicas of its target. Replicas listen on their own loopback addresses under one port, and
//! a name in the hosts file stands for them all, as a headless Service's DNS records do; adding
//! an address to the name adds a replica within the re-resolution period. Checked for gateway →
//! auth and for auth → contacts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use crate::helpers::{email, TestApp};
use crate::processes::{free_port, Replicated};

const PASSWORD: &str = "cedar-lattice-beacon-58";
const HOSTS: &str = "/etc/hosts";

/// A name in the hosts file for the test's lifetime; its lines are removed on drop. The file is
/// rewritten in place (not renamed), which works where it is a mount.
struct HostName {
    name: String,
}

impl HostName {
    fn new(ips: &[&str]) -> Self {
        let name = format!(
            "lk-{}.test",
            latchkey_shared::crypto::random_base32(10).to_lowercase()
        );
        let this = Self { name };
        for ip in ips {
            this.add(ip);
        }
        this
    }

    fn add(&self, ip: &str) {
        let mut text = std::fs::read_to_string(HOSTS).unwrap_or_default();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("{ip} {}\n", self.name));
        std::fs::write(HOSTS, text)
            .unwrap_or_else(|e| panic!("this test needs to write {HOSTS} (run as root): {e}"));
    }
}

impl Drop for HostName {
    fn drop(&mut self) {
        let text = std::fs::read_to_string(HOSTS).unwrap_or_default();
        let kept: String = text
            .lines()
            .filter(|l| !l.split_whitespace().any(|w| w == self.name))
            .map(|l| format!("{l}\n"))
            .collect();
        let _ = std::fs::write(HOSTS, kept);
    }
}

/// Calls of `method` a process has served, from its `/metrics`.
async fn served(metrics: &str, method: &str) -> u64 {
    let text = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap_or_else(|e| panic!("{metrics}: {e}"))
        .text()
        .await
        .unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("latchkey_grpc_requests_total{") && l.contains(method))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Per instance: how many calls of `method` it served (metrics address → count).
async fn counts(app: &TestApp, listens: &[String], method: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for l in listens {
        let metrics = app
            .metrics_of(l)
            .unwrap_or_else(|| panic!("no instance on {l}"));
        out.push(served(&metrics, method).await);
    }
    out
}

/// A copy of `read` for one more request.
fn again(read: &reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    read.try_clone()
        .unwrap_or_else(|| panic!("a GET can be sent again"))
}

/// Drives `total` reads with four workers; every answer must be 200.
async fn reads(read: &reqwest::RequestBuilder, total: usize) {
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let read = again(read);
            tokio::spawn(async move {
                for _ in 0..total / 4 {
                    let res = again(&read).send().await.unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(res.status(), 200, "{:?}", res.text().await);
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap_or_else(|e| panic!("{e}"));
    }
}

/// The share of the calls between `before` and `after` that each instance served.
fn shares(before: &[u64], after: &[u64]) -> Vec<f64> {
    let deltas: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    let total: u64 = deltas.iter().sum();
    deltas
        .iter()
        .map(|d| *d as f64 / total.max(1) as f64)
        .collect()
}

/// Sends 3,000 reads; the share of each auth instance's user reads and of each contacts
/// instance's channel look-ups among them.
async fn spread(
    app: &TestApp,
    read: &reqwest::RequestBuilder,
    auth: &[String],
    contacts: &[String],
) -> [(&'static str, Vec<f64>); 2] {
    const GET_USER: &str = "Users/GetUser\"";
    const LIST_CHANNELS: &str = "Contacts/ListChannels\"";
    let (a0, c0) = (
        counts(app, auth, GET_USER).await,
        counts(app, contacts, LIST_CHANNELS).await,
    );
    reads(read, 3000).await;
    let (a1, c1) = (
        counts(app, auth, GET_USER).await,
        counts(app, contacts, LIST_CHANNELS).await,
    );
    [("auth", shares(&a0, &a1)), ("contacts", shares(&c0, &c1))]
}

fn port_of(addr: &str) -> String {
    addr.rsplit(':').next().unwrap_or_default().to_owned()
}

/// What a load of four workers got while something happened to a replica.
#[derive(Default, Debug)]
struct Outcomes {
    ok: usize,
    unavailable: usize,
    other: Vec<String>,
}

/// Runs four workers sending `read` while `during` runs (and two seconds after); then what they
/// got.
async fn under_load<F: std::future::Future<Output = ()>>(
    read: &reqwest::RequestBuilder,
    during: F,
) -> Outcomes {
    let stop = Arc::new(AtomicBool::new(false));
    let worker = |stop: Arc<AtomicBool>, read: reqwest::RequestBuilder| async move {
        let mut got = Outcomes::default();
        while !stop.load(Ordering::Relaxed) {
            let res = again(&read).send().await;
            match res {
                Ok(r) if r.status() == 200 => got.ok += 1,
                Ok(r) if r.status() == 503 && r.headers().contains_key("retry-after") => {
                    got.unavailable += 1;
                }
                Ok(r) => got
                    .other
                    .push(format!("{} {:?}", r.status(), r.text().await)),
                Err(e) => got.other.push(e.to_string()),
            }
        }
        got
    };
    let workers: Vec<_> = (0..4)
        .map(|_| tokio::spawn(worker(stop.clone(), again(read))))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    during.await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Outcomes::default();
    for w in workers {
        let got = w.await.unwrap_or_else(|e| panic!("{e}"));
        all.ok += got.ok;
        all.unavailable += got.unavailable;
        all.other.extend(got.other);
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_spread_over_every_replica_and_follow_replicas_coming_and_going() {
    let (auth_port, contacts_port) = (port_of(&free_port()), port_of(&free_port()));
    let auth_ips = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];
    let contacts_ips = ["127.0.0.6", "127.0.0.7", "127.0.0.8"];
    let auth_name = HostName::new(&auth_ips);
    let contacts_name = HostName::new(&contacts_ips);
    let mut auth: Vec<String> = auth_ips
        .iter()
        .map(|ip| format!("{ip}:{auth_port}"))
        .collect();
    let mut contacts: Vec<String> = contacts_ips
        .iter()
        .map(|ip| format!("{ip}:{contacts_port}"))
        .collect();
    let mut app = TestApp::spawn_replicated(
        &[
            ("LATCHKEY_SHUTDOWN_DELAY_SECONDS", "1".into()),
            // The load comes from one address; this test measures spreading, not limits.
            ("LATCHKEY_RATE_LIMITS", "off".into()),
        ],
        &[
            Replicated {
                component: "auth",
                listen: auth.clone(),
                target: format!("{}:{auth_port}", auth_name.name),
            },
            Replicated {
                component: "contacts",
                listen: contacts.clone(),
                target: format!("{}:{contacts_port}", contacts_name.name),
            },
        ],
    )
    .await;
    let user = app.sign_up(&email("spread"), PASSWORD).await;
    let token = user.access.clone();
    let read = app.client(Method::GET, "/api/v1/users/me", Some(&token));

    // Three replicas each: every one serves a fair share of 3,000 reads (gateway → auth) and of
    // the channel look-ups they make (auth → contacts).
    for (what, share) in spread(&app, &read, &auth, &contacts).await {
        println!("{what} shares over three replicas: {share:?}");
        assert!(
            share.iter().all(|s| (0.25..=0.42).contains(s)),
            "{what}: {share:?}"
        );
    }

    // A fourth replica joins the name: within the re-resolution period it takes its share.
    for (name, list, component, ip, port) in [
        (&auth_name, &mut auth, "auth", "127.0.0.5", &auth_port),
        (
            &contacts_name,
            &mut contacts,
            "contacts",
            "127.0.0.9",
            &contacts_port,
        ),
    ] {
        let listen = format!("{ip}:{port}");
        app.add_instance(component, &listen).await;
        name.add(ip);
        list.push(listen);
    }
    tokio::time::sleep(latchkey_shared::grpc::balance::REFRESH + Duration::from_secs(2)).await;
    for (what, share) in spread(&app, &read, &auth, &contacts).await {
        println!("{what} shares over four replicas: {share:?}");
        assert!(share[3] >= 0.15, "{what}: the new replica got {share:?}");
    }

    // One replica of each stops gracefully under load: nothing fails.
    let (gone_auth, gone_contacts) = (auth.remove(0), contacts.remove(0));
    let got = under_load(&read, app.end_instance(&gone_auth, false)).await;
    println!("graceful stop of an auth replica under load: {got:?}");
    assert!(got.other.is_empty() && got.unavailable == 0, "{got:?}");
    let got = under_load(&read, app.end_instance(&gone_contacts, false)).await;
    println!("graceful stop of a contacts replica under load: {got:?}");
    assert!(got.other.is_empty() && got.unavailable == 0, "{got:?}");

    // One replica of each is killed under load: no 500 and no other failure; only calls that
    // were in flight on it may answer 503 with Retry-After.
    let (dead_auth, dead_contacts) = (auth.remove(0), contacts.remove(0));
    for dead in [dead_auth, dead_contacts] {
        let got = under_load(&read, app.end_instance(&dead, true)).await;
        println!("SIGKILL of {dead} under load: {got:?}");
        assert!(got.other.is_empty(), "{got:?}");
        assert!(
            got.unavailable <= 4,
            "more than the calls in flight failed: {got:?}"
        );
        assert!(got.ok > 0);
    }
    let me: Value = app
        .client(Method::GET, "/api/v1/users/me", Some(&token))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .json()
        .await
        .unwrap_or_default();
    assert_eq!(me["id"], user.user_id.as_str());
    app.finish().await;
}

/// Distinct client ports seen connected to `addr` in this network namespace's TCP table.
fn connections_to(addr: &str, seen: &mut std::collections::HashSet<String>) {
    let port = format!("{:04X}", port_of(addr).parse::<u16>().unwrap_or_default());
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    for line in table.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        // local, remote, state: a caller's end of an open connection to auth (01 = ESTABLISHED)
        // has auth's port as remote.
        if let [_, local, remote, state, ..] = cols[..] {
            if remote.ends_with(&format!(":{port}")) && state == "01" {
                seen.insert(local.to_owned());
            }
        }
    }
}

/// Services end each caller's connection when it reaches its age (GOAWAY), and callers move to
/// a new one without losing a call: with connections aged out every second, sustained reads and
/// writes through every hop all succeed. (Ending connections with tonic's grace period instead
/// cut them, calls in flight included, and failed such calls with 503.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aged_connections_are_replaced_without_failing_a_call() {
    let app = TestApp::spawn_distributed_with(&[
        ("LATCHKEY_GRPC_MAX_CONNECTION_AGE_SECONDS", "1".to_owned()),
        ("LATCHKEY_RATE_LIMITS", "off".to_owned()),
    ])
    .await;
    app.settings(serde_json::json!({"client_team_creation_enabled": true}))
        .await;
    let app = Arc::new(app);
    let auth = app.grpc_addr("auth");
    let stop = Arc::new(AtomicBool::new(false));
    // Every user signs up before any load starts: password hashing yields to request threads,
    // so a sign-up still hashing while the others' loops run can outlast its deadline on a
    // loaded machine, which is not what this test is about.
    let mut tokens = Vec::new();
    for w in 0..4 {
        tokens.push(
            app.sign_up(&email(&format!("aged{w}")), PASSWORD)
                .await
                .access,
        );
    }
    let workers: Vec<_> = tokens
        .into_iter()
        .map(|token| {
            let (app, stop) = (app.clone(), stop.clone());
            tokio::spawn(async move {
                let mut answered = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let me = app.client(Method::GET, "/api/v1/users/me", Some(&token));
                    let team = app
                        .client(Method::POST, "/api/v1/teams", Some(&token))
                        .json(&serde_json::json!({"display_name": format!("t{answered}")}));
                    for (what, request) in [("read", me), ("team", team)] {
                        let res = request.send().await.unwrap_or_else(|e| panic!("{e}"));
                        let status = res.status().as_u16();
                        let body = res.text().await.unwrap_or_default();
                        assert!(status < 300, "{what} #{answered}: {status} {body}");
                        answered += 1;
                    }
                }
                answered
            })
        })
        .collect();
    // The gateway, teams, contacts, webhooks and the test harness each hold one connection to
    // auth at a time; callers that keep calling through six or more ages open many more. On a
    // loaded machine an age's replacement waits for the caller's next call, so the watch runs
    // until enough replacements were seen rather than for a fixed time.
    let mut seen = std::collections::HashSet::new();
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(6)
        || (seen.len() < 12 && start.elapsed() < Duration::from_secs(60))
    {
        connections_to(&auth, &mut seen);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut answered = 0;
    for w in workers {
        answered += w
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", app.all_logs()));
    }
    assert!(answered > 100, "only {answered} answers");
    assert!(seen.len() >= 12, "{} connections to auth", seen.len());
}
