//! The load engine: a fixed number of workers call one operation for a fixed time; the figures
//! are throughput, latency percentiles and errors.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one scenario measured.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
}

/// Runs `op(i)` from `workers` tasks for `duration` (`i` counts per worker, starting at the
/// worker's number, so workers spread over fixtures). An operation answers whether it succeeded.
pub async fn run<F, Fut>(workers: usize, duration: Duration, op: F) -> Stats
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let op = Arc::new(op);
    let started = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let op = op.clone();
            tokio::spawn(async move {
                let (mut latencies, mut errors) = (Vec::new(), 0u64);
                let mut i = w;
                while started.elapsed() < duration {
                    let t = Instant::now();
                    if op(i).await {
                        latencies.push(t.elapsed());
                    } else {
                        errors += 1;
                    }
                    i += workers;
                }
                (latencies, errors)
            })
        })
        .collect();
    summary(tasks, started).await
}

/// The figures of workers that each report their latencies and errors.
async fn summary(
    tasks: Vec<tokio::task::JoinHandle<(Vec<Duration>, u64)>>,
    started: Instant,
) -> Stats {
    let (mut all, mut errors) = (Vec::new(), 0);
    for task in tasks {
        if let Ok((latencies, e)) = task.await {
            all.extend(latencies);
            errors += e;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    Stats {
        per_second: all.len() as f64 / elapsed,
        p50_ms: percentile(&all, 0.50),
        p99_ms: percentile(&all, 0.99),
        errors,
    }
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// Sends a request and answers whether the status was the expected one.
pub async fn expect(request: reqwest::RequestBuilder, status: u16) -> bool {
    match request.send().await {
        Ok(res) => {
            let ok = res.status().as_u16() == status;
            // Read the body so the connection goes back to the pool.
            let _ = res.bytes().await;
            ok
        }
        Err(_) => false,
    }
}

/// One HTTP/1.1 request, rendered once and sent as it is on a keep-alive connection.
pub fn http_request(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nhost: bench\r\n");
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        out.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    out.push_str("\r\n");
    if let Some(body) = body {
        out.push_str(body);
    }
    out.into_bytes()
}

/// What a worker sends as its `i`-th request.
pub type Requests = Arc<dyn Fn(usize) -> Vec<u8> + Send + Sync>;

/// Drives `addr` from `workers` keep-alive connections for `duration` with a lean HTTP/1.1
/// client on one thread of its own, so the load generator costs as little as wrk does and its
/// share of the two cores is the same in every scenario; a success is an answer with status
/// `expect`.
pub fn blast(
    addr: std::net::SocketAddr,
    workers: usize,
    duration: Duration,
    requests: Requests,
    expect: u16,
) -> std::thread::JoinHandle<Stats> {
    std::thread::spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(_) => return Stats::default(),
        };
        runtime.block_on(async move {
            let started = Instant::now();
            let tasks: Vec<_> = (0..workers)
                .map(|w| {
                    let requests = requests.clone();
                    tokio::spawn(async move {
                        let mut latencies = Vec::new();
                        let mut errors = 0u64;
                        let mut i = w;
                        let mut connection: Option<Connection> = None;
                        while started.elapsed() < duration {
                            if connection.is_none() {
                                connection = Connection::open(addr).await;
                            }
                            let Some(conn) = connection.as_mut() else {
                                errors += 1;
                                tokio::time::sleep(Duration::from_millis(10)).await;
                                continue;
                            };
                            let t = Instant::now();
                            match conn.exchange(&requests(i)).await {
                                Some(status) if status == expect => latencies.push(t.elapsed()),
                                Some(_) => errors += 1,
                                None => {
                                    errors += 1;
                                    connection = None;
                                }
                            }
                            i += workers;
                        }
                        (latencies, errors)
                    })
                })
                .collect();
            summary(tasks, started).await
        })
    })
}

/// A keep-alive HTTP/1.1 connection that reads answers framed by `content-length`.
struct Connection {
    stream: tokio::net::TcpStream,
    buffer: Vec<u8>,
}

impl Connection {
    async fn open(addr: std::net::SocketAddr) -> Option<Self> {
        let stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        stream.set_nodelay(true).ok()?;
        Some(Self {
            stream,
            buffer: Vec::with_capacity(16 * 1024),
        })
    }

    /// Sends one request and reads its answer; the status, or `None` when the connection failed.
    async fn exchange(&mut self, request: &[u8]) -> Option<u16> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.stream.write_all(request).await.ok()?;
        self.buffer.clear();
        let mut chunk = [0u8; 16 * 1024];
        let head_end = loop {
            if let Some(end) = find(&self.buffer, b"\r\n\r\n") {
                break end + 4;
            }
            let n = self.stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            self.buffer.extend_from_slice(&chunk[..n]);
        };
        let head = std::str::from_utf8(&self.buffer[..head_end]).ok()?;
        let status: u16 = head.get(9..12)?.parse().ok()?;
        let length: usize = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())
                    .flatten()
            })
            .unwrap_or(0);
        let close = head.to_ascii_lowercase().contains("connection: close");
        while self.buffer.len() < head_end + length {
            let n = self.stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            self.buffer.extend_from_slice(&chunk[..n]);
        }
        if close {
            return None;
        }
        Some(status)
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
