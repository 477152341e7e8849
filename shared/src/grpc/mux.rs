//! Unary calls to one replica that travel together (`latchkey.mux.v1.Mux`). Under load a
//! component has many calls to the same replica at once; each on its own HTTP/2 stream costs a
//! header block, frames, and a wake-up of both sides' connection tasks and of the server's
//! handler, which on a loopback hop is more than the work most calls do. The calls asked for
//! until the sending task's next turn of the scheduler (see `batching`) go out as one
//! `Mux.Call`; the server runs each through the same routes, admission, deadline, span and
//! metrics as a call that came alone, and streams answers back as they are ready, so a slow
//! call holds up no other. A call that finds nothing else waiting goes on its own stream.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use http_body_util::{BodyExt, Full, StreamBody};
use latchkey_proto::mux::v1 as pb;
use tokio::sync::{mpsc, oneshot};
use tonic::body::Body;
use tonic::{Request, Response, Status};

use crate::batching::Batches;
use tower::ServiceExt;

type BoxError = Box<dyn StdError + Send + Sync>;

/// Calls a server takes in one batch; a caller sends at most this many together.
const MAX_CALLS: usize = 256;
/// A call whose request is larger goes on its own stream (so batches stay small messages).
pub const MAX_BATCHED_BODY: usize = 64 * 1024;
/// What one `Answers` message carries at most, besides a single larger answer.
const ANSWERS_BYTES: usize = 1024 * 1024;
/// Room for the largest batch both ways (tonic's default limit is 4 MiB).
const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// The error of a batched call that never reached the server (the batch was refused before it
/// was processed), so the caller may send it again as it would a call of its own.
#[derive(Debug)]
pub struct NotSent(pub String);

impl std::fmt::Display for NotSent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not sent: {}", self.0)
    }
}

impl StdError for NotSent {}

/// What a batch's failure means for its calls.
enum Failure {
    /// Not processed at all: every call may be sent again.
    NotSent,
    /// Perhaps processed: every call fails with this status.
    Status(Status),
}

type Answer = Result<http::Response<Body>, BoxError>;

struct Waiting {
    parts: http::request::Parts,
    body: Bytes,
    tx: oneshot::Sender<Answer>,
}

/// The caller's side, one per replica connection.
pub struct Client {
    channel: tonic::transport::Channel,
    waiting: Batches<Waiting>,
}

impl Client {
    pub fn new(channel: tonic::transport::Channel) -> Arc<Self> {
        Arc::new(Self {
            channel,
            waiting: Batches::default(),
        })
    }

    /// Sends one unary call (its body collected) with the others asked for meanwhile; its
    /// deadline (`grpc-timeout`) holds here as tonic's channel holds it for a call of its own.
    pub async fn call(self: &Arc<Self>, parts: http::request::Parts, body: Bytes) -> Answer {
        let deadline = super::local::grpc_timeout(&parts.headers);
        let (tx, rx) = oneshot::channel();
        if self.waiting.push(Waiting { parts, body, tx }) {
            tokio::spawn(self.clone().run());
        }
        let answer = async {
            rx.await
                .unwrap_or_else(|_| Err(Status::unavailable("the call's batch was lost").into()))
        };
        match deadline {
            Some(d) => tokio::time::timeout(d, answer)
                .await
                .unwrap_or_else(|_| Err(Status::cancelled("Timeout expired").into())),
            None => answer.await,
        }
    }

    /// Sends what waits, one batch per turn, until nothing does.
    async fn run(self: Arc<Self>) {
        self.waiting
            .run(MAX_CALLS, |batch| {
                let client = self.clone();
                async move { client.exchange(batch).await }
            })
            .await;
    }

