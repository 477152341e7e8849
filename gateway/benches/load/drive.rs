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
