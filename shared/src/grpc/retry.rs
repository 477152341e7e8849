//! Transparent retry of calls that never reached a service, as gRPC's own clients do: a refused
//! connection, a stream the server refused with GOAWAY while draining for shutdown, or a request
//! the connection dropped before sending it. Sending those again is safe, and it is what lets a
//! service restart one replica at a time without failing a request. A call that may have
//! reached the service is never repeated.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tonic::body::Body;
use tower::{Service, ServiceExt};

type BoxError = Box<dyn StdError + Send + Sync>;

/// Waits before each further attempt; together well under a call's deadline.
const BACKOFF: [Duration; 5] = [
    Duration::from_millis(10),
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
];

/// A channel to one component that resends calls which never reached it.
#[derive(Clone, Debug)]
pub struct Channel {
    inner: tonic::transport::Channel,
}

impl From<tonic::transport::Channel> for Channel {
    fn from(inner: tonic::transport::Channel) -> Self {
        Self { inner }
    }
}

impl Service<http::Request<Body>> for Channel {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    /// Readiness is awaited per attempt inside `call`, on a clone of the inner channel.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let channel = self.inner.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            // Calls are unary: the body is one length-prefixed message, kept to be sent again.
            let body = body.collect().await?.to_bytes();
            let mut backoff = BACKOFF.iter();
            loop {
                let attempt = rebuild(&parts, &body);
                let mut channel = channel.clone();
                let outcome = match channel.ready().await {
                    Ok(ready) => ready.call(attempt).await,
                    Err(e) => Err(e),
                };
                match outcome {
                    Ok(response) => return Ok(response),
                    Err(e) => match backoff.next() {
                        Some(wait) if never_reached_the_service(&e) => {
                            tracing::debug!(error = %e, uri = %parts.uri, "resending a call that did not reach its service");
                            tokio::time::sleep(*wait).await;
                        }
                        _ => return Err(e.into()),
                    },
                }
            }
        })
    }
}

fn rebuild(parts: &http::request::Parts, body: &Bytes) -> http::Request<Body> {
    let mut request = http::Request::new(Body::new(Full::new(body.clone())));
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = parts.uri.clone();
    *request.version_mut() = parts.version;
    *request.headers_mut() = parts.headers.clone();
    request
}

/// Whether the error chain shows the request was not processed: the connection could not be
/// made, the server refused the stream (GOAWAY or REFUSED_STREAM), or the client dropped the
/// request before writing it.
fn never_reached_the_service(error: &(dyn StdError + 'static)) -> bool {
    let mut source: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<tonic::ConnectError>() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        if let Some(h2) = e.downcast_ref::<h2::Error>() {
            if h2.is_go_away() || h2.reason() == Some(h2::Reason::REFUSED_STREAM) {
                return true;
            }
        }
        if let Some(hyper) = e.downcast_ref::<hyper::Error>() {
            if hyper.is_canceled() {
                return true;
            }
        }
        source = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_connection_is_retried_then_reported() {
        // A port with no listener: every attempt is refused, so the error comes back after the
        // backoff instead of at once.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        drop(listener);
        let inner = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap_or_else(|e| panic!("{e}"))
            .connect_lazy();
        let mut channel = Channel::from(inner);
        let request = http::Request::builder()
            .uri(format!("http://{addr}/x.Y/Z"))
            .body(Body::empty())
            .unwrap_or_else(|e| panic!("{e}"));
        let started = std::time::Instant::now();
        let err = channel
            .call(request)
            .await
            .err()
            .unwrap_or_else(|| panic!("no listener, yet an answer"));
        assert!(never_reached_the_service(err.as_ref()), "{err:?}");
        assert!(started.elapsed() >= BACKOFF.iter().sum::<Duration>());
    }
}