    /// One batch: alone on its own stream, or several in one `Mux.Call`.
    async fn exchange(&self, mut batch: Vec<Waiting>) {
        if batch.len() == 1 {
            let Some(one) = batch.pop() else { return };
            let request = http::Request::from_parts(one.parts, Body::new(Full::new(one.body)));
            let answer = match self.channel.clone().ready().await {
                Ok(mut ready) => tower::Service::call(&mut ready, request)
                    .await
                    .map_err(Into::into),
                Err(e) => Err(e.into()),
            };
            let _ = one.tx.send(answer);
            return;
        }
        let calls = pb::Calls {
            calls: batch
                .iter_mut()
                .enumerate()
                .map(|(id, w)| pb::Call {
                    id: u32::try_from(id).unwrap_or(u32::MAX),
                    path: w.parts.uri.path().to_owned(),
                    headers: to_pairs(&w.parts.headers),
                    body: std::mem::take(&mut w.body).to_vec(),
                })
                .collect(),
        };
        let mut waiters: HashMap<u32, oneshot::Sender<Answer>> = batch
            .into_iter()
            .enumerate()
            .map(|(id, w)| (u32::try_from(id).unwrap_or(u32::MAX), w.tx))
            .collect();
        let mut client = pb::mux_client::MuxClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE);
        let mut stream = match client.call(Request::new(calls)).await {
            Ok(stream) => stream.into_inner(),
            Err(status) => return fail_all(waiters, failure(&status)),
        };
        while !waiters.is_empty() {
            match stream.next().await {
                Some(Ok(answers)) => {
                    for answer in answers.answers {
                        if let Some(tx) = waiters.remove(&answer.id) {
                            let _ = tx.send(Ok(response(answer)));
                        }
                    }
                }
                // The server had the batch: whatever broke, no call of it is sent again.
                Some(Err(status)) => {
                    let failure = match failure(&status) {
                        Failure::NotSent => Failure::Status(Status::unavailable(
                            "the connection to the service broke during the call",
                        )),
                        known => known,
                    };
                    return fail_all(waiters, failure);
                }
                None => break,
            }
        }
        fail_all(
            waiters,
            Failure::Status(Status::unavailable(
                "the connection to the service ended before the call's answer",
            )),
        );
    }
}

/// What a failed `Mux.Call` means for its calls: the transport's error, when there is one,
/// decides as it would for a call of its own; a status the server answered applies to each.
fn failure(status: &Status) -> Failure {
    let Some(source) = status.source() else {
        return Failure::Status(status.clone());
    };
    if super::failure::never_reached_the_service(source) {
        return Failure::NotSent;
    }
    Failure::Status(super::failure::connection_lost(source).unwrap_or_else(|| status.clone()))
}

fn fail_all(waiters: HashMap<u32, oneshot::Sender<Answer>>, failure: Failure) {
    for tx in waiters.into_values() {
        let error: BoxError = match &failure {
            Failure::NotSent => Box::new(NotSent("the batch was refused".into())),
            Failure::Status(status) => Box::new(status.clone()),
        };
        let _ = tx.send(Err(error));
    }
}

fn to_pairs(headers: &http::HeaderMap) -> Vec<pb::Header> {
    headers
        .iter()
        .map(|(name, value)| pb::Header {
            name: name.as_str().to_owned(),
            value: value.as_bytes().to_vec(),
        })
        .collect()
}

fn from_pairs(pairs: Vec<pb::Header>) -> Result<http::HeaderMap, Status> {
    let mut headers = http::HeaderMap::with_capacity(pairs.len());
    for pair in pairs {
        let name = http::HeaderName::from_bytes(pair.name.as_bytes())
            .map_err(|_| Status::invalid_argument("a batched call has a bad header name"))?;
        let value = http::HeaderValue::from_bytes(&pair.value)
            .map_err(|_| Status::invalid_argument("a batched call has a bad header value"))?;
        headers.append(name, value);
    }
    Ok(headers)
}

/// An answer as the call's own response: its headers, then its message, then its trailers.
fn response(answer: pb::Answer) -> http::Response<Body> {
    let (headers, trailers) = match (from_pairs(answer.headers), from_pairs(answer.trailers)) {
        (Ok(h), Ok(t)) => (h, t),
        (Err(status), _) | (_, Err(status)) => return status.into_http(),
    };
    let mut frames = Vec::with_capacity(2);
    if !answer.body.is_empty() {
        frames.push(Ok::<_, Status>(http_body::Frame::data(Bytes::from(
            answer.body,
        ))));
    }
    if !trailers.is_empty() {
        frames.push(Ok(http_body::Frame::trailers(trailers)));
    }
    let mut response =
        http::Response::new(Body::new(StreamBody::new(futures::stream::iter(frames))));
    *response.headers_mut() = headers;
    response
}

