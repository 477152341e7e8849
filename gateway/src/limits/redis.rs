//! Counters in Redis, shared by every gateway: one script call per request increments all the
//! request's counters atomically. Calls are bounded in time; after a failure Redis is skipped
//! for a short while and the caller falls back to local counters, so a stopped or hanging Redis
//! never fails a request.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use tokio::sync::OnceCell;

/// A Redis that has not answered by then is treated as down for this request.
const CALL_TIMEOUT: Duration = Duration::from_millis(300);
/// How long to skip Redis after a failure before trying again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Counts a request in all its keys, or in none when any is full, so refused requests do not
/// use up budgets (a refused password guess is not an evaluated one). ARGV holds, per key, its
/// limit and its time to live in milliseconds. Returns 1 when counted, else 0, then the counts.
const SCRIPT: &str = r"
local counts = {}
for i, key in ipairs(KEYS) do
  counts[i] = tonumber(redis.call('GET', key) or '0')
  if counts[i] >= tonumber(ARGV[2 * i - 1]) then
    table.insert(counts, 1, 0)
    return counts
  end
end
for i, key in ipairs(KEYS) do
  counts[i] = redis.call('INCR', key)
  if counts[i] == 1 then redis.call('PEXPIRE', key, ARGV[2 * i]) end
end
table.insert(counts, 1, 1)
return counts
";

pub struct RedisCounters {
    client: redis::Client,
    connection: OnceCell<ConnectionManager>,
    script: redis::Script,
    started: Instant,
    /// Milliseconds since `started` before which Redis is not tried.
    skip_until_ms: AtomicU64,
    pub up: AtomicBool,
}

impl RedisCounters {
    pub fn new(url: &str) -> anyhow::Result<Self> {
        Ok(Self {
            client: redis::Client::open(url)?,
            connection: OnceCell::new(),
            script: redis::Script::new(SCRIPT),
            started: Instant::now(),
            skip_until_ms: AtomicU64::new(0),
            up: AtomicBool::new(true),
        })
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    async fn connection(&self) -> redis::RedisResult<ConnectionManager> {
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(CALL_TIMEOUT)
            .set_response_timeout(CALL_TIMEOUT)
            .set_number_of_retries(1);
        self.connection
            .get_or_try_init(|| ConnectionManager::new_with_config(self.client.clone(), config))
            .await
            .cloned()
    }

    /// Counts the request (see `SCRIPT`): whether it was counted and the counts, or `None`
    /// when Redis cannot answer now. `keys` are (key, limit, time to live in ms).
    pub async fn count(&self, keys: &[(String, u64, u64)]) -> Option<(bool, Vec<u64>)> {
        if self.elapsed_ms() < self.skip_until_ms.load(Ordering::Relaxed) {
            return None;
        }
        let call = async {
            let mut conn = self.connection().await?;
            let mut invocation = self.script.prepare_invoke();
            for (key, limit, ttl_ms) in keys {
                invocation.key(key).arg(*limit).arg(*ttl_ms);
            }
            invocation.invoke_async::<Vec<u64>>(&mut conn).await
        };
        let outcome = tokio::time::timeout(CALL_TIMEOUT * 2, call).await;
        match outcome {
            Ok(Ok(mut counts)) if !counts.is_empty() => {
                if !self.up.swap(true, Ordering::Relaxed) {
                    tracing::info!("Redis answers again; rate limits are shared across gateways");
                }
                let counted = counts.remove(0) == 1;
                Some((counted, counts))
            }
            failed => {
                let why = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "timed out".to_owned(),
                };
                self.skip_until_ms.store(
                    self.elapsed_ms() + RETRY_AFTER.as_millis() as u64,
                    Ordering::Relaxed,
                );
                if self.up.swap(false, Ordering::Relaxed) {
                    tracing::warn!(error = %why, "Redis is unreachable; rate limits fall back to this gateway's counters");
                }
                None
            }
        }
    }
}

/// Deletes every key under `prefix` (tests and benchmarks clean up after themselves).
pub async fn delete_prefix(url: &str, prefix: &str) -> redis::RedisResult<()> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut conn)
        .await?;
    if !keys.is_empty() {
        redis::cmd("DEL")
            .arg(keys)
            .query_async::<()>(&mut conn)
            .await?;
    }
    Ok(())
}
