//! The channel every component calls another through: each call goes to one replica of the
//! target (see `balance`), and a call that never reached a service is sent again, to another
//! replica when there is one, as gRPC's own clients do: a refused connection, a stream the
//! server refused with GOAWAY while draining for shutdown, or a request the connection dropped
//! before sending it. Sending those again is safe, and it is what lets a service restart one
//! replica at a time without failing a request. A call that may have reached the service is
//! never repeated; if its connection broke, before the answer or in the middle of it, it fails
//! as UNAVAILABLE (the gateway's 503 with `Retry-After`), not as an unknown error.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tonic::body::Body;
use tonic::Status;

use super::balance::Pool;
use super::failure::{connection_lost, never_reached_the_service};
use super::mux;
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

/// A channel to one component's replicas that resends calls which never reached one.
#[derive(Clone)]
pub struct Channel {
    pool: Arc<Pool>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("addresses", &self.pool.addresses())
            .finish()
    }
}

impl Channel {
    /// A channel over every replica `target` names (see `balance::parse_target`).
    pub fn balanced(target: &str) -> anyhow::Result<Self> {
        Ok(Self {
            pool: Pool::new(target)?,
        })
    }

    /// The addresses calls are spread over now.
    pub fn addresses(&self) -> Vec<std::net::SocketAddr> {
        self.pool.addresses()
    }
}

impl From<tonic::transport::Channel> for Channel {
    fn from(inner: tonic::transport::Channel) -> Self {
        Self {
            pool: Pool::fixed(inner),
        }
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
        let pool = self.pool.clone();
        Box::pin(async move {
            // A component of this process answers without a socket (see `local`).
            let request = match pool.local_addr() {
                Some(addr) => match super::local::call(&addr, request).await {
                    Ok(response) => return Ok(response.map(unavailable_if_cut)),
                    Err(request) => request,
                },
                None => request,
            };
            let (parts, body) = request.into_parts();
            // Calls are unary: the body is one length-prefixed message, kept to be sent again.
            let body = body.collect().await?.to_bytes();
            let mut backoff = BACKOFF.iter();
            loop {
                let Some(call) = pool.pick().await else {
                    return Err(Status::unavailable("no address for this service").into());
                };
                // Small calls travel with the others asked of this replica meanwhile (`mux`).
                let outcome = if body.len() <= mux::MAX_BATCHED_BODY {
                    call.replica().mux.call(parts.clone(), body.clone()).await
                } else {
                    let attempt = rebuild(&parts, &body);
                    let mut channel = call.replica().channel.clone();
                    match channel.ready().await {
                        Ok(ready) => ready.call(attempt).await.map_err(Into::into),
                        Err(e) => Err(e.into()),
                    }
                };
                let e = match outcome {
                    Ok(response) => return Ok(response.map(unavailable_if_cut)),
                    Err(e) => e,
                };
                if !never_reached_the_service(e.as_ref()) {
                    return Err(match connection_lost(e.as_ref()) {
                        // The replica may have died: keep the next calls off it until its
                        // health watch reaches it again, rather than sending each into the
                        // same broken connection.
                        Some(status) => {
                            call.replica().unreachable();
                            pool.resolve_soon();
                            status.into()
                        }
                        None => e,
                    });
                }
                // Out of the picks until its health watch reaches it again; and perhaps gone for
                // good, so look the target up again.
                call.replica().unreachable();
                pool.resolve_soon();
                drop(call);
                match backoff.next() {
                    Some(wait) => {
                        tracing::debug!(error = %e, uri = %parts.uri, "resending a call that did not reach its service");
                        tokio::time::sleep(*wait).await;
                    }
                    None => {
                        return Err(Status::unavailable(format!("service unreachable: {e}")).into())
                    }
                }
            }
        })
    }
}

/// An answer whose connection can still break after its headers arrived (the replica died
/// while sending the message or the trailers): that break fails the call as UNAVAILABLE too,
/// where tonic alone would report an unknown or internal error (the gateway's 500).
fn unavailable_if_cut(body: Body) -> Body {
    Body::new(body.map_err(|status| {
        if status.code() == tonic::Code::Unavailable {
            return status;
        }
        match status.source().and_then(connection_lost) {
            Some(lost) => lost,
            None => status,
        }
    }))
}

fn rebuild(parts: &http::request::Parts, body: &Bytes) -> http::Request<Body> {
    let mut request = http::Request::new(Body::new(Full::new(body.clone())));
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = parts.uri.clone();
    *request.version_mut() = parts.version;
    *request.headers_mut() = parts.headers.clone();
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A channel to `addr` and a unary call to send on it.
    fn call_to(addr: std::net::SocketAddr) -> (Channel, http::Request<Body>) {
        let inner = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap_or_else(|e| panic!("{e}"))
            .connect_lazy();
        let request = http::Request::builder()
            .uri(format!("http://{addr}/x.Y/Z"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Body::empty())
            .unwrap_or_else(|e| panic!("{e}"));
        (Channel::from(inner), request)
    }

    #[tokio::test]
    async fn a_refused_connection_is_retried_then_reported() {
        // A port with no listener: every attempt is refused, so the error comes back after the
        // backoff instead of at once.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        drop(listener);
        let (mut channel, request) = call_to(addr);
        let started = std::time::Instant::now();
        let err = channel
            .call(request)
            .await
            .err()
            .unwrap_or_else(|| panic!("no listener, yet an answer"));
        let status = err
            .downcast::<Status>()
            .unwrap_or_else(|e| panic!("not a status: {e:?}"));
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        assert!(started.elapsed() >= BACKOFF.iter().sum::<Duration>());
    }

    #[tokio::test]
    async fn a_connection_cut_after_the_headers_fails_the_call_as_unavailable() {
        // A replica that answers a call's headers and then dies: its connection closes with
        // the message and trailers unsent.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap_or_else(|e| panic!("{e}"));
            let mut connection = h2::server::handshake(socket)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let Some(Ok((_, mut respond))) = connection.accept().await else {
                panic!("no call arrived");
            };
            let headers = http::Response::builder()
                .header("content-type", "application/grpc")
                .body(())
                .unwrap_or_else(|e| panic!("{e}"));
            let _stream = respond
                .send_response(headers, false)
                .unwrap_or_else(|e| panic!("{e}"));
            // Driving the connection a little sends the headers; dropping it closes the socket.
            let _ = tokio::time::timeout(Duration::from_millis(200), connection.accept()).await;
        });
        let (mut channel, request) = call_to(addr);
        // The call travels in a batch, whose answer arrives whole or not at all: the cut shows
        // as the call's error there, and in the answer's body on a stream of its own.
        let status = match channel.call(request).await {
            Ok(response) => response
                .into_body()
                .collect()
                .await
                .err()
                .unwrap_or_else(|| panic!("the connection was cut, yet the answer ended")),
            Err(e) => Status::from_error(e),
        };
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    }
}