/// The server's side: answers batches with the routes of the component (see `local::Handler`).
pub struct Server {
    handler: super::local::Handler,
}

impl Server {
    pub fn new(handler: super::local::Handler) -> pb::mux_server::MuxServer<Self> {
        pb::mux_server::MuxServer::new(Self { handler })
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }
}

type AnswerStream = Pin<Box<dyn Stream<Item = Result<pb::Answers, Status>> + Send>>;

#[tonic::async_trait]
impl pb::mux_server::Mux for Server {
    type CallStream = AnswerStream;

    async fn call(&self, request: Request<pb::Calls>) -> Result<Response<AnswerStream>, Status> {
        let calls = request.into_inner().calls;
        if calls.len() > MAX_CALLS {
            return Err(Status::invalid_argument(format!(
                "at most {MAX_CALLS} calls travel together"
            )));
        }
        let (tx, rx) = mpsc::unbounded_channel();
        for call in calls {
            let (handler, tx) = (self.handler.clone(), tx.clone());
            // Each call on a task of its own, so the calls of a batch run on every core.
            tokio::spawn(async move {
                let _ = tx.send(answer(handler, call).await);
            });
        }
        drop(tx);
        Ok(Response::new(Box::pin(futures::stream::unfold(
            rx,
            |mut rx| async move {
                // Whatever is ready goes in one message.
                let first = rx.recv().await?;
                let mut size = first.body.len();
                let mut answers = vec![first];
                while size < ANSWERS_BYTES {
                    let Ok(next) = rx.try_recv() else { break };
                    size += next.body.len();
                    answers.push(next);
                }
                Some((Ok(pb::Answers { answers }), rx))
            },
        ))))
    }
}

/// Runs one batched call through the routes and collects its answer.
async fn answer(handler: super::local::Handler, call: pb::Call) -> pb::Answer {
    let id = call.id;
    let request = match from_pairs(call.headers).and_then(|headers| {
        let mut request = http::Request::new(Body::new(Full::new(Bytes::from(call.body))));
        *request.method_mut() = http::Method::POST;
        *request.version_mut() = http::Version::HTTP_2;
        *request.uri_mut() = call
            .path
            .parse()
            .map_err(|_| Status::invalid_argument("a batched call has a bad path"))?;
        *request.headers_mut() = headers;
        Ok(request)
    }) {
        Ok(request) => request,
        Err(status) => return status_answer(id, status),
    };
    let (parts, body) = super::local::answer(&handler, request).await.into_parts();
    match body.collect().await {
        Ok(collected) => {
            let trailers = collected.trailers().map(to_pairs).unwrap_or_default();
            pb::Answer {
                id,
                headers: to_pairs(&parts.headers),
                body: collected.to_bytes().to_vec(),
                trailers,
            }
        }
        Err(status) => status_answer(id, status),
    }
}

