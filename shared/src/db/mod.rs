//! Connecting to a service's own database and migrating it. The URL picks the backend:
//! `postgres://…` in production, `sqlite://…` when embedded.

use std::borrow::Cow;
use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};

/// Point reads of concurrent requests answered by one statement.
pub mod coalesce;
/// Writes of concurrent requests committed together.
pub mod grouped;
/// Connection pooling without per-statement pings.
pub mod pool;
/// Substring search from indexes, in id order.
pub mod search;

pub use pool::{Pool, Transaction, Writers};

/// A service's connection pool, on one of the two backends.
#[derive(Debug, Clone)]
pub enum Database {
    Postgres(Pool<sqlx::Postgres>),
    Sqlite(Pool<sqlx::Sqlite>),
}

/// Connections to one SQLite file: one writes at a time (WAL), a few read beside it; each has a
/// worker thread and a page cache of its own, so more only cost memory.
const SQLITE_CONNECTIONS: usize = 4;

/// How long a write waits for SQLite's one write lock.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Short, so that while the server is down calls fail with 503 within it instead of piling
/// up; 1.5 s was too short for connection set-up on a loaded two-core machine.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// A service's migrations, one set per backend.
#[derive(Debug, Clone, Copy)]
pub struct Migrations {
    pub postgres: &'static Migrator,
    pub sqlite: &'static Migrator,
}

static EVENTS_POSTGRES: Migrator = sqlx::migrate!("migrations/postgres");
static EVENTS_SQLITE: Migrator = sqlx::migrate!("migrations/sqlite");

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("unsupported database URL scheme (expected postgres:// or sqlite://)")]
    UnsupportedUrl,
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
    #[error(transparent)]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl Database {
    /// Connects without migrating.
    pub async fn connect(url: &str) -> Result<Self, DbError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options = PgConnectOptions::from_str(url)?;
            Ok(Self::Postgres(
                Pool::connect(options, 16, ACQUIRE_TIMEOUT, Writers::Concurrent).await?,
            ))
        } else if url.starts_with("sqlite:") {
            // WAL lets the CLI and a running server share the file (80 §11.15); the busy timeout
            // makes a writer in another process wait instead of failing (writers in this one
            // queue in the pool).
            let options = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(SQLITE_BUSY_TIMEOUT)
                .foreign_keys(true);
            // Transactions write, and take the write lock when they begin: a deferred one whose
            // first statement reads (a trigger, an index maintained by one) before it writes
            // fails at once with SQLITE_BUSY when another writer committed meanwhile, instead of
            // waiting its turn.
            let writers = Writers::One {
                begin: "BEGIN IMMEDIATE",
                wait: SQLITE_BUSY_TIMEOUT,
            };
            Ok(Self::Sqlite(
                Pool::connect(options, SQLITE_CONNECTIONS, ACQUIRE_TIMEOUT, writers).await?,
            ))
        } else {
            Err(DbError::UnsupportedUrl)
        }
    }

    /// Connects and applies the service's migrations plus the shared event tables.
    pub async fn connect_and_migrate(url: &str, migrations: Migrations) -> Result<Self, DbError> {
        let db = Self::connect(url).await?;
        db.migrate(migrations).await?;
        Ok(db)
    }

    pub async fn migrate(&self, migrations: Migrations) -> Result<(), DbError> {
        match self {
            Self::Postgres(pool) => {
                let mut conn = pool.acquire().await?;
                with_events(migrations.postgres, &EVENTS_POSTGRES)
                    .run_direct(&mut *conn)
                    .await?;
                conn.done();
            }
            Self::Sqlite(pool) => {
                let mut conn = pool.acquire().await?;
                with_events(migrations.sqlite, &EVENTS_SQLITE)
                    .run_direct(&mut *conn)
                    .await?;
                conn.done();
            }
        }
        Ok(())
    }

    pub async fn close(&self) {
        match self {
            Self::Postgres(pool) => pool.close().await,
            Self::Sqlite(pool) => pool.close().await,
        }
    }

    /// Cheap liveness probe for readiness checks.
    pub async fn ping(&self) -> Result<(), DbError> {
        match self {
            Self::Postgres(pool) => sqlx::query("SELECT 1").execute(pool).await.map(drop)?,
            Self::Sqlite(pool) => sqlx::query("SELECT 1").execute(pool).await.map(drop)?,
        }
        Ok(())
    }
}

