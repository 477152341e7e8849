//! Serving a service: its routes behind caller admission, health, reflection, a request span
//! carrying the gateway's request id, the outbox relay, and the `Describe` API every service
//! answers.

use std::sync::Arc;

use secrecy::SecretString;
use tonic::{Request, Status};
use tower::ServiceExt;

use super::caller::{Callers, Guarded, ServerKeys};
use super::context::{Context, REQUEST_ID};
use crate::error::CodedError;

/// What every service is started with besides its own settings.
#[derive(Clone)]
pub struct Deps {
    pub bus: crate::events::SharedBus,
    pub clock: crate::clock::SharedClock,
    /// Token components present to each other.
    pub internal_token: SecretString,
    /// Where auth answers key checks (services other than auth verify server keys there).
    pub auth_addr: String,
    /// Calls admitted to the guarded APIs of the services started with these deps (one counter
    /// per process), reported by `Describe`: it makes fan-out measurable.
    pub calls: Arc<std::sync::atomic::AtomicU64>,
    /// After the shutdown signal, how long to keep serving while health reports NOT_SERVING,
    /// so load balancers stop sending new calls before the listener closes.
    pub shutdown_delay: std::time::Duration,
    /// How long a caller's connection lives before the server asks it, with GOAWAY, to open a
    /// new one (`LATCHKEY_GRPC_MAX_CONNECTION_AGE_SECONDS`).
    pub max_connection_age: std::time::Duration,
    /// Seals stored secrets that must be read back (`LATCHKEY_SECRETS_KEY`).
    pub secrets: crate::sealed::SecretsKey,
}

impl Deps {
    /// Server-key checks through auth, cached briefly.
    pub fn remote_server_keys(&self) -> anyhow::Result<Arc<dyn ServerKeys>> {
        let caller = super::PresentCaller::new(&self.internal_token)?;
        let auth = latchkey_proto::auth::v1::projects_client::ProjectsClient::with_interceptor(
            super::lazy_channel(&self.auth_addr)?,
            caller,
        );
        Ok(Arc::new(super::AccessChecker::new(
            auth,
            std::time::Duration::from_secs(2),
        )))
    }
}

/// Wraps a generated server so only admitted callers reach it.
pub fn guarded<S>(server: S, deps: &Deps, keys: Arc<dyn ServerKeys>) -> tonic::service::Routes
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let callers = Callers::new(deps.internal_token.clone(), keys, deps.calls.clone());
    tonic::service::Routes::new(Guarded::new(server, callers))
}

/// Adds another generated server, admitted like the first, to `routes`.
pub fn also_guarded<S>(
    routes: tonic::service::Routes,
    server: S,
    deps: &Deps,
    keys: Arc<dyn ServerKeys>,
) -> tonic::service::Routes
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let callers = Callers::new(deps.internal_token.clone(), keys, deps.calls.clone());
    routes.add_service(Guarded::new(server, callers))
}

