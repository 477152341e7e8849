//! gRPC plumbing shared by every service and the gateway: caller authentication, the access
//! context carried in metadata, health and reflection, and client channels.

use std::net::SocketAddr;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use tonic::metadata::{AsciiMetadataValue, MetadataMap};
use tonic::service::Interceptor;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};
use uuid::Uuid;

use crate::crypto::constant_time_eq;
use crate::error::{CodedError, ErrorCode};
use crate::headers::AccessType;

const AUTHORIZATION: &str = "authorization";
const PROJECT_ID: &str = "x-latchkey-project-id";
const ACCESS_TYPE: &str = "x-latchkey-access-type";
const USER_ID: &str = "x-latchkey-user-id";
pub const REQUEST_ID: &str = "x-request-id";

/// Default deadline for a gateway → service call.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(10);

/// Server side: accepts calls that present the deployment's internal service token.
/// Health and reflection are mounted without it so probes need no secret.
#[derive(Clone)]
pub struct RequireCaller {
    token: SecretString,
}

impl RequireCaller {
    pub fn new(token: SecretString) -> Self {
        Self { token }
    }
}

impl Interceptor for RequireCaller {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let presented = request
            .metadata()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match presented {
            Some(t) if constant_time_eq(t, self.token.expose_secret()) => Ok(request),
            _ => Err(Status::unauthenticated(
                "missing or wrong service credentials",
            )),
        }
    }
}

/// Client side: adds the internal service token to every call.
#[derive(Clone)]
pub struct PresentCaller {
    header: AsciiMetadataValue,
}

impl PresentCaller {
    pub fn new(token: &SecretString) -> anyhow::Result<Self> {
        let header = format!("Bearer {}", token.expose_secret()).parse()?;
        Ok(Self { header })
    }
}

impl Interceptor for PresentCaller {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert(AUTHORIZATION, self.header.clone());
        Ok(request)
    }
}

/// A channel that connects on first use and reconnects by itself, so components can start in
/// any order.
pub fn lazy_channel(addr: &str) -> anyhow::Result<Channel> {
    let uri = if addr.starts_with("http://") || addr.starts_with("https://") {
        addr.to_owned()
    } else {
        format!("http://{addr}")
    };
    Ok(Endpoint::from_shared(uri)?
        .connect_timeout(Duration::from_secs(2))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(true)
        .connect_lazy())
}

/// What the gateway verified about a request, carried to services in metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub project_id: Uuid,
    pub access_type: AccessType,
    pub user_id: Option<Uuid>,
    pub request_id: Option<String>,
}

impl Context {
    pub fn write(&self, metadata: &mut MetadataMap) {
        let mut put = |key: &'static str, value: &str| {
            if let Ok(v) = value.parse() {
                metadata.insert(key, v);
            }
        };
        put(PROJECT_ID, &self.project_id.to_string());
        put(ACCESS_TYPE, self.access_type.as_str());
        if let Some(user) = self.user_id {
            put(USER_ID, &user.to_string());
        }
        if let Some(id) = &self.request_id {
            put(REQUEST_ID, id);
        }
    }

    /// Reads the context a caller sent; a call without one cannot name a project.
    pub fn read(metadata: &MetadataMap) -> Result<Self, Status> {
        let text = |key: &str| metadata.get(key).and_then(|v| v.to_str().ok());
        let missing = || {
            CodedError::new(ErrorCode::BadRequest, "call carries no project context").into_status()
        };
        let project_id = text(PROJECT_ID)
            .and_then(|v| Uuid::parse_str(v).ok())
            .ok_or_else(missing)?;
        let access_type = text(ACCESS_TYPE)
            .and_then(|v| v.parse().ok())
            .ok_or_else(missing)?;
        let user_id = text(USER_ID).and_then(|v| Uuid::parse_str(v).ok());
        Ok(Self {
            project_id,
            access_type,
            user_id,
            request_id: text(REQUEST_ID).map(str::to_owned),
        })
    }

    /// Wraps a message in a request that carries this context and a deadline.
    pub fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        self.write(request.metadata_mut());
        request.set_timeout(DEFAULT_DEADLINE);
        request
    }
}

/// The health reporter and the reflection service every gRPC server mounts.
pub async fn health_and_reflection() -> anyhow::Result<(
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

/// Binds a listener, resolving `host:port` strings (port 0 picks a free port).
pub async fn bind(addr: &str) -> anyhow::Result<tokio::net::TcpListener> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    Ok(listener)
}

/// The address a listener ended up on, as a client would dial it.
pub fn dial_addr(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

/// What every service is started with besides its own settings.
#[derive(Clone)]
pub struct Deps {
    pub bus: crate::events::SharedBus,
    pub clock: crate::clock::SharedClock,
    /// Token callers must present (see `RequireCaller`).
    pub internal_token: SecretString,
}

/// Serves one service's routes plus health and reflection on `listener` until `shutdown`
/// resolves. Health reports SERVING for `""` and `service_name` while up and NOT_SERVING as
/// soon as shutdown begins, so load balancers stop routing before in-flight calls drain.
pub async fn serve(
    service_name: &'static str,
    routes: tonic::service::Routes,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    use tonic_health::ServingStatus;
    let (reporter, health, reflection) = health_and_reflection().await?;
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;
    reporter
        .set_service_status(service_name, ServingStatus::Serving)
        .await;
    let on_shutdown = async move {
        shutdown.await;
        reporter
            .set_service_status("", ServingStatus::NotServing)
            .await;
        reporter
            .set_service_status(service_name, ServingStatus::NotServing)
            .await;
    };
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .add_routes(routes)
        .add_service(health)
        .add_service(reflection)
        .serve_with_incoming_shutdown(incoming, on_shutdown)
        .await?;
    Ok(())
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
    make_routes: impl FnOnce(crate::db::Database) -> tonic::service::Routes,
) -> anyhow::Result<()> {
    let db = crate::db::Database::connect_and_migrate(database_url, migrations).await?;
    let relay = crate::events::outbox::Relay::new(db.clone(), deps.bus.clone(), deps.clock.clone());
    let (stop_relay, relay_stopped) = tokio::sync::oneshot::channel::<()>();
    let relay_task = tokio::spawn(relay.run(async {
        let _ = relay_stopped.await;
    }));
    let served = serve(service_name, make_routes(db.clone()), listener, shutdown).await;
    let _ = stop_relay.send(());
    let _ = relay_task.await;
    db.close().await;
    served
}

/// Wraps a generated server so it only answers authenticated callers.
pub fn authenticated<S>(server: S, deps: &Deps) -> tonic::service::Routes
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
    tonic::service::Routes::new(tonic::service::interceptor::InterceptedService::new(
        server,
        RequireCaller::new(deps.internal_token.clone()),
    ))
}

/// `latchkey.common.v1.Service`, answered by every service from its own database.
pub struct Describe {
    pub service: &'static str,
    pub db: crate::db::Database,
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
    let routes = |db| {
        let describe = Describe {
            service: service_name,
            db,
        };
        authenticated(
            latchkey_proto::common::v1::service_server::ServiceServer::new(describe),
            deps,
        )
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
