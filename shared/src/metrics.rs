//! Prometheus text metrics of one process, and the plain HTTP endpoint a service serves them on
//! (the gateway serves them on its own port, next to its HTTP series).
//!
//! The families are process-wide statics: a component touches the ones it owns, and `render`
//! prints every family, so the embedded system's gateway shows the services' series too.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

/// Request counts and latency histograms by label set.
pub struct Requests {
    count_name: &'static str,
    duration_name: &'static str,
    what: &'static str,
    series: Mutex<BTreeMap<String, Series>>,
}

#[derive(Default)]
struct Series {
    count: u64,
    sum: f64,
    buckets: [u64; BUCKETS.len()],
}

impl Requests {
    pub const fn new(
        count_name: &'static str,
        duration_name: &'static str,
        what: &'static str,
    ) -> Self {
        Self {
            count_name,
            duration_name,
            what,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// Records one request; `labels` comes from [`labels`].
    pub fn observe(&self, labels: String, seconds: f64) {
        if let Ok(mut series) = self.series.lock() {
            let s = series.entry(labels).or_default();
            s.count += 1;
            s.sum += seconds;
            for (i, bound) in BUCKETS.iter().enumerate() {
                if seconds <= *bound {
                    s.buckets[i] += 1;
                }
            }
        }
    }

    pub fn render(&self, out: &mut String) {
        let (count, duration, what) = (self.count_name, self.duration_name, self.what);
        let _ = writeln!(out, "# HELP {count} {what} by outcome.");
        let _ = writeln!(out, "# TYPE {count} counter");
        let _ = writeln!(out, "# HELP {duration} {what} latency.");
        let _ = writeln!(out, "# TYPE {duration} histogram");
        let Ok(series) = self.series.lock() else {
            return;
        };
        for (labels, s) in series.iter() {
            let _ = writeln!(out, "{count}{{{labels}}} {}", s.count);
            for (i, bound) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{duration}_bucket{{{labels},le=\"{bound}\"}} {}",
                    s.buckets[i]
                );
            }
            let _ = writeln!(out, "{duration}_bucket{{{labels},le=\"+Inf\"}} {}", s.count);
            let _ = writeln!(out, "{duration}_sum{{{labels}}} {}", s.sum);
            let _ = writeln!(out, "{duration}_count{{{labels}}} {}", s.count);
        }
    }
}

/// A counter or gauge family by label set.
pub struct Values {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    values: Mutex<BTreeMap<String, f64>>,
}

impl Values {
    pub const fn counter(name: &'static str, help: &'static str) -> Self {
        Self::new(name, help, "counter")
    }

    pub const fn gauge(name: &'static str, help: &'static str) -> Self {
        Self::new(name, help, "gauge")
    }

    const fn new(name: &'static str, help: &'static str, kind: &'static str) -> Self {
        Self {
            name,
            help,
            kind,
            values: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn add(&self, labels: String, by: f64) {
        if let Ok(mut values) = self.values.lock() {
            *values.entry(labels).or_default() += by;
        }
    }

    pub fn set(&self, labels: String, to: f64) {
        if let Ok(mut values) = self.values.lock() {
            values.insert(labels, to);
        }
    }

    pub fn render(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} {}", self.name, self.kind);
        if let Ok(values) = self.values.lock() {
            for (labels, v) in values.iter() {
                let _ = writeln!(out, "{}{{{labels}}} {v}", self.name);
            }
        }
    }
}

/// `name="value"` pairs, values escaped as the exposition format requires.
pub fn labels(pairs: &[(&str, &str)]) -> String {
    // Built for every request and call: one allocation, characters escaped as they are copied.
    let size = pairs.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
    let mut out = String::with_capacity(size);
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out
}

/// gRPC calls served, by service, method and status code.
pub static GRPC: Requests = Requests::new(
    "latchkey_grpc_requests_total",
    "latchkey_grpc_request_duration_seconds",
    "gRPC calls served",
);

/// Events the outbox relay published, by service.
pub static OUTBOX_PUBLISHED: Values = Values::counter(
    "latchkey_outbox_published_total",
    "Events the outbox relay published to the bus.",
);

/// Age of the oldest event in the relay's last batch: how far publishing trails the writes.
pub static OUTBOX_LAG: Values = Values::gauge(
    "latchkey_outbox_lag_seconds",
    "Age of the oldest event in the outbox relay's last batch.",
);

/// Webhook delivery attempts, by outcome.
pub static WEBHOOK_ATTEMPTS: Values = Values::counter(
    "latchkey_webhook_attempts_total",
    "Webhook delivery attempts by outcome (delivered, failed, gave_up).",
);

/// Password hashes waiting for or holding a lane of the hashing pool.
pub static PASSWORD_QUEUE: Values = Values::gauge(
    "latchkey_password_hash_queue_depth",
    "Password hashes and verifications waiting for or running on the hashing pool.",
);

/// Time the hashing lanes spent hashing and waiting for work (`state="busy"|"idle"`): idle
/// time during a sign-in flood is throughput lost to the rest of the request path.
pub static PASSWORD_LANES: Values = Values::counter(
    "latchkey_password_lane_seconds_total",
    "Seconds the password hashing lanes spent busy or idle.",
);

/// Hashes a thread at normal priority ran because the lanes were starved of CPU (see
/// `password::Lanes`); steady growth means the hashing needs cores of its own.
pub static PASSWORD_ESCALATIONS: Values = Values::counter(
    "latchkey_password_hash_escalations_total",
    "Password hashes run at normal priority after waiting too long on the hashing lanes.",
);

/// Every family of this process.
pub fn render(out: &mut String) {
    GRPC.render(out);
    OUTBOX_PUBLISHED.render(out);
    OUTBOX_LAG.render(out);
    WEBHOOK_ATTEMPTS.render(out);
    PASSWORD_QUEUE.render(out);
    PASSWORD_LANES.render(out);
    PASSWORD_ESCALATIONS.render(out);
}

/// Serves `GET /metrics` over plain HTTP/1 on `listener` until `shutdown` resolves (a service's
/// metrics port; scrapers are trusted, so no limits beyond the method and path).
pub async fn serve(
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send,
) {
    use hyper::body::Incoming;
    use hyper_util::rt::TokioIo;

    let answer = |request: http::Request<Incoming>| async move {
        let (status, body) =
            if request.method() == http::Method::GET && request.uri().path() == "/metrics" {
                let mut out = String::new();
                render(&mut out);
                (http::StatusCode::OK, out)
            } else {
                (http::StatusCode::NOT_FOUND, "not found\n".to_owned())
            };
        http::Response::builder()
            .status(status)
            .header("content-type", "text/plain; version=0.0.4")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
    };
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), hyper::service::service_fn(answer))
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_count_into_cumulative_buckets() {
        let requests = Requests::new("t_total", "t_seconds", "Test calls");
        let l = labels(&[("method", "/a.B/C"), ("code", "0")]);
        requests.observe(l.clone(), 0.003);
        requests.observe(l, 2.0);
        let mut out = String::new();
        requests.render(&mut out);
        assert!(
            out.contains("t_total{method=\"/a.B/C\",code=\"0\"} 2\n"),
            "{out}"
        );
        assert!(out.contains("t_seconds_bucket{method=\"/a.B/C\",code=\"0\",le=\"0.005\"} 1\n"));
        assert!(out.contains("t_seconds_bucket{method=\"/a.B/C\",code=\"0\",le=\"5\"} 2\n"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(labels(&[("a", "x\"y\\z\n")]), "a=\"x\\\"y\\\\z\\n\"");
    }
}
