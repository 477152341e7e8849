//! Keeps an HTTP/1.1 keep-alive connection usable whatever the answer (issue 18 §1). An answer
//! made before the request body was read (no route, wrong method, bad credentials, a body too
//! large) leaves the body's bytes on the connection; if they arrive after the answer, the
//! server cannot reuse the connection and would close it under a client that has every reason
//! to send its next request on it. So the unread rest of the body is read and discarded before
//! the answer goes out, within the body-size limit and `DRAIN_TIMEOUT`; when that cannot be
//! done, the answer says `Connection: close`.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Version};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;

use crate::state::AppState;

/// How long the unread rest of a body may take to arrive before the connection is given up.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Where a request body that was dropped unfinished goes, for the middleware to drain.
type Slot = Arc<Mutex<Option<Body>>>;

/// A request body that, dropped before its end, leaves itself in `slot`.
struct Unread {
    inner: Option<Body>,
    slot: Slot,
    ended: bool,
}

impl HttpBody for Unread {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), HttpBody::size_hint)
    }
}

impl Drop for Unread {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        if !self.ended && !inner.is_end_stream() {
            if let Ok(mut slot) = self.slot.lock() {
                *slot = Some(inner);
            }
        }
    }
}

fn content_length(request: &Request) -> Option<u64> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

fn has_body(request: &Request) -> bool {
    request.headers().contains_key(header::TRANSFER_ENCODING)
        || content_length(request).is_some_and(|n| n > 0)
}

/// Reads and discards `body`; whether it ended within `limit` bytes and `DRAIN_TIMEOUT`.
async fn drain(mut body: Body, limit: usize) -> bool {
    let read = async {
        let mut seen = 0usize;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return false };
            if let Some(data) = frame.data_ref() {
                seen += data.len();
                if seen > limit {
                    return false;
                }
            }
        }
        true
    };
    tokio::time::timeout(DRAIN_TIMEOUT, read)
        .await
        .unwrap_or(false)
}

/// Middleware (outermost, HTTP/1 only): drains what the answer left unread, or closes.
pub async fn drain_unread(State(app): State<AppState>, request: Request, next: Next) -> Response {
    if request.version() > Version::HTTP_11 || !has_body(&request) {
        return next.run(request).await;
    }
    // A client waiting for `100 Continue` has not sent its body and will not unless asked; a
    // body over the limit is not worth reading.
    let limit = app.config.max_body_bytes;
    let not_worth_reading = request.headers().contains_key(header::EXPECT)
        || content_length(&request).is_some_and(|n| n > limit as u64);
    let slot: Slot = Arc::default();
    let (parts, body) = request.into_parts();
    let body = Body::new(Unread {
        inner: Some(body),
        slot: slot.clone(),
        ended: false,
    });
    let mut response = next.run(Request::from_parts(parts, body)).await;
    let unread = slot.lock().ok().and_then(|mut s| s.take());
    if let Some(unread) = unread {
        if not_worth_reading || !drain(unread, limit).await {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
    }
    response
}
