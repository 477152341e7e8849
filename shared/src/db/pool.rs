//! A connection pool that costs one round trip per statement. sqlx's own pool checks every
//! connection it hands out or takes back with a ping, which on the hot paths doubled the round
//! trips to PostgreSQL and the thread hand-offs to SQLite's worker. This pool skips both and
//! keeps what the pings were for:
//!
//! - A connection whose operation was cancelled half-way (the caller's deadline passed, its
//!   client went away), or whose transaction was dropped without a commit, is not reused as it
//!   is: a background task rolls it back and waits until it is ready (one round trip, off the
//!   request path), and only then returns it; if that fails, it is closed.
//! - A connection that failed with an I/O or protocol error is closed.
//! - A connection that sat idle for more than `VERIFY_AFTER_IDLE` (the server may have restarted
//!   meanwhile) is pinged before use; busy pools never pay for it.
//!
//! On a database that takes one writer at a time (SQLite), writers queue here, in order, for
//! the one write lock. Left to the database, a writer that finds the lock taken sleeps in
//! SQLite's busy handler (1, 2, 5, 10 … 100 ms) instead of starting when the lock is given
//! back: 16 concurrent token refreshes left a third of the machine idle and their p99 at 40 ms.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use sqlx::{ConnectOptions, Connection, Database, Either, Executor, TransactionManager};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Idle connections older than this are pinged before use.
const VERIFY_AFTER_IDLE: Duration = Duration::from_secs(1);
/// Idle connections older than this are closed rather than kept.
const MAX_IDLE: Duration = Duration::from_secs(600);

/// Connections to one database, at most `max` at a time.
pub struct Pool<DB: Database> {
    shared: Arc<Shared<DB>>,
}

impl<DB: Database> Clone for Pool<DB> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<DB: Database> fmt::Debug for Pool<DB> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("max", &self.shared.max)
            .field("idle", &self.shared.idle.lock().map_or(0, |i| i.len()))
            .finish()
    }
}

struct Shared<DB: Database> {
    options: <DB::Connection as Connection>::Options,
    idle: Mutex<Vec<(DB::Connection, Instant)>>,
    slots: Arc<Semaphore>,
    max: usize,
    acquire_timeout: Duration,
    writers: Writers,
    /// The write lock of a one-writer database, taken in order.
    write_lock: Arc<Semaphore>,
}

/// How a database takes concurrent writers.
#[derive(Debug, Clone, Copy)]
pub enum Writers {
    /// The server orders them itself (PostgreSQL); transactions begin as the backend begins them.
    Concurrent,
    /// One at a time (SQLite). Transactions begin with `begin` and hold the write lock until
    /// they end; a statement outside a transaction that does not read (`SELECT …`) holds it for
    /// itself. Either waits up to `wait` for it.
    One { begin: &'static str, wait: Duration },
}

impl<DB: Database> Pool<DB> {
    /// Opens one connection now (so a wrong URL or a server that is down fails at start) and
    /// the others as they are needed.
    pub async fn connect(
        options: <DB::Connection as Connection>::Options,
        max: usize,
        acquire_timeout: Duration,
        writers: Writers,
    ) -> sqlx::Result<Self> {
        let first = options.connect().await?;
        let pool = Self {
            shared: Arc::new(Shared {
                options,
                idle: Mutex::new(Vec::new()),
                slots: Arc::new(Semaphore::new(max)),
                max,
                acquire_timeout,
                writers,
                write_lock: Arc::new(Semaphore::new(1)),
            }),
        };
        pool.shared.put_back(first);
        Ok(pool)
    }

    /// A connection for a while; waits up to the acquire timeout for a free slot.
    pub async fn acquire(&self) -> sqlx::Result<Conn<DB>> {
        self.acquire_writing(None).await
    }

    /// A connection holding `writer`, the write lock, if given: the lock is taken before a
    /// slot, so that writers waiting their turn do not keep the readers' connections.
    async fn acquire_writing(
        &self,
        writer: Option<OwnedSemaphorePermit>,
    ) -> sqlx::Result<Conn<DB>> {
        let shared = self.shared.clone();
        let acquiring = async move {
            let permit = shared
                .slots
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| sqlx::Error::PoolClosed)?;
            let conn = shared.idle_or_new().await?;
            Ok(Conn {
                conn: Some(conn),
                state: State::Clean,
                shared,
                permit: Some(permit),
                writer,
            })
        };
        tokio::time::timeout(self.shared.acquire_timeout, acquiring)
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?
    }

