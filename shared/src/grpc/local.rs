//! Components in one process (the embedded system, tests) call each other without sockets. A
//! gRPC server registers its routes under the address it listens on, and a channel whose target
//! is that one address hands each call to the routes directly: the same generated client and
//! server code, metadata, admission, deadline, span and metrics as over the network, without
//! HTTP/2 framing, loopback syscalls or a hop between connection tasks. Callers in other
//! processes still reach the listener.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, LazyLock, RwLock};
use std::time::Duration;

use tonic::body::Body;
use tonic::Status;
use tower::util::BoxCloneSyncService;
use tower::ServiceExt;

/// A server's routes, as callers in this process reach them.
pub type Handler = BoxCloneSyncService<http::Request<Body>, http::Response<Body>, Infallible>;

/// A registered handler and the lock its calls hold while in flight (a drain takes it whole).
#[derive(Clone)]
struct Served {
    handler: Handler,
    in_flight: Arc<tokio::sync::RwLock<()>>,
}

static SERVED: LazyLock<RwLock<HashMap<SocketAddr, Served>>> = LazyLock::new(Default::default);

/// Keeps `addr` reachable in-process until `drain` (or drop).
pub struct Registration {
    addr: SocketAddr,
    in_flight: Arc<tokio::sync::RwLock<()>>,
}

/// Makes `handler` the in-process answer for calls to `addr`.
pub fn register(addr: SocketAddr, handler: Handler) -> Registration {
    let in_flight = Arc::new(tokio::sync::RwLock::new(()));
    if let Ok(mut served) = SERVED.write() {
        served.insert(
            addr,
            Served {
                handler,
                in_flight: in_flight.clone(),
            },
        );
    }
    Registration { addr, in_flight }
}

impl Registration {
    /// Takes no new calls from now on; calls in this process go over the network instead,
    /// where the server refuses them as it stops.
    pub fn withdraw(&self) {
        if let Ok(mut served) = SERVED.write() {
            if served
                .get(&self.addr)
                .is_some_and(|s| Arc::ptr_eq(&s.in_flight, &self.in_flight))
            {
                served.remove(&self.addr);
            }
        }
    }

    /// Withdraws, then waits for the calls in flight (as a server's graceful shutdown waits
    /// for the calls on its connections).
    pub async fn drain(&self) {
        self.withdraw();
        let _all = self.in_flight.write().await;
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.withdraw();
    }
}

/// Calls the routes this process serves at `addr`; gives the request back when it serves
/// nothing there (any more), so the caller goes over the network instead.
pub async fn call(
    addr: &SocketAddr,
    request: http::Request<Body>,
) -> Result<http::Response<Body>, http::Request<Body>> {
    let served = SERVED.read().ok().and_then(|s| s.get(addr).cloned());
    let Some(served) = served else {
        return Err(request);
    };
    let Ok(_in_flight) = served.in_flight.clone().try_read_owned() else {
        // Draining: as over the network, a stopping server takes no new calls.
        return Ok(Status::unavailable("the service is stopping").into_http());
    };
    Ok(answer(&served.handler, request).await)
}

/// `handler`'s answer to one call, within the caller's deadline as tonic's server enforces it.
pub async fn answer(handler: &Handler, request: http::Request<Body>) -> http::Response<Body> {
    let deadline = grpc_timeout(request.headers());
    let call = handler.clone().oneshot(request);
    let response = match deadline {
        Some(d) => match tokio::time::timeout(d, call).await {
            Ok(r) => r,
            Err(_) => return Status::cancelled("Timeout expired").into_http(),
        },
        None => call.await,
    };
    response.unwrap_or_else(|never| match never {})
}

/// The `grpc-timeout` header (gRPC over HTTP/2: up to eight digits and a unit).
pub fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let text = headers.get("grpc-timeout")?.to_str().ok()?;
    let split = text.len().checked_sub(1)?;
    let (value, unit) = text.split_at(split);
    if value.is_empty() || value.len() > 8 {
        return None;
    }
    let value: u64 = value.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(value * 3600),
        "M" => Duration::from_secs(value * 60),
        "S" => Duration::from_secs(value),
        "m" => Duration::from_millis(value),
        "u" => Duration::from_micros(value),
        "n" => Duration::from_nanos(value),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_read_every_unit() {
        let at = |v: &str| {
            let mut h = http::HeaderMap::new();
            h.insert(
                "grpc-timeout",
                v.parse().unwrap_or_else(|e| panic!("{e:?}")),
            );
            grpc_timeout(&h)
        };
        assert_eq!(at("10S"), Some(Duration::from_secs(10)));
        assert_eq!(at("250m"), Some(Duration::from_millis(250)));
        assert_eq!(at("2M"), Some(Duration::from_secs(120)));
        assert_eq!(at("123456789S"), None);
        assert_eq!(at("S"), None);
        assert_eq!(at("5x"), None);
    }
}
