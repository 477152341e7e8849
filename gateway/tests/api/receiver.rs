//! A webhook receiver on loopback for the tests: records every request it gets, and can be
//! told to fail the next few.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Request {
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
    /// What the receiver answered.
    pub status: u16,
}

impl Request {
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Default)]
struct Inner {
    requests: Mutex<Vec<Request>>,
    fail_next: AtomicUsize,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    inner: Arc<Inner>,
}

impl Receiver {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let receiver = Self {
            url: format!("http://{addr}/hook"),
            inner: Arc::default(),
        };
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(receiver.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        receiver
    }

    pub fn fail_next(&self, n: usize) {
        self.inner.fail_next.store(n, Ordering::SeqCst);
    }

    pub fn requests(&self) -> Vec<Request> {
        self.inner
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Successful deliveries (2xx answers).
    pub fn accepted(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.status == 200)
            .collect()
    }

    /// Waits until `done` holds for the accepted requests.
    pub async fn wait_until(
        &self,
        within: Duration,
        done: impl Fn(&[Request]) -> bool,
    ) -> Vec<Request> {
        let started = Instant::now();
        loop {
            let accepted = self.accepted();
            if done(&accepted) {
                return accepted;
            }
            assert!(
                started.elapsed() < within,
                "the receiver got {} deliveries in {within:?}: {:?}",
                accepted.len(),
                accepted
                    .iter()
                    .map(|r| r.json()["type"].clone())
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let fail = r
        .inner
        .fail_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    let status = if fail {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    };
    if let Ok(mut requests) = r.inner.requests.lock() {
        requests.push(Request {
            headers,
            body,
            at: Instant::now(),
            status: status.as_u16(),
        });
    }
    status
}
