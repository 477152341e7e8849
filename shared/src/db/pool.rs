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
    /// How transactions begin, when not the backend's default.
    begin: Option<&'static str>,
}

impl<DB: Database> Pool<DB> {
    /// Opens one connection now (so a wrong URL or a server that is down fails at start) and
    /// the others as they are needed.
    /// Transactions begin with `begin` when given (SQLite: `BEGIN IMMEDIATE`, see
    /// `Database::connect`), else with the backend's default.
    pub async fn connect(
        options: <DB::Connection as Connection>::Options,
        max: usize,
        acquire_timeout: Duration,
        begin: Option<&'static str>,
    ) -> sqlx::Result<Self> {
        let first = options.connect().await?;
        let pool = Self {
            shared: Arc::new(Shared {
                options,
                idle: Mutex::new(Vec::new()),
                slots: Arc::new(Semaphore::new(max)),
                max,
                acquire_timeout,
                begin,
            }),
        };
        pool.shared.put_back(first);
        Ok(pool)
    }

    /// A connection for a while; waits up to the acquire timeout for a free slot.
    pub async fn acquire(&self) -> sqlx::Result<Conn<DB>> {
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
            })
        };
        tokio::time::timeout(self.shared.acquire_timeout, acquiring)
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?
    }

    /// Begins a transaction on a connection of its own.
    pub async fn begin(&self) -> sqlx::Result<Transaction<DB>> {
        let mut conn = self.acquire().await?;
        conn.state = State::InTransaction;
        let statement = self.shared.begin.map(std::borrow::Cow::Borrowed);
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
        match self.state {
            State::Clean => {
                self.shared.put_back(conn);
                drop(permit);
            }
            State::Broken => drop(conn),
            State::Busy | State::InTransaction => {
                let in_transaction = self.state == State::InTransaction;
                let shared = self.shared.clone();
                // The permit stays taken until the connection is usable again.
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
                    drop(permit);
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
            let mut conn = pool.acquire().await?;
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
            let mut conn = pool.acquire().await?;
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
