//! Transactional outbox. A service writes its change and the event in one transaction
//! (`enqueue_*`); the `Relay` publishes pending rows in order and stamps them published only
//! after the broker confirmed them. A broker outage delays events and never loses one; a crash
//! between confirm and stamp republishes, which consumers absorb by deduplicating on event id.

use std::sync::Arc;
use std::time::Duration;

use sqlx::{PgConnection, Row, SqliteConnection};
use tokio::sync::Notify;

use super::{BusError, Event, Publisher};
use crate::clock::SharedClock;
use crate::db::Database;

const BATCH: i64 = 200;
/// Published rows are kept this long for inspection, then pruned.
const KEEP_PUBLISHED_MILLIS: i64 = 24 * 60 * 60 * 1000;

pub async fn enqueue_postgres(tx: &mut PgConnection, event: &Event) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO outbox (id, project_id, event_type, body, created_at_millis) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(event.id)
    .bind(event.project_id)
    .bind(&event.event_type)
    .bind(body(event)?)
    .bind(event.created_at_millis)
    .execute(tx)
    .await?;
    Ok(())
}

pub async fn enqueue_sqlite(tx: &mut SqliteConnection, event: &Event) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO outbox (id, project_id, event_type, body, created_at_millis) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(event.id.to_string())
    .bind(event.project_id.to_string())
    .bind(&event.event_type)
    .bind(body(event)?)
    .bind(event.created_at_millis)
    .execute(tx)
    .await?;
    Ok(())
}

fn body(event: &Event) -> sqlx::Result<String> {
    serde_json::to_string(event).map_err(|e| sqlx::Error::Encode(Box::new(e)))
}

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    #[error(transparent)]
    Bus(#[from] BusError),
}

/// Publishes a database's pending outbox rows. Cheap to clone; `wake` after a commit makes the
/// relay look at once instead of at its next poll.
#[derive(Clone)]
pub struct Relay {
    db: Database,
    publisher: Arc<dyn Publisher>,
    clock: SharedClock,
    wake: Arc<Notify>,
    poll: Duration,
    /// The owning service, as the metrics' `service` label.
    service: &'static str,
}

impl Relay {
    pub fn new(db: Database, publisher: Arc<dyn Publisher>, clock: SharedClock) -> Self {
        Self {
            db,
            publisher,
            clock,
            wake: Arc::new(Notify::new()),
            poll: Duration::from_millis(250),
            service: "",
        }
    }

