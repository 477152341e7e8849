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
/// use up budgets (a refused password guess is not an evaluated one).
///
/// KEYS[1] holds the newest settings version any gateway has seen for the project, ARGV[1] the
/// version the caller's limits come from (empty: the defaults, not checked): when the stored one is newer, nothing is counted and
/// 2 is returned, so the caller reloads its limits first (a settings change is in force on every
/// gateway for every request after the write answered, 80 §11.14); when the caller's is newer,
/// it is stored. Then ARGV holds, per counter key, its limit and its time to live in
/// milliseconds. Returns 1 when counted, else 0, then the counts.
const SCRIPT: &str = r"
if ARGV[1] ~= '' then
  local seen = tonumber(redis.call('GET', KEYS[1]) or '-1')
  local mine = tonumber(ARGV[1])
  if seen > mine then return {2} end
  if seen < mine then redis.call('SET', KEYS[1], ARGV[1]) end
end
local counts = {}
for i = 2, #KEYS do
  counts[i - 1] = tonumber(redis.call('GET', KEYS[i]) or '0')
  if counts[i - 1] >= tonumber(ARGV[2 * i - 2]) then
    table.insert(counts, 1, 0)
    return counts
  end
end
for i = 2, #KEYS do
  counts[i - 1] = redis.call('INCR', KEYS[i])
  if counts[i - 1] == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[2 * i - 1]) end
end
table.insert(counts, 1, 1)
return counts
";

/// Settles a password sign-in's guess counters once its answer is known: per key, `clear`
/// deletes it and `refund` takes back the one count the request added (never below zero; a key
/// whose window ended meanwhile is left alone).
const SETTLE: &str = r"
for i = 1, #KEYS do
  if ARGV[i] == 'clear' then
    redis.call('DEL', KEYS[i])
  elseif tonumber(redis.call('GET', KEYS[i]) or '0') > 0 then
    redis.call('DECR', KEYS[i])
  end
end
return {1}
";

/// What becomes of a counted request's counter once its answer is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Start the count over (a correct password for this address from this client).
    Clear,
    /// The request did not use up the budget after all (not a guess, or a correct one).
    Refund,
}

/// What the script decided.
pub enum Counted {
    /// Counted in every key; the counts after counting.
    Yes(Vec<u64>),
    /// A key was full; the counts, none incremented.
    No(Vec<u64>),
    /// The caller's limits are older than the project's settings: reload and count again.
    Stale,
}

pub struct RedisCounters {
    client: redis::Client,
    connection: OnceCell<ConnectionManager>,
    script: redis::Script,
    settle: redis::Script,
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
            settle: redis::Script::new(SETTLE),
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

    /// Counts the request (see `SCRIPT`), or `None` when Redis cannot answer now. `version`
    /// is the settings-version key and the version the limits come from; `keys` are (key,
    /// limit, time to live in ms). With no keys it only records a newer version.
    pub async fn count(
        &self,
        version: (&str, Option<i64>),
        keys: &[(String, u64, u64)],
    ) -> Option<Counted> {
        let seen = version.1.map(|v| v.to_string()).unwrap_or_default();
        let mut invocation = self.script.prepare_invoke();
        invocation.key(version.0).arg(seen);
        for (key, limit, ttl_ms) in keys {
            invocation.key(key).arg(*limit).arg(*ttl_ms);
        }
        let mut counts = self.invoke(invocation).await?;
        if counts.is_empty() {
            return None;
        }
        Some(match counts.remove(0) {
            1 => Counted::Yes(counts),
            2 => Counted::Stale,
            _ => Counted::No(counts),
        })
    }

    /// Settles counters `count` added to (see `SETTLE`); false when Redis cannot answer now.
    pub async fn settle(&self, keys: &[(String, Settle)]) -> bool {
        let mut invocation = self.settle.prepare_invoke();
        for (key, how) in keys {
            invocation.key(key).arg(match how {
                Settle::Clear => "clear",
                Settle::Refund => "refund",
            });
        }
        self.invoke(invocation).await.is_some()
    }

    /// Runs a script within the deadline, or `None` (and Redis skipped for a while) when it
    /// cannot.
    async fn invoke(&self, invocation: redis::ScriptInvocation<'_>) -> Option<Vec<u64>> {
        if self.elapsed_ms() < self.skip_until_ms.load(Ordering::Relaxed) {
            return None;
        }
        let call = async {
            let mut conn = self.connection().await?;
            invocation.invoke_async::<Vec<u64>>(&mut conn).await
        };
        match tokio::time::timeout(CALL_TIMEOUT * 2, call).await {
            Ok(Ok(answer)) => {
                if !self.up.swap(true, Ordering::Relaxed) {
                    tracing::info!("Redis answers again; rate limits are shared across gateways");
                }
                Some(answer)
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