    /// The write lock, on a one-writer database.
    async fn write_lock(&self) -> sqlx::Result<Option<OwnedSemaphorePermit>> {
        let Writers::One { wait, .. } = self.shared.writers else {
            return Ok(None);
        };
        let lock = self.shared.write_lock.clone().acquire_owned();
        match tokio::time::timeout(wait, lock).await {
            Ok(Ok(permit)) => Ok(Some(permit)),
            Ok(Err(_)) => Err(sqlx::Error::PoolClosed),
            Err(_) => Err(sqlx::Error::PoolTimedOut),
        }
    }

    /// A connection for one statement on the pool: with the write lock when the statement
    /// may write to a one-writer database.
    async fn acquire_for(&self, sql: &str) -> sqlx::Result<Conn<DB>> {
        let writer = if reads_only(sql) {
            None
        } else {
            self.write_lock().await?
        };
        self.acquire_writing(writer).await
    }

    /// Begins a transaction on a connection of its own.
    pub async fn begin(&self) -> sqlx::Result<Transaction<DB>> {
        let writer = self.write_lock().await?;
        let mut conn = self.acquire_writing(writer).await?;
        conn.state = State::InTransaction;
        let statement = match self.shared.writers {
            Writers::One { begin, .. } => Some(std::borrow::Cow::Borrowed(begin)),
            Writers::Concurrent => None,
        };
        let begun = DB::TransactionManager::begin(conn.raw(), statement).await;
        if let Err(e) = &begun {
            if breaks_connection(e) {
                conn.state = State::Broken;
            }
        }
        begun.map(|()| Transaction { conn })
    }

    /// Stops handing out connections and closes the idle ones; connections in use close when
    /// they come back.
    pub async fn close(&self) {
        self.shared.slots.close();
        let idle: Vec<_> = match self.shared.idle.lock() {
            Ok(mut idle) => idle.drain(..).collect(),
            Err(_) => Vec::new(),
        };
        for (conn, _) in idle {
            let _ = conn.close().await;
        }
    }
}

impl<DB: Database> Shared<DB> {
    async fn idle_or_new(&self) -> sqlx::Result<DB::Connection> {
        loop {
            let popped = self.idle.lock().ok().and_then(|mut idle| idle.pop());
            let Some((mut conn, since)) = popped else {
                return self.options.connect().await;
            };
            let idle_for = since.elapsed();
            if idle_for > MAX_IDLE {
                drop(conn);
                continue;
            }
            if idle_for <= VERIFY_AFTER_IDLE || conn.ping().await.is_ok() {
                return Ok(conn);
            }
        }
    }

    fn put_back(&self, conn: DB::Connection) {
        if self.slots.is_closed() {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            // Most recently used last, so the next caller takes the warmest one.
            idle.push((conn, Instant::now()));
        }
    }
}

/// Whether a statement only reads; anything else (`WITH`, `PRAGMA` included) is taken for a
/// write, which at worst makes a read wait for the write lock.
fn reads_only(sql: &str) -> bool {
    sql.trim_start()
        .get(..6)
        .is_some_and(|head| head.eq_ignore_ascii_case("select"))
}

/// Where a connection stands, which decides what happens to it when it is given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Ready for the next caller.
    Clean,
    /// An operation was started and has not finished (it may have been cancelled).
    Busy,
    /// Inside a transaction that has not been committed.
    InTransaction,
    /// Failed at the connection level: close it.
    Broken,
}

/// A connection taken from the pool; given back when dropped.
pub struct Conn<DB: Database> {
    conn: Option<DB::Connection>,
    state: State,
    shared: Arc<Shared<DB>>,
    permit: Option<OwnedSemaphorePermit>,
    /// The write lock of a one-writer database, held by a transaction or a writing statement.
    writer: Option<OwnedSemaphorePermit>,
}

