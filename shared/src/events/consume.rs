//! Consumer helper: runs a handler for each event of a queue at most once per consumer name
//! (deduplicated by event id in the consumer's own database), acking only after the handler and
//! the dedupe mark committed.

use std::sync::Arc;

use super::{Delivery, Event, SharedBus};
use crate::clock::SharedClock;
use crate::db::Database;

/// What a consumer does with one event. Must be idempotent: a crash between the handler's
/// commit and the dedupe mark replays the event.
#[async_trait::async_trait]
pub trait Handler: Send + Sync {
    async fn handle(&self, event: &Event) -> anyhow::Result<()>;
}

/// Remembers which events a consumer has handled.
#[derive(Clone)]
pub struct Dedupe {
    db: Database,
    consumer: String,
    clock: SharedClock,
}

impl Dedupe {
    pub fn new(db: Database, consumer: &str, clock: SharedClock) -> Self {
        Self {
            db,
            consumer: consumer.to_owned(),
            clock,
        }
    }

    pub async fn seen(&self, event: &Event) -> sqlx::Result<bool> {
        let sql = "SELECT COUNT(*) FROM consumed_events \
                   WHERE project_id = $1 AND event_id = $2 AND consumer = $3";
        let n: i64 = match &self.db {
            Database::Postgres(pool) => {
                sqlx::query_scalar(sql)
                    .bind(event.project_id)
                    .bind(event.id)
                    .bind(&self.consumer)
                    .fetch_one(pool)
                    .await?
            }
            Database::Sqlite(pool) => {
                sqlx::query_scalar(sql)
                    .bind(event.project_id.to_string())
                    .bind(event.id.to_string())
                    .bind(&self.consumer)
                    .fetch_one(pool)
                    .await?
            }
        };
        Ok(n > 0)
    }

    pub async fn mark(&self, event: &Event) -> sqlx::Result<()> {
        let sql =
            "INSERT INTO consumed_events (project_id, event_id, consumer, consumed_at_millis) \
                   VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING";
        let now = self.clock.now_millis();
        match &self.db {
            Database::Postgres(pool) => {
                sqlx::query(sql)
                    .bind(event.project_id)
                    .bind(event.id)
                    .bind(&self.consumer)
                    .bind(now)
                    .execute(pool)
                    .await?
            }
            Database::Sqlite(pool) => {
                sqlx::query(sql)
                    .bind(event.project_id.to_string())
                    .bind(event.id.to_string())
                    .bind(&self.consumer)
                    .bind(now)
                    .execute(pool)
                    .await?;
                return Ok(());
            }
        };
        Ok(())
    }

    /// Handles a delivery once: skips events already handled, settles the delivery.
    pub async fn process(&self, delivery: Delivery, handler: &dyn Handler) {
        let event = &delivery.event;
        let outcome = async {
            if self.seen(event).await? {
                return Ok(());
            }
            handler.handle(event).await?;
            self.mark(event).await?;
            anyhow::Ok(())
        }
        .await;
        match outcome {
            Ok(()) => delivery.settle.ack().await,
            // A second failure of the same message means it is poison, not a blip.
            Err(e) if delivery.redelivered => {
                tracing::error!(event_id = %event.id, error = %e, "event failed twice; dead-lettered");
                delivery.settle.dead_letter().await;
            }
            Err(e) => {
                tracing::warn!(event_id = %event.id, error = %e, "event failed; will be redelivered");
                delivery.settle.retry().await;
            }
        }
    }
}

/// Consumes a queue until `shutdown` resolves.
pub async fn run(
    bus: SharedBus,
    queue: &str,
    bindings: &[&str],
    dedupe: Dedupe,
    handler: Arc<dyn Handler>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), super::BusError> {
    tokio::pin!(shutdown);
    // The broker may be down at start-up; keep trying rather than give up on the queue.
    let mut backoff = std::time::Duration::from_millis(200);
    let mut deliveries = loop {
        match bus.subscribe(queue, bindings).await {
            Ok(d) => break d,
            Err(e) => {
                tracing::warn!(queue, error = %e, "cannot subscribe yet; retrying");
                tokio::select! {
                    _ = &mut shutdown => return Ok(()),
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(std::time::Duration::from_secs(5));
            }
        }
    };
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            next = deliveries.recv() => match next {
                Some(delivery) => dedupe.process(delivery, handler.as_ref()).await,
                None => return Ok(()),
            },
        }
    }
}

/// How many events any consumer of this database has handled for a project.
pub async fn consumed_count(db: &Database, project_id: uuid::Uuid) -> sqlx::Result<i64> {
    let sql = "SELECT COUNT(*) FROM consumed_events WHERE project_id = $1";
    match db {
        Database::Postgres(pool) => {
            sqlx::query_scalar(sql)
                .bind(project_id)
                .fetch_one(pool)
                .await
        }
        Database::Sqlite(pool) => {
            sqlx::query_scalar(sql)
                .bind(project_id.to_string())
                .fetch_one(pool)
                .await
        }
    }
}
