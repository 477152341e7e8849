//! Who may call a service (DESIGN §2): components present the deployment's internal token;
//! other company services present their project's secret server key and are then held to that
//! project with server access. Anything else is UNAUTHENTICATED. Health and reflection stay
//! open so probes need no secret.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use futures::future::BoxFuture;
use secrecy::{ExposeSecret, SecretString};
use tonic::metadata::{AsciiMetadataValue, MetadataMap};
use tonic::server::NamedService;
use tonic::service::Interceptor;
use tonic::{Request, Status};
use uuid::Uuid;

use super::context::{ACCESS_TYPE, PROJECT_ID};
use crate::crypto::constant_time_eq;

const AUTHORIZATION: &str = "authorization";
/// Metadata key a direct caller puts its project's secret server key in.
pub const SERVER_KEY: &str = "x-latchkey-secret-server-key";
/// Set by admission (never trusted from the caller): `internal` or `server-key`.
const CALLER: &str = "x-latchkey-caller";

/// Whether the call was admitted with the internal token (operator-only RPCs need this).
pub fn is_internal(metadata: &MetadataMap) -> bool {
    metadata.get(CALLER).is_some_and(|v| v == "internal")
}

/// Checks secret server keys; auth answers from its store, other services ask auth.
#[async_trait::async_trait]
pub trait ServerKeys: Send + Sync + 'static {
    async fn is_server_key(&self, project: Uuid, key: &str) -> Result<bool, Status>;
}

/// The admission rule of one service.
#[derive(Clone)]
pub struct Callers {
    token: SecretString,
    keys: Arc<dyn ServerKeys>,
    admitted: Arc<std::sync::atomic::AtomicU64>,
}

impl Callers {
    pub fn new(
        token: SecretString,
        keys: Arc<dyn ServerKeys>,
        admitted: Arc<std::sync::atomic::AtomicU64>,
    ) -> Self {
        Self {
            token,
            keys,
            admitted,
        }
    }

    async fn admit(&self, metadata: &mut MetadataMap) -> Result<(), Status> {
        let bearer = metadata
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if bearer.is_some_and(|t| constant_time_eq(t, self.token.expose_secret())) {
            metadata.insert(CALLER, AsciiMetadataValue::from_static("internal"));
            return Ok(());
        }
        metadata.insert(CALLER, AsciiMetadataValue::from_static("server-key"));
        let key = metadata.remove(SERVER_KEY);
        let key = key.as_ref().and_then(|v| v.to_str().ok());
        let project = metadata
            .get(PROJECT_ID)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| Uuid::parse_str(v).ok());
        if let (Some(key), Some(project)) = (key, project) {
            if self.keys.is_server_key(project, key).await? {
                // A server key speaks for its own project with server access, whatever else the
                // caller claimed.
                metadata.insert(ACCESS_TYPE, AsciiMetadataValue::from_static("server"));
                return Ok(());
            }
        }
        Err(Status::unauthenticated(
            "present the internal service token or the project's secret server key",
        ))
    }
}

/// A generated server that only admitted callers reach.
#[derive(Clone)]
pub struct Guarded<S> {
    inner: S,
    callers: Callers,
}

impl<S> Guarded<S> {
    pub fn new(inner: S, callers: Callers) -> Self {
        Self { inner, callers }
    }
}

impl<S> tower::Service<http::Request<tonic::body::Body>> for Guarded<S>
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        // The clone that was polled ready is the one that must serve the call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let callers = self.callers.clone();
        Box::pin(async move {
            let (mut parts, body) = request.into_parts();
            let mut metadata = MetadataMap::from_headers(std::mem::take(&mut parts.headers));
            match callers.admit(&mut metadata).await {
                Ok(()) => {
                    callers
                        .admitted
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    parts.headers = metadata.into_headers();
                    inner.call(http::Request::from_parts(parts, body)).await
                }
                Err(status) => Ok(status.into_http()),
            }
        })
    }
}

impl<S: NamedService> NamedService for Guarded<S> {
    const NAME: &'static str = S::NAME;
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
        crate::telemetry::inject(request.metadata_mut());
        Ok(request)
    }
}