impl<DB: Database> Conn<DB> {
    fn raw(&mut self) -> &mut DB::Connection {
        self.conn
            .as_mut()
            .unwrap_or_else(|| unreachable!("a connection is only taken when it is given back"))
    }

    /// The connection for one operation; until `finish` it counts as cancelled half-way.
    fn start(&mut self) -> &mut DB::Connection {
        if self.state == State::Clean {
            self.state = State::Busy;
        }
        self.raw()
    }

    /// Records how an operation ended: a finished one leaves the connection as it was before,
    /// a connection-level failure breaks it.
    fn finish<T>(&mut self, result: &sqlx::Result<T>) {
        match result {
            Err(e) if breaks_connection(e) => self.state = State::Broken,
            _ if self.state == State::Busy => self.state = State::Clean,
            _ => {}
        }
    }
}

/// Errors after which the connection cannot be trusted (statement errors leave it usable).
fn breaks_connection(e: &sqlx::Error) -> bool {
    matches!(
        e,
        sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed
    )
}

impl<DB: Database> Drop for Conn<DB> {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let permit = self.permit.take();
        let writer = self.writer.take();
        match self.state {
            State::Clean => {
                self.shared.put_back(conn);
                drop((permit, writer));
            }
            State::Broken => drop((conn, writer)),
            State::Busy | State::InTransaction => {
                let in_transaction = self.state == State::InTransaction;
                let shared = self.shared.clone();
                // The permit and the write lock stay taken until the connection is usable again
                // (a transaction rolled back).
                let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                    return;
                };
                runtime.spawn(async move {
                    if in_transaction {
                        DB::TransactionManager::start_rollback(&mut conn);
                    }
                    let settled = tokio::time::timeout(Duration::from_secs(5), conn.ping()).await;
                    if let Ok(Ok(())) = settled {
                        shared.put_back(conn);
                    }
                    drop((permit, writer));
                });
            }
        }
    }
}

/// A transaction on a connection of its own; rolled back unless committed.
pub struct Transaction<DB: Database> {
    conn: Conn<DB>,
}

impl<DB: Database> Transaction<DB> {
    pub async fn commit(mut self) -> sqlx::Result<()> {
        let result = DB::TransactionManager::commit(self.conn.raw()).await;
        self.ended(result)
    }

    /// Rolls back now, rather than leaving it to the drop (which settles the connection on a
    /// task of its own before it is reused).
    pub async fn rollback(mut self) -> sqlx::Result<()> {
        let result = DB::TransactionManager::rollback(self.conn.raw()).await;
        self.ended(result)
    }

    /// Marks the connection after the transaction ended with `result`: clean, broken, or
    /// still in a transaction that the drop rolls back.
    fn ended(&mut self, result: sqlx::Result<()>) -> sqlx::Result<()> {
        self.conn.state = match &result {
            Ok(()) => State::Clean,
            Err(e) if breaks_connection(e) => State::Broken,
            Err(_) => State::InTransaction,
        };
        result
    }
}

/// Statements run on the connection itself; `&mut *tx` is an executor, as with sqlx's own
/// transactions. A statement cancelled half-way leaves the transaction uncommitted, which the
/// drop rolls back.
impl<DB: Database> Deref for Transaction<DB> {
    type Target = DB::Connection;
    fn deref(&self) -> &DB::Connection {
        &self.conn
    }
}

impl<DB: Database> DerefMut for Transaction<DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        self.conn.raw()
    }
}

impl<DB: Database> Deref for Conn<DB> {
    type Target = DB::Connection;
    fn deref(&self) -> &DB::Connection {
        self.conn
            .as_ref()
            .unwrap_or_else(|| unreachable!("a connection is only taken when it is given back"))
    }
}

impl<DB: Database> DerefMut for Conn<DB> {
    /// Direct use (migrations) counts as one long operation: not reused unless it finished,
    /// which the caller marks with `done`.
    fn deref_mut(&mut self) -> &mut DB::Connection {
        self.start()
    }
}