/// The health reporter and the reflection service every gRPC server mounts.
#[allow(clippy::type_complexity)]
async fn health_and_reflection() -> anyhow::Result<(
    tonic_health::server::HealthReporter,
    tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>,
    tonic_reflection::server::v1::ServerReflectionServer<
        impl tonic_reflection::server::v1::ServerReflection,
    >,
)> {
    let (reporter, health) = tonic_health::server::health_reporter();
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(latchkey_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    Ok((reporter, health, reflection))
}

/// The default of `Deps::max_connection_age`.
pub const MAX_CONNECTION_AGE: std::time::Duration = std::time::Duration::from_secs(120);

/// Serves `routes` plus health and reflection on `listener` until `shutdown` resolves. Health
/// reports SERVING for `""` and `service_name` while up and NOT_SERVING as soon as shutdown
/// begins; calls are still served for `delay` (load balancers stop routing meanwhile), then the
/// listener closes, open connections get GOAWAY and in-flight calls finish.
pub async fn serve(
    service_name: &'static str,
    routes: tonic::service::Routes,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    deps: &Deps,
) -> anyhow::Result<()> {
    let delay = deps.shutdown_delay;
    use tonic_health::ServingStatus;
    let (reporter, health, reflection) = health_and_reflection().await?;
    for name in ["", service_name] {
        reporter
            .set_service_status(name, ServingStatus::Serving)
            .await;
    }
    let routes = routes.add_service(health).add_service(reflection);
    let handler = local_handler(service_name, routes.clone());
    let registration = Arc::new(super::local::register(
        listener.local_addr()?,
        handler.clone(),
    ));
    // Batches of calls from other components run through the same routes as single calls.
    let routes = routes.add_service(super::mux::Server::new(handler));
    let withdrawn = registration.clone();
    let on_shutdown = async move {
        shutdown.await;
        for name in ["", service_name] {
            reporter
                .set_service_status(name, ServingStatus::NotServing)
                .await;
        }
        tracing::info!(
            service = service_name,
            ?delay,
            "not serving; draining after the delay"
        );
        tokio::time::sleep(delay).await;
        withdrawn.withdraw();
    };
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let served = tonic::transport::Server::builder()
        // Latchkey's own callers balance per call over every replica; callers that cannot
        // (a plain channel to a ClusterIP Service) stay on the replica they first reached,
        // so ending connections now and then (GOAWAY: no new calls on it, the ones in flight
        // finish) spreads them over replicas added since. No `max_connection_age_grace`: with
        // it, tonic sends no GOAWAY at all and cuts the connection at age + grace, failing
        // whatever is in flight then. Long streams (health watches) are renewed by the caller.
        .max_connection_age(deps.max_connection_age)
        .trace_fn(move |request| call_span(service_name, request.uri().path(), request.headers()))
        .layer(tower::layer::layer_fn(move |inner| Recorded {
            inner,
            service: service_name,
        }))
        .add_routes(routes)
        .serve_with_incoming_shutdown(incoming, on_shutdown)
        .await;
    registration.drain().await;
    served?;
    Ok(())
}

/// One span per call, carrying the gateway's request id (and trace context) across the hop.
fn call_span(service: &'static str, method: &str, headers: &http::HeaderMap) -> tracing::Span {
    let request_id = headers
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let span = tracing::info_span!("grpc", service, method = %method, request_id = %request_id);
    crate::telemetry::adopt(&span, headers);
    span
}

/// The routes as callers in this process reach them: with the span and metrics a call over
/// the network gets.
fn local_handler(service: &'static str, routes: tonic::service::Routes) -> super::local::Handler {
    let recorded = Recorded {
        inner: routes,
        service,
    };
    let traced = tower::service_fn(move |request: http::Request<tonic::body::Body>| {
        let span = call_span(service, request.uri().path(), request.headers());
        tracing::Instrument::instrument(recorded.clone().oneshot(request), span)
    });
    tower::util::BoxCloneSyncService::new(traced)
}

/// Boots a service: connects and migrates its database, runs its outbox relay, serves the
/// routes `make_routes` builds on that database until `shutdown`, then stops the relay after a
/// last pass and closes the pool.
pub async fn run_service(
    service_name: &'static str,
    migrations: crate::db::Migrations,
    database_url: &str,
    deps: &Deps,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    make_routes: impl FnOnce(
        crate::db::Database,
        crate::shutdown::Shutdown,
    ) -> anyhow::Result<tonic::service::Routes>,
) -> anyhow::Result<()> {
    let shutdown = crate::shutdown::Shutdown::on(shutdown);
    let db = crate::db::Database::connect_and_migrate(database_url, migrations).await?;
    let relay = crate::events::outbox::Relay::new(db.clone(), deps.bus.clone(), deps.clock.clone())
        .for_service(service_name);
    let (stop_relay, relay_stopped) = tokio::sync::oneshot::channel::<()>();
    let relay_task = tokio::spawn(relay.run(async {
        let _ = relay_stopped.await;
    }));
    let routes = make_routes(db.clone(), shutdown.clone())?;
    let served = serve(service_name, routes, listener, shutdown.wait(), deps).await;
    let _ = stop_relay.send(());
    let _ = relay_task.await;
    db.close().await;
    served
}

/// Records every call in the process's gRPC metrics by method and status code.
#[derive(Clone)]
struct Recorded<S> {
    inner: S,
    service: &'static str,
}

impl<S, B, R> tower::Service<http::Request<B>> for Recorded<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let started = std::time::Instant::now();
        let method = request.uri().path().to_owned();
        let service = self.service;
        let call = self.inner.call(request);
        Box::pin(async move {
            let response = call.await;
            // Errors travel in the head (trailers-only); a head without a status is a success
            // whose status follows in the trailers.
            let code = match &response {
                Ok(r) => r
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("0")
                    .to_owned(),
                Err(_) => "transport".to_owned(),
            };
            // Unknown methods share one label so probing cannot grow the series without bound.
            let method = if code == "12" { "unmatched" } else { &method };
            let labels = crate::metrics::labels(&[
                ("service", service),
                ("method", method),
                ("code", &code),
            ]);
            crate::metrics::GRPC.observe(labels, started.elapsed().as_secs_f64());
            response
        })
    }
}

