//! Observability of the distributed stack: spans exported over OTLP/HTTP form one trace across
//! the gateway→service hop, and logs are JSON lines carrying the request id.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;

use crate::helpers::{email, send, TestApp};

struct Span {
    service: String,
    trace: Vec<u8>,
    id: Vec<u8>,
    parent: Vec<u8>,
    name: String,
}

/// An OTLP/HTTP collector on loopback that keeps every export it receives.
struct Collector {
    url: String,
    exports: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
}

impl Collector {
    async fn start() -> Self {
        let exports: Arc<Mutex<Vec<ExportTraceServiceRequest>>> = Arc::default();
        let kept = exports.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let kept = kept.clone();
                async move {
                    if let (Ok(export), Ok(mut all)) =
                        (ExportTraceServiceRequest::decode(body), kept.lock())
                    {
                        all.push(export);
                    }
                    axum::http::StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let url = format!(
            "http://{}",
            listener.local_addr().unwrap_or_else(|e| panic!("{e}"))
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, exports }
    }

    /// Every span received so far.
    fn spans(&self) -> Vec<Span> {
        let Ok(exports) = self.exports.lock() else {
            return Vec::new();
        };
        let mut spans = Vec::new();
        for export in exports.iter() {
            for resource_spans in &export.resource_spans {
                let service = resource_spans
                    .resource
                    .iter()
                    .flat_map(|r| &r.attributes)
                    .find(|a| a.key == "service.name")
                    .and_then(|a| a.value.as_ref()?.value.as_ref())
                    .map(|v| match v {
                        AnyValue::StringValue(s) => s.clone(),
                        _ => String::new(),
                    })
                    .unwrap_or_default();
                for scope in &resource_spans.scope_spans {
                    for span in &scope.spans {
                        spans.push(Span {
                            service: service.clone(),
                            trace: span.trace_id.clone(),
                            id: span.span_id.clone(),
                            parent: span.parent_span_id.clone(),
                            name: span.name.clone(),
                        });
                    }
                }
            }
        }
        spans
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_across_the_grpc_hop_and_json_logs_with_request_ids() {
    let collector = Collector::start().await;
    let app = TestApp::spawn_distributed_with(&[
        ("LATCHKEY_OTLP_ENDPOINT", collector.url.clone()),
        // Export within a fraction of a second rather than the default five.
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
        ("LATCHKEY_LOG_FORMAT", "json".to_owned()),
        (
            "RUST_LOG",
            "info,latchkey_gateway::request_id=debug".to_owned(),
        ),
    ])
    .await;
    let session = app
        .sign_up(&email("traced"), "correct horse battery staple")
        .await;
    let res = send(app.client(
        reqwest::Method::GET,
        "/api/v1/users/me",
        Some(&session.access),
    ))
    .await;
    assert_eq!(res.status(), 200);
    let request_id = res
        .headers()
        .get("x-service-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();

    // A service span whose parent is a gateway span of the same trace.
    let mut joined = None;
    for _ in 0..100 {
        let spans = collector.spans();
        joined = spans
            .iter()
            .filter(|s| s.service == "latchkey-auth" && s.name == "grpc")
            .find_map(|child| {
                spans
                    .iter()
                    .find(|parent| {
                        parent.service == "latchkey-gateway"
                            && parent.trace == child.trace
                            && parent.id == child.parent
                    })
                    .map(|parent| (parent.name.clone(), child.name.clone()))
            });
        if joined.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let names: Vec<(String, String)> = collector
        .spans()
        .into_iter()
        .map(|s| (s.service, s.name))
        .collect();
    assert_eq!(
        joined,
        Some(("request".to_owned(), "grpc".to_owned())),
        "no auth span under a gateway span; spans: {names:?}"
    );

    // The gateway's log is JSON lines; the access line of that request carries its id.
    let log = app.log("gateway");
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let served = lines.iter().any(|l| {
        l["fields"]["message"] == "request served"
            && l["span"]["request_id"] == request_id.as_str()
            && l["fields"]["status"] == 200
    });
    assert!(served, "no access line for {request_id} in:\n{log}");
    app.finish().await;
}