    /// Names the service in the relay's metrics.
    pub fn for_service(mut self, service: &'static str) -> Self {
        self.service = service;
        self
    }

    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Runs until `shutdown` resolves, then makes one last pass so committed events leave.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut failures = 0u32;
        let mut passes = 0u64;
        loop {
            let delay = match self.drain().await {
                Ok(n) if n as i64 >= BATCH => Duration::ZERO,
                Ok(_) => {
                    failures = 0;
                    self.poll
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    if failures == 1 || failures.is_multiple_of(20) {
                        tracing::warn!(error = %e, failures, "outbox relay cannot publish; will retry");
                    }
                    Duration::from_millis(100 * u64::from(failures.min(20)))
                }
            };
            passes += 1;
            if passes.is_multiple_of(1000) {
                let _ = self.prune().await;
            }
            tokio::select! {
                _ = &mut shutdown => {
                    let _ = self.drain().await;
                    return;
                }
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// Publishes up to one batch; returns how many rows were published.
    pub async fn drain(&self) -> Result<usize, RelayError> {
        match &self.db {
            Database::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                // SKIP LOCKED lets several relay replicas share the table without double work.
                let rows = sqlx::query(
                    "SELECT seq, body FROM outbox WHERE published_at_millis IS NULL \
                     ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED",
                )
                .bind(BATCH)
                .fetch_all(&mut *tx)
                .await?;
                let (done, failed) = self.publish_rows(&rows).await;
                if !done.is_empty() {
                    sqlx::query("UPDATE outbox SET published_at_millis = $1 WHERE seq = ANY($2)")
                        .bind(self.clock.now_millis())
                        .bind(&done)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                failed.map_or(Ok(done.len()), |e| Err(e.into()))
            }
            Database::Sqlite(pool) => {
                // Embedded mode runs one relay per database, so an ordered select is enough.
                let rows = sqlx::query(
                    "SELECT seq, body FROM outbox WHERE published_at_millis IS NULL \
                     ORDER BY seq LIMIT $1",
                )
                .bind(BATCH)
                .fetch_all(pool)
                .await?;
                let (done, failed) = self.publish_rows(&rows).await;
                for seq in &done {
                    sqlx::query("UPDATE outbox SET published_at_millis = $1 WHERE seq = $2")
                        .bind(self.clock.now_millis())
                        .bind(seq)
                        .execute(pool)
                        .await?;
                }
                failed.map_or(Ok(done.len()), |e| Err(e.into()))
            }
        }
    }

    /// Publishes rows in order, stopping at the first failure so order is kept.
    async fn publish_rows<R>(&self, rows: &[R]) -> (Vec<i64>, Option<BusError>)
    where
        R: Row,
        for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        for<'r> &'r str: sqlx::ColumnIndex<R>,
    {
        let mut done = Vec::with_capacity(rows.len());
        let labels = crate::metrics::labels(&[("service", self.service)]);
        if rows.is_empty() {
            crate::metrics::OUTBOX_LAG.set(labels.clone(), 0.0);
        }
        for row in rows {
            let (seq, body): (i64, String) = match (row.try_get("seq"), row.try_get("body")) {
                (Ok(seq), Ok(body)) => (seq, body),
                _ => continue,
            };
            let event: Event = match serde_json::from_str(&body) {
                Ok(event) => event,
                Err(e) => {
                    // Written by our own enqueue, so this is a bug; keep the row for inspection.
                    tracing::error!(seq, error = %e, "undecodable outbox row skipped");
                    continue;
                }
            };
            if done.is_empty() {
                let age_ms = self.clock.now_millis() - event.created_at_millis;
                crate::metrics::OUTBOX_LAG.set(labels.clone(), age_ms.max(0) as f64 / 1000.0);
            }
            match self.publisher.publish(&event).await {
                Ok(()) => done.push(seq),
                Err(e) => {
                    crate::metrics::OUTBOX_PUBLISHED.add(labels, done.len() as f64);
                    return (done, Some(e));
                }
            }
        }
        crate::metrics::OUTBOX_PUBLISHED.add(labels, done.len() as f64);
        (done, None)
    }

    /// Rows still waiting to be published (outbox lag).
    pub async fn pending(&self) -> Result<i64, RelayError> {
        let sql = "SELECT COUNT(*) FROM outbox WHERE published_at_millis IS NULL";
        Ok(match &self.db {
            Database::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await?,
            Database::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await?,
        })
    }

    async fn prune(&self) -> Result<(), RelayError> {
        let cutoff = self.clock.now_millis() - KEEP_PUBLISHED_MILLIS;
        let sql = "DELETE FROM outbox WHERE published_at_millis < $1";
        match &self.db {
            Database::Postgres(pool) => sqlx::query(sql).bind(cutoff).execute(pool).await?,
            Database::Sqlite(pool) => {
                sqlx::query(sql).bind(cutoff).execute(pool).await?;
                return Ok(());
            }
        };
        Ok(())
    }
}

/// Writes an event into the outbox of the transaction's database, so a store can enqueue in
/// the same statement code on either backend.
#[async_trait::async_trait]
pub trait Enqueue {
    async fn enqueue(&mut self, event: &Event) -> sqlx::Result<()>;
}

#[async_trait::async_trait]
impl Enqueue for PgConnection {
    async fn enqueue(&mut self, event: &Event) -> sqlx::Result<()> {
        enqueue_postgres(self, event).await
    }
}

#[async_trait::async_trait]
impl Enqueue for SqliteConnection {
    async fn enqueue(&mut self, event: &Event) -> sqlx::Result<()> {
        enqueue_sqlite(self, event).await
    }
}
