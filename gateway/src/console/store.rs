//! Where console sessions live: in this process (embedded mode, one gateway) or in Redis
//! (several gateways). Entries expire after the idle timeout unless touched. Keys are hashes of
//! the session ids, so a dump of the store cannot be replayed as a cookie.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use tokio::sync::OnceCell;

#[async_trait::async_trait]
pub trait SessionStore: Send + Sync {
    async fn get(&self, key: &str) -> anyhow::Result<Option<String>>;
    /// Stores `value` under `key` for `ttl` from now (writing again restarts the clock).
    async fn put(&self, key: &str, value: &str, ttl: Duration) -> anyhow::Result<()>;
    async fn delete(&self, key: &str) -> anyhow::Result<()>;
}

/// Sessions of a single gateway process.
#[derive(Default)]
pub struct InMemory {
    entries: Mutex<HashMap<String, (Instant, String)>>,
}

/// Entries kept at most; a full map drops the expired ones first, then everything.
const MAX_ENTRIES: usize = 10_000;

#[async_trait::async_trait]
impl SessionStore for InMemory {
    async fn get(&self, key: &str) -> anyhow::Result<Option<String>> {
        let entries = self
            .entries
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        Ok(entries
            .get(key)
            .filter(|(until, _)| *until > Instant::now())
            .map(|(_, v)| v.clone()))
    }

    async fn put(&self, key: &str, value: &str, ttl: Duration) -> anyhow::Result<()> {
        let mut entries = self
            .entries
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        if entries.len() >= MAX_ENTRIES {
            let now = Instant::now();
            entries.retain(|_, (until, _)| *until > now);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key.to_owned(), (Instant::now() + ttl, value.to_owned()));
        Ok(())
    }

    async fn delete(&self, key: &str) -> anyhow::Result<()> {
        let mut entries = self
            .entries
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        entries.remove(key);
        Ok(())
    }
}

/// Sessions shared by every gateway through Redis (`SET … PX`).
pub struct InRedis {
    client: redis::Client,
    connection: OnceCell<ConnectionManager>,
    prefix: String,
}

impl InRedis {
    pub fn new(url: &str, prefix: &str) -> anyhow::Result<Self> {
        Ok(Self {
            client: redis::Client::open(url)?,
            connection: OnceCell::new(),
            prefix: format!("{prefix}console:"),
        })
    }

    async fn connection(&self) -> redis::RedisResult<ConnectionManager> {
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Duration::from_secs(1))
            .set_response_timeout(Duration::from_secs(1))
            .set_number_of_retries(1);
        self.connection
            .get_or_try_init(|| ConnectionManager::new_with_config(self.client.clone(), config))
            .await
            .cloned()
    }
}

#[async_trait::async_trait]
impl SessionStore for InRedis {
    async fn get(&self, key: &str) -> anyhow::Result<Option<String>> {
        let mut c = self.connection().await?;
        let value: Option<String> = redis::cmd("GET")
            .arg(format!("{}{key}", self.prefix))
            .query_async(&mut c)
            .await?;
        Ok(value)
    }

    async fn put(&self, key: &str, value: &str, ttl: Duration) -> anyhow::Result<()> {
        let mut c = self.connection().await?;
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        redis::cmd("SET")
            .arg(format!("{}{key}", self.prefix))
            .arg(value)
            .arg("PX")
            .arg(ttl_ms)
            .query_async::<()>(&mut c)
            .await?;
        Ok(())
    }

    async fn delete(&self, key: &str) -> anyhow::Result<()> {
        let mut c = self.connection().await?;
        redis::cmd("DEL")
            .arg(format!("{}{key}", self.prefix))
            .query_async::<()>(&mut c)
            .await?;
        Ok(())
    }
}
