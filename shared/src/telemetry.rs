//! Logging and tracing set-up: JSON lines in production (`LATCHKEY_LOG_FORMAT=json`), compact
//! text otherwise, level from `RUST_LOG` (default `info`); with `LATCHKEY_OTLP_ENDPOINT` the
//! spans are also exported over OTLP/HTTP, and trace context crosses every gRPC hop as W3C
//! `traceparent` metadata so a request's gateway and service spans form one trace.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Whether spans are exported; without export, trace context is neither written nor read, so
/// every gRPC call skips that work.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Installs the global subscriber once, without export; later calls are no-ops (tests call it
/// per test).
pub fn init() {
    let _ = install("latchkey", None);
}

/// Installs the global subscriber for `service` (the `service.name` of exported spans), with
/// export when `LATCHKEY_OTLP_ENDPOINT` is set and not empty. Keep the guard until exit: dropping
/// it flushes the spans not yet sent.
pub fn init_for(service: &'static str) -> anyhow::Result<Export> {
    let endpoint = std::env::var("LATCHKEY_OTLP_ENDPOINT")
        .ok()
        .filter(|e| !e.trim().is_empty());
    install(service, endpoint.as_deref())
}

/// Flushes and stops trace export when dropped.
pub struct Export(Option<SdkTracerProvider>);

impl Drop for Export {
    fn drop(&mut self) {
        if let Some(provider) = self.0.take() {
            // The exporter blocks on its HTTP client, which must not run on an async worker.
            let _ = std::thread::spawn(move || provider.shutdown()).join();
        }
    }
}

fn install(service: &'static str, otlp: Option<&str>) -> anyhow::Result<Export> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let json = std::env::var("LATCHKEY_LOG_FORMAT").is_ok_and(|v| v == "json");
    // Logs go to stderr: stdout carries the CLI's output (project keys as JSON).
    let fmt = if json {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_writer(std::io::stderr)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .compact()
            .with_writer(std::io::stderr)
            .boxed()
    };
    let provider = otlp
        .map(|endpoint| exporter(service, endpoint))
        .transpose()?;
    let traces = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(service)));
    if provider.is_some() {
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
    }
    let installed = tracing_subscriber::registry()
        .with(traces)
        .with(fmt)
        .with(filter)
        .try_init();
    if installed.is_ok() {
        EXPORTING.store(provider.is_some(), Ordering::Relaxed);
        if let Some(endpoint) = otlp {
            tracing::info!(endpoint, "exporting traces over OTLP/HTTP");
        }
    }
    Ok(Export(provider))
}

fn exporter(service: &'static str, endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
    use opentelemetry_otlp::WithExportConfig;
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    // The blocking HTTP client runs on the batch processor's own thread, never on the runtime.
    let exporter = std::thread::spawn(move || {
        opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(url)
            .build()
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the OTLP exporter panicked while starting"))??;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service)
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// Writes the current span's trace context into outgoing gRPC metadata.
pub fn inject(metadata: &mut tonic::metadata::MetadataMap) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if !EXPORTING.load(Ordering::Relaxed) {
        return;
    }
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&context, &mut MetadataInjector(metadata));
    });
}

/// Makes `span` a child of the trace context in incoming `headers`, if any.
pub fn adopt(span: &tracing::Span, headers: &http::HeaderMap) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if !EXPORTING.load(Ordering::Relaxed) {
        return;
    }
    let parent =
        opentelemetry::global::get_text_map_propagator(|p| p.extract(&HeaderExtractor(headers)));
    let _ = span.set_parent(parent);
}

struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        let key = tonic::metadata::MetadataKey::from_bytes(key.as_bytes());
        if let (Ok(key), Ok(value)) = (key, value.parse()) {
            self.0.insert(key, value);
        }
    }
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}
