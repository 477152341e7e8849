//! The webhooks service's tables: endpoints, messages, deliveries and attempts. One set of
//! statements for both backends, through `with_pool!`.

use latchkey_shared::db::Database;
use latchkey_shared::sealed::SecretsKey;
use latchkey_shared::with_pool;
use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Endpoint {
    pub project_id: Uuid,
    pub id: Uuid,
    pub url: String,
    pub description: String,
    /// JSON array, or None for every type.
    pub event_types: Option<String>,
    pub enabled: bool,
    pub secret: String,
    pub previous_secret: Option<String>,
    pub previous_secret_expires_at_millis: Option<i64>,
    pub created_at_millis: i64,
}

impl Endpoint {
    pub fn types(&self) -> Option<Vec<String>> {
        self.event_types
            .as_deref()
            .and_then(|t| serde_json::from_str(t).ok())
    }

    pub fn wants(&self, event_type: &str) -> bool {
        self.enabled
            && self
                .types()
                .is_none_or(|t| t.iter().any(|x| x == event_type))
    }
}

const ENDPOINT_COLUMNS: &str = "project_id, id, url, description, event_types, enabled, secret, \
    previous_secret, previous_secret_expires_at_millis, created_at_millis";

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Message {
    pub project_id: Uuid,
    pub id: String,
    pub event_type: String,
    pub body: String,
    pub created_at_millis: i64,
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Delivery {
    pub project_id: Uuid,
    pub endpoint_id: Uuid,
    pub message_id: String,
    pub status: String,
    pub attempt_count: i32,
    pub next_attempt_at_millis: Option<i64>,
    pub created_at_millis: i64,
}

const DELIVERY_COLUMNS: &str = "project_id, endpoint_id, message_id, status, attempt_count, \
    next_attempt_at_millis, created_at_millis";

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Attempt {
    pub at_millis: i64,
    pub response_status: Option<i32>,
    pub error: Option<String>,
    pub duration_ms: i64,
}

pub const PENDING: &str = "pending";
pub const SUCCEEDED: &str = "succeeded";
pub const FAILED: &str = "failed";

/// Purpose the endpoint secrets are sealed under.
pub(crate) const SEALED_AS: &str = "webhook-endpoint-secret";

#[derive(Debug, Clone)]
pub struct Store {
    db: Database,
    /// Endpoint secrets are stored sealed: signing needs them back, a dump must not show them.
    secrets: SecretsKey,
}

impl Store {
    pub fn new(db: Database, secrets: SecretsKey) -> Self {
        Self { db, secrets }
    }

    /// The row as stored: secrets sealed.
    fn sealed(&self, e: &Endpoint) -> Endpoint {
        Endpoint {
            secret: self.secrets.seal(SEALED_AS, &e.secret),
            previous_secret: e
                .previous_secret
                .as_deref()
                .map(|s| self.secrets.seal(SEALED_AS, s)),
            ..e.clone()
        }
    }

    /// The row as used: secrets opened.
    fn opened(&self, mut e: Endpoint) -> sqlx::Result<Endpoint> {
        let open = |s: &str| {
            self.secrets
                .open(SEALED_AS, s)
                .map_err(|err| sqlx::Error::Decode(Box::new(err)))
        };
        e.secret = open(&e.secret)?;
        e.previous_secret = e.previous_secret.as_deref().map(open).transpose()?;
        Ok(e)
    }

    pub async fn insert_endpoint(&self, e: &Endpoint) -> sqlx::Result<()> {
        let e = &self.sealed(e);
        let sql = format!(
            "INSERT INTO endpoints ({ENDPOINT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        );
        with_pool!(&self.db, pool => sqlx::query(&sql)
            .bind(e.project_id).bind(e.id).bind(&e.url).bind(&e.description).bind(&e.event_types)
            .bind(e.enabled).bind(&e.secret).bind(&e.previous_secret)
            .bind(e.previous_secret_expires_at_millis).bind(e.created_at_millis)
            .execute(pool).await.map(drop))
    }

    pub async fn update_endpoint(&self, e: &Endpoint) -> sqlx::Result<bool> {
        let e = &self.sealed(e);
        let sql =
            "UPDATE endpoints SET url = $1, description = $2, event_types = $3, enabled = $4, \
                   secret = $5, previous_secret = $6, previous_secret_expires_at_millis = $7 \
                   WHERE project_id = $8 AND id = $9";
        let done = with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(&e.url).bind(&e.description).bind(&e.event_types).bind(e.enabled)
            .bind(&e.secret).bind(&e.previous_secret).bind(e.previous_secret_expires_at_millis)
            .bind(e.project_id).bind(e.id)
            .execute(pool).await?.rows_affected());
        Ok(done > 0)
    }

    pub async fn delete_endpoint(&self, project: Uuid, id: Uuid) -> sqlx::Result<bool> {
        let done = with_pool!(&self.db, pool => sqlx::query("DELETE FROM endpoints WHERE project_id = $1 AND id = $2")
            .bind(project).bind(id).execute(pool).await?.rows_affected());
        Ok(done > 0)
    }

    pub async fn endpoint(&self, project: Uuid, id: Uuid) -> sqlx::Result<Option<Endpoint>> {
        let sql =
            format!("SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE project_id = $1 AND id = $2");
        let row: Option<Endpoint> = with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).bind(id).fetch_optional(pool).await)?;
        row.map(|e| self.opened(e)).transpose()
    }

    pub async fn endpoints(&self, project: Uuid) -> sqlx::Result<Vec<Endpoint>> {
        let sql = format!(
            "SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE project_id = $1 ORDER BY created_at_millis, id"
        );
        let rows: Vec<Endpoint> =
            with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(project).fetch_all(pool).await)?;
        rows.into_iter().map(|e| self.opened(e)).collect()
    }

    /// Records a message and one pending delivery per endpoint, once: a redelivered event
    /// finds both already there.
    pub async fn enqueue(&self, m: &Message, endpoints: &[Uuid], now: i64) -> sqlx::Result<()> {
        with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query(
                "INSERT INTO messages (project_id, id, event_type, body, created_at_millis) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            )
            .bind(m.project_id).bind(&m.id).bind(&m.event_type).bind(&m.body).bind(m.created_at_millis)
            .execute(&mut *tx).await?;
            for endpoint in endpoints {
                sqlx::query(
                    "INSERT INTO deliveries (project_id, endpoint_id, message_id, status, attempt_count, \
                     next_attempt_at_millis, created_at_millis) VALUES ($1, $2, $3, $4, 0, $5, $5) \
                     ON CONFLICT DO NOTHING",
                )
                .bind(m.project_id).bind(endpoint).bind(&m.id).bind(PENDING).bind(now)
                .execute(&mut *tx).await?;
            }
            tx.commit().await
        })
    }

    pub async fn message(&self, project: Uuid, id: &str) -> sqlx::Result<Option<Message>> {
        let sql = "SELECT project_id, id, event_type, body, created_at_millis FROM messages \
                   WHERE project_id = $1 AND id = $2";
        with_pool!(&self.db, pool => sqlx::query_as(sql).bind(project).bind(id).fetch_optional(pool).await)
    }

    /// Pending deliveries whose time has come, oldest first.
    pub async fn due(&self, now: i64, limit: i64) -> sqlx::Result<Vec<Delivery>> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE status = $1 AND next_attempt_at_millis <= $2 \
             ORDER BY next_attempt_at_millis LIMIT $3"
        );
        with_pool!(&self.db, pool => sqlx::query_as(&sql).bind(PENDING).bind(now).bind(limit).fetch_all(pool).await)
    }

    /// Takes a due delivery for one attempt by moving its next attempt past the lease; false
    /// when another worker took it first.
    pub async fn claim(&self, d: &Delivery, lease_until: i64) -> sqlx::Result<bool> {
        let sql = "UPDATE deliveries SET next_attempt_at_millis = $1 WHERE project_id = $2 \
                   AND endpoint_id = $3 AND message_id = $4 AND status = $5 AND next_attempt_at_millis = $6";
        let done = with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(lease_until).bind(d.project_id).bind(d.endpoint_id).bind(&d.message_id)
            .bind(PENDING).bind(d.next_attempt_at_millis)
            .execute(pool).await?.rows_affected());
        Ok(done == 1)
    }

    /// Records an attempt and the delivery's new state together, if the delivery is still
    /// under this attempt's lease; a replay meanwhile wins, and only the attempt is kept.
    pub async fn record(
        &self,
        d: &Delivery,
        attempt: &Attempt,
        lease_until: i64,
    ) -> sqlx::Result<()> {
        with_pool!(&self.db, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query(
                "INSERT INTO attempts (project_id, endpoint_id, message_id, at_millis, response_status, \
                 error, duration_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(d.project_id).bind(d.endpoint_id).bind(&d.message_id).bind(attempt.at_millis)
            .bind(attempt.response_status).bind(&attempt.error).bind(attempt.duration_ms)
            .execute(&mut *tx).await?;
            sqlx::query(
                "UPDATE deliveries SET status = $1, attempt_count = $2, next_attempt_at_millis = $3 \
                 WHERE project_id = $4 AND endpoint_id = $5 AND message_id = $6 AND next_attempt_at_millis = $7",
            )
            .bind(&d.status).bind(d.attempt_count).bind(d.next_attempt_at_millis)
            .bind(d.project_id).bind(d.endpoint_id).bind(&d.message_id).bind(lease_until)
            .execute(&mut *tx).await?;
            tx.commit().await
        })
    }

    /// Puts a delivery back in the queue for now, as if new (replay).
    pub async fn replay(
        &self,
        project: Uuid,
        endpoint: Uuid,
        message: &str,
        now: i64,
    ) -> sqlx::Result<bool> {
        let sql =
            "UPDATE deliveries SET status = $1, attempt_count = 0, next_attempt_at_millis = $2 \
                   WHERE project_id = $3 AND endpoint_id = $4 AND message_id = $5";
        let done = with_pool!(&self.db, pool => sqlx::query(sql)
            .bind(PENDING).bind(now).bind(project).bind(endpoint).bind(message)
            .execute(pool).await?.rows_affected());
        Ok(done > 0)
    }

    /// When a delivery of this endpoint was created: where a page that starts at it starts.
    pub async fn delivery_created_at(
        &self,
        project: Uuid,
        endpoint: Uuid,
        message: &str,
    ) -> sqlx::Result<Option<i64>> {
        let sql = "SELECT created_at_millis FROM deliveries \
                   WHERE project_id = $1 AND endpoint_id = $2 AND message_id = $3";
        with_pool!(&self.db, pool => sqlx::query_scalar(sql).bind(project).bind(endpoint).bind(message).fetch_optional(pool).await)
    }

    /// Up to `limit` of an endpoint's deliveries, newest first, from `start` (a delivery's
    /// creation time and message id) on; read from the endpoint's index, never all of them.
    pub async fn deliveries(
        &self,
        project: Uuid,
        endpoint: Uuid,
        start: Option<(i64, &str)>,
        limit: i64,
    ) -> sqlx::Result<Vec<(Delivery, String)>> {
        let from = if start.is_some() {
            "AND (d.created_at_millis, d.message_id) <= ($4, $5) "
        } else {
            ""
        };
        let sql = format!(
            "SELECT d.project_id, d.endpoint_id, d.message_id, d.status, d.attempt_count, \
             d.next_attempt_at_millis, d.created_at_millis, m.event_type \
             FROM deliveries d JOIN messages m ON m.project_id = d.project_id AND m.id = d.message_id \
             WHERE d.project_id = $1 AND d.endpoint_id = $2 {from}\
             ORDER BY d.created_at_millis DESC, d.message_id DESC LIMIT $3"
        );
        type Row = (Uuid, Uuid, String, String, i32, Option<i64>, i64, String);
        let (at, message) = start.unzip();
        let rows: Vec<Row> = with_pool!(&self.db, pool => {
            let query = sqlx::query_as(&sql).bind(project).bind(endpoint).bind(limit);
            let query = match (at, message) {
                (Some(at), Some(message)) => query.bind(at).bind(message),
                _ => query,
            };
            query.fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(
                |(
                    project_id,
                    endpoint_id,
                    message_id,
                    status,
                    attempt_count,
                    next,
                    created,
                    event_type,
                )| {
                    (
                        Delivery {
                            project_id,
                            endpoint_id,
                            message_id,
                            status,
                            attempt_count,
                            next_attempt_at_millis: next,
                            created_at_millis: created,
                        },
                        event_type,
                    )
                },
            )
            .collect())
    }

    pub async fn attempts(
        &self,
        project: Uuid,
        endpoint: Uuid,
        message: &str,
    ) -> sqlx::Result<Vec<Attempt>> {
        let sql = "SELECT at_millis, response_status, error, duration_ms FROM attempts \
                   WHERE project_id = $1 AND endpoint_id = $2 AND message_id = $3 ORDER BY at_millis";
        with_pool!(&self.db, pool => sqlx::query_as(sql).bind(project).bind(endpoint).bind(message).fetch_all(pool).await)
    }
}
