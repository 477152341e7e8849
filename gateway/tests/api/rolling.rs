//! Rolling restarts under steady load: every component of the distributed stack is replaced
//! one instance at a time, as a Kubernetes rolling update does, while clients keep calling
//! routes served by each service. No request may fail. Afterwards the metrics endpoints show
//! what was served.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::helpers::{email, send, Project, TestApp};
use crate::processes::COMPONENTS;

const PASSWORD: &str = "correct horse battery staple";
const WORKERS: usize = 6;

/// The calls a worker cycles through: reads served by auth, teams and contacts, an admin read
/// served by webhooks, and a write (team creation: teams, its outbox, the event consumers).
#[derive(Clone)]
struct Calls {
    http: reqwest::Client,
    base: String,
    project: Project,
    access: String,
}

impl Calls {
    fn nth(&self, i: usize) -> reqwest::RequestBuilder {
        let p = &self.project;
        let (access, key_header, key, method, path) = match i % 5 {
            0 => (
                "client",
                "x-service-publishable-client-key",
                &p.client_key,
                Method::GET,
                "/api/v1/users/me",
            ),
            1 => (
                "client",
                "x-service-publishable-client-key",
                &p.client_key,
                Method::GET,
                "/api/v1/teams?user_id=me",
            ),
            2 => (
                "client",
                "x-service-publishable-client-key",
                &p.client_key,
                Method::GET,
                "/api/v1/contact-channels?user_id=me",
            ),
            3 => (
                "admin",
                "x-service-super-secret-admin-key",
                &p.admin_key,
                Method::GET,
                "/api/v1/webhook-endpoints",
            ),
            _ => (
                "server",
                "x-service-secret-server-key",
                &p.server_key,
                Method::POST,
                "/api/v1/teams",
            ),
        };
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .header("x-service-access-type", access)
            .header("x-service-project-id", &p.id)
            .header(key_header, key);
        if access == "client" {
            request = request.header("x-service-access-token", &self.access);
        }
        if method == Method::POST {
            request = request.json(&json!({ "display_name": format!("rolling {i}") }));
        }
        request
    }
}

/// Calls until `stop`; how many succeeded and what failed.
async fn work(calls: Calls, first: usize, stop: Arc<AtomicBool>) -> (usize, Vec<String>) {
    let (mut ok, mut failures) = (0usize, Vec::new());
    let mut i = first;
    while !stop.load(Ordering::Relaxed) {
        let started = std::time::Instant::now();
        match calls.nth(i).send().await {
            Ok(res) if res.status().is_success() => ok += 1,
            Ok(res) => {
                let status = res.status();
                let body = res.text().await.unwrap_or_default();
                failures.push(format!("call {i}: {status} {body}"));
            }
            Err(e) => failures.push(format!("call {i}: {e:?}")),
        }
        // A call that waited out a whole drain would be a failure in all but name.
        if started.elapsed() > Duration::from_secs(5) {
            failures.push(format!("call {i} took {:?}", started.elapsed()));
        }
        i += WORKERS;
    }
    (ok, failures)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restarts_fail_no_request() {
    let mut app = TestApp::spawn_balanced().await;
    let session = app.sign_up(&email("rolling"), PASSWORD).await;
    let calls = Calls {
        http: app.http.clone(),
        base: app.base.clone(),
        project: app.project.clone(),
        access: session.access.clone(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| tokio::spawn(work(calls.clone(), w, stop.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    for component in COMPONENTS {
        app.roll(component).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut ok, mut failures) = (0, Vec::new());
    for worker in workers {
        let (n, f) = worker.await.unwrap_or_else(|e| panic!("{e}"));
        ok += n;
        failures.extend(f);
    }
    assert!(
        failures.is_empty(),
        "{} failed: {failures:#?}",
        failures.len()
    );
    assert!(ok > 100, "only {ok} calls were served during the rollout");

    // The new instances count what they served, by route and status or method and code.
    let scrape = |addr: String| {
        let http = app.http.clone();
        async move {
            send(http.get(format!("http://{addr}/metrics")))
                .await
                .text()
                .await
                .unwrap_or_default()
        }
    };
    for (component, addr) in app.metrics_addrs() {
        let text = scrape(addr).await;
        let served = text.lines().any(|line| {
            if component == "gateway" {
                line.starts_with("latchkey_http_requests_total{route=\"/api/v1/users/me\",method=\"GET\",status=\"200\"}")
            } else {
                line.starts_with("latchkey_grpc_requests_total{")
                    && line.contains(&format!("service=\"latchkey.{component}.v1."))
                    && line.contains("code=\"0\"")
                    && !line.ends_with(" 0")
            }
        });
        assert!(
            served,
            "{component} metrics show no successful calls:\n{text}"
        );
    }
    app.finish().await;
}