/// `latchkey.common.v1.Service`, answered by every service from its own database.
pub struct Describe {
    pub service: &'static str,
    pub db: crate::db::Database,
    pub calls: Arc<std::sync::atomic::AtomicU64>,
}

#[tonic::async_trait]
impl latchkey_proto::common::v1::service_server::Service for Describe {
    async fn describe(
        &self,
        request: Request<latchkey_proto::common::v1::DescribeRequest>,
    ) -> Result<tonic::Response<latchkey_proto::common::v1::DescribeResponse>, Status> {
        let ctx = Context::read(request.metadata())?;
        let consumed_events = crate::events::consume::consumed_count(&self.db, ctx.project_id)
            .await
            .map_err(|e| {
                tracing::error!(service = self.service, error = %e, "store failed");
                CodedError::internal().into_status()
            })?;
        Ok(tonic::Response::new(
            latchkey_proto::common::v1::DescribeResponse {
                service: self.service.to_owned(),
                consumed_events,
                calls_served: i64::try_from(self.calls.load(std::sync::atomic::Ordering::Relaxed))
                    .unwrap_or(i64::MAX),
            },
        ))
    }
}

/// Boots a service whose only API so far is `Describe` (teams, contacts, webhooks until their
/// issues give them behaviour).
pub async fn run_describe_only(
    service_name: &'static str,
    migrations: crate::db::Migrations,
    database_url: &str,
    deps: &Deps,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let routes = |db, _| {
        let describe = Describe {
            service: service_name,
            db,
            calls: deps.calls.clone(),
        };
        let server = latchkey_proto::common::v1::service_server::ServiceServer::new(describe);
        Ok(guarded(server, deps, deps.remote_server_keys()?))
    };
    run_service(
        service_name,
        migrations,
        database_url,
        deps,
        listener,
        shutdown,
        routes,
    )
    .await
}

/// Adds `latchkey.common.v1.Service` (guarded like the service's own API) to `routes`.
pub fn with_describe(
    routes: tonic::service::Routes,
    service_name: &'static str,
    db: crate::db::Database,
    deps: &Deps,
    keys: Arc<dyn ServerKeys>,
) -> tonic::service::Routes {
    let describe = Describe {
        service: service_name,
        db,
        calls: deps.calls.clone(),
    };
    let server = latchkey_proto::common::v1::service_server::ServiceServer::new(describe);
    also_guarded(routes, server, deps, keys)
}