/// One migrator per database: the service's migrations followed by the shared event tables
/// (versions 900000+), so sqlx sees a single consistent history.
fn with_events(service: &Migrator, events: &Migrator) -> Migrator {
    let mut all: Vec<_> = service.iter().chain(events.iter()).cloned().collect();
    all.sort_by_key(|m| m.version);
    Migrator {
        migrations: Cow::Owned(all),
        ignore_missing: false,
        locking: true,
        no_tx: false,
    }
}

/// Values bound per `IN` list (a power of two); longer lists are queried in chunks of this many.
const IN_LIST_CHUNK: usize = 512;

/// The rows of `select` (a `SELECT … FROM table` without a condition) of `project` whose
/// `column` is one of `ids`, in no particular order. The list is bound value by value
/// (`$2, $3, …`, as SQLite has no array parameters), padded to a power of two by repeating its
/// last id: a handful of statement texts then serve every length, each stays prepared, and
/// PostgreSQL plans each as index look-ups (an array parameter's generic plan scans a small
/// table whole).
pub async fn select_in<T, K>(
    db: &Database,
    select: &str,
    project: uuid::Uuid,
    column: &str,
    ids: &[K],
) -> sqlx::Result<Vec<T>>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
        + for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
        + Send
        + Unpin,
    K: for<'q> sqlx::Encode<'q, sqlx::Postgres>
        + sqlx::Type<sqlx::Postgres>
        + for<'q> sqlx::Encode<'q, sqlx::Sqlite>
        + sqlx::Type<sqlx::Sqlite>
        + Clone
        + Send
        + 'static,
{
    let mut found = Vec::new();
    for chunk in ids.chunks(IN_LIST_CHUNK) {
        let Some(last) = chunk.last() else { continue };
        let padded = chunk.len().next_power_of_two();
        let list = (2..2 + padded)
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!("{select} WHERE project_id = $1 AND {column} IN ({list})");
        let rows: Vec<T> = crate::with_pool!(db, pool => {
            let mut query = sqlx::query_as(&sql).bind(project);
            for id in chunk.iter().chain(std::iter::repeat_n(last, padded - chunk.len())) {
                query = query.bind(id.clone());
            }
            query.fetch_all(pool).await?
        });
        found.extend(rows);
    }
    Ok(found)
}

/// Whether an error means the database cannot be reached right now (stopped, restarting,
/// refusing connections, or every pooled connection busy past the acquire timeout) rather than
/// that the statement was wrong: such calls answer 503 so clients retry.
pub fn is_unavailable(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => true,
        // SQLSTATE class 08 (connection exception), 57P (operator intervention: shutdown,
        // crash recovery, cannot connect now) and 53300 (too many connections).
        sqlx::Error::Database(d) => d
            .code()
            .is_some_and(|c| c.starts_with("08") || c.starts_with("57P") || c == "53300"),
        _ => false,
    }
}

/// Whether a write failed on a unique constraint (portable: `constraint()` is Postgres-only).
pub fn is_unique_violation(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .is_some_and(|d| d.is_unique_violation())
}

/// Runs the same statement code against whichever pool a `Database` holds. Only for SQL that
/// is identical on both backends (UUIDs bind natively on Postgres and as BLOBs on SQLite).
#[macro_export]
macro_rules! with_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            $crate::db::Database::Postgres($pool) => $body,
            $crate::db::Database::Sqlite($pool) => $body,
        }
    };
}

/// Seals every value of a sealed text column again under the current key (after a key
/// rotation, values sealed under the previous key open and are sealed anew; values from
/// before sealing get sealed). A sealed value carries a random nonce, so the value itself
/// names its row. Returns how many values were rewritten.
pub async fn reseal_column(
    db: &Database,
    table: &str,
    column: &str,
    purpose: &str,
    key: &crate::sealed::SecretsKey,
) -> anyhow::Result<u64> {
    let select = format!("SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL");
    let update = format!("UPDATE {table} SET {column} = $1 WHERE {column} = $2");
    let values: Vec<String> =
        with_pool!(db, pool => sqlx::query_scalar(&select).fetch_all(pool).await?);
    let mut rewritten = 0;
    for stored in values {
        let plain = key
            .open(purpose, &stored)
            .map_err(|e| anyhow::anyhow!("{table}.{column}: {e}"))?;
        let sealed = key.seal(purpose, &plain);
        rewritten += with_pool!(db, pool => sqlx::query(&update)
            .bind(&sealed)
            .bind(&stored)
            .execute(pool)
            .await?
            .rows_affected());
    }
    Ok(rewritten)
}
