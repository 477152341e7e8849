//! Times each HTTP/1 request head from its first byte. hyper's own head timeout starts when a
//! connection begins to wait for the next request, so the slow-client limit (a few seconds) would
//! also be the longest a keep-alive connection may sit idle, and a client that reuses a
//! connection after that pause meets a connection being closed under it. Here hyper's timeout
//! is the idle limit and this wrapper gives a head that has begun `HEADER_READ_TIMEOUT` to finish.
//!
//! The wrapper watches bytes, not messages: a head starts with the first byte read after an
//! answer was written and ends at its blank line; a new connection's first head is timed from
//! the connection's start. HTTP/2 connections (the client preface) are left alone; their heads
//! are bounded by frame-size limits.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{sleep, Instant, Sleep};

const HTTP2_PREFACE_START: &[u8] = b"PRI * HTTP/2.0";

enum Phase {
    /// No byte of a connection read yet: timed like a head, so that connections opened and
    /// left silent do not pile up.
    Fresh,
    /// Waiting for the next request (hyper times this wait).
    Between,
    /// A head has begun; `newlines` counts the line ends in a row seen so far.
    Head { newlines: u8 },
    /// The head ended: the body, the answer, or HTTP/2 frames follow.
    Past,
    /// An HTTP/2 connection.
    Untimed,
}

/// An I/O stream that fails a read once a begun head has taken longer than its limit.
pub struct HeadClock<T> {
    inner: T,
    limit: Duration,
    phase: Phase,
    deadline: Pin<Box<Sleep>>,
}

impl<T> HeadClock<T> {
    pub fn new(inner: T, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            phase: Phase::Fresh,
            deadline: Box::pin(sleep(limit)),
        }
    }

    fn saw(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        match self.phase {
            Phase::Fresh if bytes.starts_with(HTTP2_PREFACE_START) => {
                self.phase = Phase::Untimed;
                return;
            }
            // The first head keeps the deadline set when the connection was accepted.
            Phase::Fresh => self.phase = Phase::Head { newlines: 0 },
            Phase::Between => {
                self.deadline.as_mut().reset(Instant::now() + self.limit);
                self.phase = Phase::Head { newlines: 0 };
            }
            _ => {}
        }
        if let Phase::Head { mut newlines } = self.phase {
            // A head ends at an empty line; a `\r` before a `\n` does not count as content.
            for &b in bytes {
                match b {
                    b'\n' => {
                        newlines += 1;
                        if newlines == 2 {
                            self.phase = Phase::Past;
                            return;
                        }
                    }
                    b'\r' => {}
                    _ => newlines = 0,
                }
            }
            self.phase = Phase::Head { newlines };
        }
    }

    /// Bytes of an answer went out; `start` is the first of them.
    fn answered(&mut self, start: &[u8]) {
        // `100 Continue` asks for the body of the request in progress.
        if matches!(self.phase, Phase::Past) && !start.starts_with(b"HTTP/1.1 1") {
            self.phase = Phase::Between;
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for HeadClock<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.saw(&buf.filled()[before..]);
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                if matches!(this.phase, Phase::Fresh | Phase::Head { .. })
                    && this.deadline.as_mut().poll(cx).is_ready()
                {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "request head not finished in time",
                    )));
                }
                Poll::Pending
            }
            other => other,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for HeadClock<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = ready!(Pin::new(&mut this.inner).poll_write(cx, buf));
        this.answered(buf);
        Poll::Ready(written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = ready!(Pin::new(&mut this.inner).poll_write_vectored(cx, bufs));
        let start = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &b[..]);
        this.answered(start);
        Poll::Ready(written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const LIMIT: Duration = Duration::from_millis(200);

    async fn read_some(clock: &mut HeadClock<tokio::io::DuplexStream>) -> io::Result<usize> {
        let mut buf = [0u8; 256];
        clock.read(&mut buf).await
    }

    #[tokio::test]
    async fn an_idle_connection_is_not_timed_but_a_begun_head_is() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut clock = HeadClock::new(server, LIMIT);

        // A whole head, answered, then a long quiet: reads just wait.
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .ok();
        assert!(read_some(&mut clock).await.is_ok_and(|n| n > 0));
        clock.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.ok();
        let idle = tokio::time::timeout(LIMIT * 5, read_some(&mut clock)).await;
        assert!(idle.is_err(), "an idle wait ended: {idle:?}");

        // The next head begins and stalls: the read fails once its time is up.
        client.write_all(b"GET / HTTP/1.1\r\nHo").await.ok();
        assert!(read_some(&mut clock).await.is_ok_and(|n| n > 0));
        let started = Instant::now();
        let stalled = read_some(&mut clock).await;
        assert_eq!(
            stalled.map_err(|e| e.kind()),
            Err(io::ErrorKind::TimedOut),
            "a stalled head was not cut off"
        );
        assert!(started.elapsed() >= LIMIT / 2, "cut off early");
    }

    #[tokio::test]
    async fn a_new_connections_first_head_is_timed_from_the_connection() {
        let limit = Duration::from_secs(1);
        let (mut client, server) = tokio::io::duplex(1024);
        let connected = Instant::now();
        let mut clock = HeadClock::new(server, limit);
        // Silent for most of the limit, then a head that stalls: timed from the start, it is
        // cut off at one limit, not at one limit after its first byte.
        tokio::time::sleep(limit * 7 / 10).await;
        client.write_all(b"GET / HTTP/1.1\r\nHo").await.ok();
        assert!(read_some(&mut clock).await.is_ok_and(|n| n > 0));
        let stalled = read_some(&mut clock).await;
        assert_eq!(stalled.map_err(|e| e.kind()), Err(io::ErrorKind::TimedOut));
        assert!(
            connected.elapsed() < limit * 14 / 10,
            "cut off after {:?}",
            connected.elapsed()
        );
    }

    #[tokio::test]
    async fn a_head_split_across_reads_ends_at_its_blank_line() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut clock = HeadClock::new(server, LIMIT);
        for piece in [&b"POST / HTTP/1.1\r\nHost: x\r"[..], b"\n\r", b"\n{\"a\":"] {
            client.write_all(piece).await.ok();
            assert!(read_some(&mut clock).await.is_ok_and(|n| n > 0));
        }
        // The body is slow, which is the body timeout's business, not this one's.
        let slow_body = tokio::time::timeout(LIMIT * 5, read_some(&mut clock)).await;
        assert!(slow_body.is_err(), "a slow body was cut off as a head");
    }

    #[tokio::test]
    async fn http2_connections_are_left_alone() {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut clock = HeadClock::new(server, LIMIT);
        client.write_all(b"PRI * HTTP/2.0\r\n").await.ok();
        assert!(read_some(&mut clock).await.is_ok_and(|n| n > 0));
        let waited = tokio::time::timeout(LIMIT * 5, read_some(&mut clock)).await;
        assert!(waited.is_err(), "an HTTP/2 connection was timed");
    }
}