impl<DB: Database> Conn<DB> {
    /// Marks direct use (through `DerefMut`) as finished, so the connection is reused.
    pub fn done(&mut self) {
        if self.state == State::Busy {
            self.state = State::Clean;
        }
    }
}

/// Statements on the pool take a connection for the one statement, as with sqlx's pool.
impl<'p, DB: Database> Executor<'p> for &'_ Pool<DB>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    type Database = DB;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, sqlx::Result<Either<DB::QueryResult, DB::Row>>>
    where
        E: 'q + sqlx::Execute<'q, DB>,
    {
        let pool = self.clone();
        // Rows are collected while the connection is held: every caller reads them all.
        let rows = async move {
            let mut conn = pool.acquire_for(query.sql()).await?;
            let all: sqlx::Result<Vec<_>> = conn.start().fetch_many(query).try_collect().await;
            conn.finish(&all);
            Ok::<_, sqlx::Error>(futures::stream::iter(all?.into_iter().map(Ok)))
        };
        futures::stream::once(rows).try_flatten().boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, sqlx::Result<Option<DB::Row>>>
    where
        E: 'q + sqlx::Execute<'q, DB>,
    {
        let pool = self.clone();
        Box::pin(async move {
            let mut conn = pool.acquire_for(query.sql()).await?;
            let row = conn.start().fetch_optional(query).await;
            conn.finish(&row);
            row
        })
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [DB::TypeInfo],
    ) -> BoxFuture<'e, sqlx::Result<DB::Statement<'q>>> {
        let pool = self.clone();
        Box::pin(async move {
            let mut conn = pool.acquire().await?;
            let statement = conn.start().prepare_with(sql, parameters).await;
            conn.finish(&statement);
            statement
        })
    }

    fn describe<'e, 'q: 'e>(self, sql: &'q str) -> BoxFuture<'e, sqlx::Result<sqlx::Describe<DB>>> {
        let pool = self.clone();
        Box::pin(async move {
            let mut conn = pool.acquire().await?;
            let described = conn.start().describe(sql).await;
            conn.finish(&described);
            described
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    /// A pool of two connections to a new SQLite file, writers queued in the pool.
    async fn sqlite(dir: &tempfile::TempDir) -> Pool<sqlx::Sqlite> {
        let url = format!("sqlite://{}/w.db", dir.path().display());
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(&url)
            .unwrap_or_else(|e| panic!("{e}"))
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(10));
        let writers = Writers::One {
            begin: "BEGIN IMMEDIATE",
            wait: Duration::from_secs(10),
        };
        let pool = Pool::connect(options, 2, Duration::from_secs(1), writers)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        sqlx::query("CREATE TABLE t (n INTEGER)")
            .execute(&pool)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        pool
    }

    async fn count(pool: &Pool<sqlx::Sqlite>) -> sqlx::Result<i64> {
        sqlx::query_scalar("SELECT count(*) FROM t")
            .fetch_one(pool)
            .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_writers_wait_their_turn_without_keeping_connections_from_readers() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let pool = sqlite(&dir).await;
        let mut first = pool.begin().await.unwrap_or_else(|e| panic!("{e}"));
        sqlx::query("INSERT INTO t VALUES (1)")
            .execute(&mut *first)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let second = tokio::spawn({
            let pool = pool.clone();
            async move {
                let mut tx = pool.begin().await?;
                sqlx::query("INSERT INTO t VALUES (2)")
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await
            }
        });
        let third = tokio::spawn({
            let pool = pool.clone();
            async move { sqlx::query("INSERT INTO t VALUES (3)").execute(&pool).await }
        });
        // Long enough for both writers to be waiting for the first one.
        tokio::time::sleep(Duration::from_millis(200)).await;
        // The pool's other connection is free for a reader (were the second writer waiting
        // inside SQLite, it would hold that connection and this read would time out).
        assert_eq!(count(&pool).await.unwrap_or_else(|e| panic!("{e}")), 0);
        first.commit().await.unwrap_or_else(|e| panic!("{e}"));
        second
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("the second writer: {e}"));
        third
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("the statement outside a transaction: {e}"));
        assert_eq!(count(&pool).await.unwrap_or_else(|e| panic!("{e}")), 3);
    }
}