fn status_answer(id: u32, status: Status) -> pb::Answer {
    let (parts, _) = status.into_http::<Body>().into_parts();
    pb::Answer {
        id,
        headers: to_pairs(&parts.headers),
        body: Vec::new(),
        trailers: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Echoes each call's body after a pause its path names (`/x.Y/Wait{ms}`), with the
    /// path in a trailer.
    fn echo() -> super::super::local::Handler {
        let service = tower::service_fn(|request: http::Request<Body>| async move {
            let path = request.uri().path().to_owned();
            let wait: u64 = path
                .rsplit("Wait")
                .next()
                .and_then(|ms| ms.parse().ok())
                .unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(wait)).await;
            let body = request
                .into_body()
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
            trailers.insert(
                "x-path",
                http::HeaderValue::from_str(&path).unwrap_or_else(|e| panic!("{e}")),
            );
            let frames = vec![
                Ok::<_, Status>(http_body::Frame::data(body)),
                Ok(http_body::Frame::trailers(trailers)),
            ];
            let mut response =
                http::Response::new(Body::new(StreamBody::new(futures::stream::iter(frames))));
            response.headers_mut().insert(
                "content-type",
                http::HeaderValue::from_static("application/grpc"),
            );
            Ok::<_, std::convert::Infallible>(response)
        });
        tower::util::BoxCloneSyncService::new(service)
    }

    /// A server of `Mux` over `echo`, counting the streams it is sent.
    async fn served() -> (std::net::SocketAddr, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let streams = Arc::new(AtomicUsize::new(0));
        let counted = streams.clone();
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        tokio::spawn(
            tonic::transport::Server::builder()
                .layer(tower::layer::layer_fn(move |inner| {
                    let counted = counted.clone();
                    tower::util::MapRequest::new(inner, move |r: http::Request<Body>| {
                        counted.fetch_add(1, Ordering::SeqCst);
                        r
                    })
                }))
                .add_service(Server::new(echo()))
                .serve_with_incoming(incoming),
        );
        (addr, streams)
    }

    fn call(
        addr: std::net::SocketAddr,
        path: &str,
        body: &'static [u8],
    ) -> (http::request::Parts, Bytes) {
        let (parts, ()) = http::Request::builder()
            .method("POST")
            .uri(format!("http://{addr}{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap_or_else(|e| panic!("{e}"))
            .into_parts();
        (parts, Bytes::from_static(body))
    }

    async fn read(answer: Answer) -> (Bytes, String) {
        let response = answer.unwrap_or_else(|e| panic!("{e}"));
        let collected = response
            .into_body()
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let path = collected
            .trailers()
            .and_then(|t| t.get("x-path"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        (collected.to_bytes(), path)
    }

    #[tokio::test]
    async fn calls_asked_together_share_one_stream_and_keep_their_own_answers() {
        let (addr, streams) = served().await;
        let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap_or_else(|e| panic!("{e}"));
        let client = Client::new(endpoint.connect_lazy());
        let bodies: [&'static [u8]; 3] = [b"one", b"two", b"three"];
        let asks = bodies.iter().enumerate().map(|(i, body)| {
            let (parts, body) = call(addr, &format!("/x.Y/Call{i}"), body);
            client.call(parts, body)
        });
        let answers = futures::future::join_all(asks).await;
        for (i, answer) in answers.into_iter().enumerate() {
            let (body, path) = read(answer).await;
            assert_eq!(body, Bytes::from_static(bodies[i]));
            assert_eq!(path, format!("/x.Y/Call{i}"));
        }
        assert_eq!(
            streams.load(Ordering::SeqCst),
            1,
            "one Mux.Call for the three"
        );

        // A call alone goes on a stream of its own, as without batching: this server has only
        // `Mux`, so it answers UNIMPLEMENTED.
        let (parts, body) = call(addr, "/x.Y/Alone", b"alone");
        let response = client
            .call(parts, body)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let status = response.headers().get("grpc-status").cloned();
        assert_eq!(status, Some(http::HeaderValue::from_static("12")));
        assert_eq!(streams.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_slow_call_holds_up_no_other_of_its_batch() {
        let (addr, _) = served().await;
        let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap_or_else(|e| panic!("{e}"));
        let client = Client::new(endpoint.connect_lazy());
        let (slow_parts, slow_body) = call(addr, "/x.Y/Wait3000", b"slow");
        let (fast_parts, fast_body) = call(addr, "/x.Y/Wait0", b"fast");
        let slow = client.call(slow_parts, slow_body);
        let fast = client.call(fast_parts, fast_body);
        tokio::pin!(slow);
        tokio::select! {
            answer = fast => assert_eq!(read(answer).await.0, Bytes::from_static(b"fast")),
            _ = &mut slow => panic!("the slow call answered first"),
        }
    }

    #[tokio::test]
    async fn a_batch_nobody_receives_is_not_sent_so_its_calls_may_be_sent_again() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        drop(listener);
        let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap_or_else(|e| panic!("{e}"));
        let client = Client::new(endpoint.connect_lazy());
        let (a, b) = (call(addr, "/x.Y/A", b"a"), call(addr, "/x.Y/B", b"b"));
        let (a, b) = tokio::join!(client.call(a.0, a.1), client.call(b.0, b.1));
        for answer in [a, b] {
            let e = answer
                .err()
                .unwrap_or_else(|| panic!("a refused batch answered"));
            assert!(
                super::super::failure::never_reached_the_service(e.as_ref()),
                "{e}"
            );
        }
    }
}
