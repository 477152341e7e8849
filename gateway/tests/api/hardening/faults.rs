//! Dependency faults under load, against the distributed stack: PostgreSQL stopped and started,
//! RabbitMQ stopped and started, a service paused with SIGSTOP. These stop servers the whole
//! machine shares, so they run alone (`deploy/hardening.sh`).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::hardening::scale;
use crate::helpers::*;
use crate::receiver::Receiver;

/// One answered request of the load.
#[derive(Clone, Debug)]
struct Answer {
    started: Instant,
    took: Duration,
    status: u16,
    code: String,
    id: Option<String>,
}

/// Starts `workers` tasks that create teams and users until `stop` is set.
fn load(
    app: &TestApp,
    workers: usize,
    stop: Arc<AtomicBool>,
) -> (Arc<Mutex<Vec<Answer>>>, Vec<tokio::task::JoinHandle<()>>) {
    let answers = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (http, base, p) = (app.http.clone(), app.base.clone(), app.project.clone());
        let (answers, stop) = (answers.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let (path, body) = if i.is_multiple_of(2) {
                    (
                        "/api/v1/teams",
                        json!({ "display_name": format!("load {w}-{i}") }),
                    )
                } else {
                    (
                        "/api/v1/users",
                        json!({ "display_name": format!("load {w}-{i}") }),
                    )
                };
                let started = Instant::now();
                let res = http
                    .post(format!("{base}{path}"))
                    .header("x-service-access-type", "server")
                    .header("x-service-project-id", &p.id)
                    .header("x-service-secret-server-key", &p.server_key)
                    .timeout(Duration::from_secs(30))
                    .json(&body)
                    .send()
                    .await;
                let (status, body) = match res {
                    Ok(r) => (
                        r.status().as_u16(),
                        r.json::<Value>().await.unwrap_or_default(),
                    ),
                    Err(_) => (0, Value::Null),
                };
                let answer = Answer {
                    started,
                    took: started.elapsed(),
                    status,
                    code: body["code"].as_str().unwrap_or_default().to_owned(),
                    id: body["id"].as_str().map(|id| format!("{path}/{id}")),
                };
                if let Ok(mut all) = answers.lock() {
                    all.push(answer);
                }
                if status != 201 {
                    // Do not spin while a dependency is down.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }));
    }
    (answers, tasks)
}

fn percentile(mut xs: Vec<Duration>, p: f64) -> Duration {
    if xs.is_empty() {
        return Duration::ZERO;
    }
    xs.sort();
    xs[((xs.len() - 1) as f64 * p).round() as usize]
}

/// Starts the cluster again if a test fails while it is stopped.
struct PostgresBack;

impl Drop for PostgresBack {
    fn drop(&mut self) {
        latchkey_shared::testing::postgres_cluster("start");
    }
}

/// Every acknowledged write must be readable after the fault.
async fn lost_writes(app: &TestApp, answers: &[Answer]) -> (usize, Vec<String>) {
    let acknowledged: Vec<&String> = answers.iter().filter_map(|a| a.id.as_ref()).collect();
    let mut lost = Vec::new();
    for path in &acknowledged {
        let res = send(app.as_("server", Method::GET, path)).await;
        if res.status() != 200 {
            lost.push((*path).clone());
        }
    }
    (acknowledged.len(), lost)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "stops PostgreSQL; hardening tier: deploy/hardening.sh"]
async fn postgres_outage_fast_503_no_acknowledged_write_lost() {
    let mut app =
        TestApp::spawn_distributed_with(&[("LATCHKEY_RATE_LIMITS", "off".to_owned())]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let (answers, tasks) = load(&app, 6, stop.clone());
    let mut outages = Vec::new();
    for _ in 0..scale() {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let guard = PostgresBack;
        latchkey_shared::testing::postgres_cluster("stop");
        let down = Instant::now();
        // Long enough for every worker to see several 3 s answers inside the window.
        tokio::time::sleep(Duration::from_secs(12)).await;
        let up = Instant::now();
        drop(guard);
        outages.push((down, up, Instant::now()));
    }
    // Recovery without restarting anything: the load must see successes again.
    let recovered = Instant::now();
    let mut back_after = None;
    while recovered.elapsed() < Duration::from_secs(60) {
        let done = answers.lock().map(|a| {
            a.iter()
                .filter(|x| x.started > recovered && x.status == 201)
                .count()
        });
        if done.unwrap_or(0) >= 20 {
            back_after = Some(recovered.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let answers = answers.lock().map(|a| a.clone()).unwrap_or_default();
    assert!(
        back_after.is_some(),
        "no recovery within 60 s of the restart"
    );
    assert!(app.all_running(), "a component exited during the outage");

    // Requests sent while the server was down (a second after the stop, until the start).
    let during: Vec<&Answer> = answers
        .iter()
        .filter(|a| {
            outages.iter().any(|(down, up, _)| {
                a.started > *down + Duration::from_secs(1) && a.started + a.took < *up
            })
        })
        .collect();
    let unexpected: Vec<&Answer> = answers
        .iter()
        .filter(|a| !(a.status == 201 || (a.status == 503 && a.code == "SERVICE_UNAVAILABLE")))
        .collect();
    let slowest_503 = during.iter().map(|a| a.took).max().unwrap_or_default();
    let p50_503 = percentile(during.iter().map(|a| a.took).collect(), 0.5);
    let (acknowledged, lost) = lost_writes(&app, &answers).await;
    crate::hardening::report(format!(
        "postgres outage x{}: {} requests, {acknowledged} acknowledged writes, {} lost; {} answers during the outages, all 503 in p50 {:?} / max {:?}; recovered {:?} after the restart; {} other answers",
        outages.len(),
        answers.len(),
        lost.len(),
        during.len(),
        p50_503,
        slowest_503,
        back_after.unwrap_or_default(),
        unexpected.len()
    ));
    assert!(
        during.len() >= 6,
        "too few requests during the outage: {}",
        during.len()
    );
    assert!(
        during.iter().all(|a| a.status == 503),
        "non-503 during the outage: {:?}",
        during
            .iter()
            .filter(|a| a.status != 503)
            .take(5)
            .collect::<Vec<_>>()
    );
    // The pool's acquire timeout (3 s) bounds them.
    assert!(
        slowest_503 < Duration::from_secs(4),
        "slow 503s: {slowest_503:?}"
    );
    assert!(
        unexpected.is_empty(),
        "answers other than 201/503: {:?}",
        &unexpected[..unexpected.len().min(5)]
    );
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    app.finish().await;
}

/// Restarts the broker if a test fails while it is stopped.
struct BrokerBack;

impl Drop for BrokerBack {
    fn drop(&mut self) {
        latchkey_shared::testing::rabbitmqctl("start_app");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "stops RabbitMQ; hardening tier: deploy/hardening.sh"]
async fn broker_outage_leaves_the_api_unaffected_and_loses_no_event() {
    let mut app =
        TestApp::spawn_distributed_with(&[("LATCHKEY_RATE_LIMITS", "off".to_owned())]).await;
    let receiver = Receiver::start().await;
    ok(
        send(
            app.as_("admin", Method::POST, "/api/v1/webhook-endpoints")
                .json(&json!({ "url": receiver.url, "event_types": ["user.created", "team.created"] })),
        )
        .await,
        201,
    )
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let (answers, tasks) = load(&app, 4, stop.clone());
    let mut outages = Vec::new();
    for _ in 0..3 * scale() {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let guard = BrokerBack;
        latchkey_shared::testing::rabbitmqctl("stop_app");
        let down = Instant::now();
        tokio::time::sleep(Duration::from_secs(5)).await;
        outages.push((down, Instant::now()));
        drop(guard);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let answers = answers.lock().map(|a| a.clone()).unwrap_or_default();
    assert!(app.all_running(), "a component exited during the outage");
    let failed: Vec<&Answer> = answers.iter().filter(|a| a.status != 201).collect();
    let (during, outside): (Vec<&Answer>, Vec<&Answer>) = answers.iter().partition(|a| {
        outages
            .iter()
            .any(|(down, up)| a.started > *down && a.started < *up)
    });
    let p99 = |xs: &[&Answer]| percentile(xs.iter().map(|a| a.took).collect(), 0.99);
    let expected: HashSet<String> = answers
        .iter()
        .filter_map(|a| a.id.as_ref())
        .filter_map(|path| path.rsplit('/').next().map(str::to_owned))
        .collect();
    let got = receiver
        .wait_until(Duration::from_secs(180), |r| {
            let ids: HashSet<String> = r
                .iter()
                .filter_map(|x| x.json()["data"]["id"].as_str().map(str::to_owned))
                .collect();
            expected.iter().all(|e| ids.contains(e))
        })
        .await;
    let delivered: HashSet<String> = got
        .iter()
        .filter_map(|x| x.json()["data"]["id"].as_str().map(str::to_owned))
        .collect();
    let missing = expected.difference(&delivered).count();
    crate::hardening::report(format!(
        "broker outage x{}: {} writes, {} failed; p99 {:?} during outages vs {:?} outside; {} events expected, {missing} lost",
        outages.len(),
        answers.len(),
        failed.len(),
        p99(&during),
        p99(&outside),
        expected.len()
    ));
    assert!(
        during.len() >= 20,
        "too few requests during the outages: {}",
        during.len()
    );
    assert!(
        failed.is_empty(),
        "writes failed while the broker was down: {:?}",
        &failed[..failed.len().min(5)]
    );
    assert!(
        p99(&during) < Duration::from_secs(1),
        "the API slowed while the broker was down: p99 {:?}",
        p99(&during)
    );
    assert_eq!(missing, 0, "events lost");
    app.finish().await;
}

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// Resumes a paused process if a test fails while it is stopped.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

/// Sends `n` calls that need the teams service at once; their statuses and times.
async fn stall_wave(app: &TestApp, n: usize) -> Vec<(u16, Duration)> {
    let mut calls = Vec::new();
    for _ in 0..n {
        let req = app.as_("server", Method::GET, "/api/v1/teams");
        calls.push(tokio::spawn(async move {
            let started = Instant::now();
            let status = match req.timeout(Duration::from_secs(30)).send().await {
                Ok(r) => r.status().as_u16(),
                Err(_) => 0,
            };
            (status, started.elapsed())
        }));
    }
    let mut answers = Vec::new();
    for c in calls {
        answers.push(c.await.unwrap_or((0, Duration::ZERO)));
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "hardening tier: deploy/hardening.sh"]
async fn a_paused_service_gets_deadline_answers_and_flat_memory() {
    let mut app =
        TestApp::spawn_distributed_with(&[("LATCHKEY_RATE_LIMITS", "off".to_owned())]).await;
    let user = app
        .sign_up(&email("paused"), "paused service password")
        .await;
    let gateway = app
        .pid("gateway")
        .unwrap_or_else(|| panic!("no gateway pid"));
    let teams = app.pid("teams").unwrap_or_else(|| panic!("no teams pid"));
    for _ in 0..50 {
        send(app.as_("server", Method::GET, "/api/v1/teams")).await;
    }
    let rss_before = rss_kib(gateway);
    signal(teams, "-STOP");
    let resume = Resume(teams);
    let per_wave = 200 * scale();
    // Waves of calls stuck on the paused service, one after another. The first wave grows the
    // gateway's buffers once; memory is flat if later waves add nothing to it.
    let mut waves = Vec::new();
    let mut rss_after = Vec::new();
    let mut others = Vec::new();
    for _ in 0..3 {
        let stuck = stall_wave(&app, per_wave);
        let meanwhile = async {
            // Routes that do not need the paused service stay fast meanwhile.
            tokio::time::sleep(Duration::from_secs(1)).await;
            let mut times = Vec::new();
            for _ in 0..10 {
                let started = Instant::now();
                let res =
                    send(app.client(Method::GET, "/api/v1/users/me", Some(&user.access))).await;
                times.push((res.status().as_u16(), started.elapsed()));
            }
            times
        };
        let (answers, times) = tokio::join!(stuck, meanwhile);
        waves.extend(answers);
        others.extend(times);
        rss_after.push(rss_kib(gateway));
    }
    signal(teams, "-CONT");
    drop(resume);
    let back = send(app.as_("server", Method::GET, "/api/v1/teams"))
        .await
        .status();
    let slowest = waves.iter().map(|(_, t)| *t).max().unwrap_or_default();
    let statuses: HashSet<u16> = waves.iter().map(|(s, _)| *s).collect();
    let others_slowest = others.iter().map(|(_, t)| *t).max().unwrap_or_default();
    let later_growth = rss_after[2] as f64 / rss_after[0].max(1) as f64 - 1.0;
    crate::hardening::report(format!(
        "paused teams service: 3 waves of {per_wave} calls answered {statuses:?}, slowest {slowest:?} (deadline 10 s); /users/me meanwhile {:?}, slowest {others_slowest:?}; gateway RSS {rss_before} KiB before, {:?} KiB after each wave ({:+.1}% from the first to the third); after SIGCONT {back}",
        others.iter().map(|(s, _)| *s).collect::<HashSet<_>>(),
        rss_after,
        later_growth * 100.0
    ));
    assert_eq!(
        statuses,
        HashSet::from([503]),
        "calls to the paused service"
    );
    assert!(
        slowest < Duration::from_secs(12),
        "an answer took {slowest:?}"
    );
    assert!(
        others.iter().all(|(s, _)| *s == 200),
        "other routes failed: {others:?}"
    );
    assert!(
        others_slowest < Duration::from_secs(2),
        "other routes slowed: {others_slowest:?}"
    );
    assert!(
        later_growth < 0.10,
        "gateway memory kept growing: {:+.1}% over two more waves",
        later_growth * 100.0
    );
    assert_eq!(back, 200, "the service serves again after SIGCONT");
    assert!(app.all_running());
    app.finish().await;
}
