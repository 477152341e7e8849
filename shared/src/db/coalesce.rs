//! Point reads that concurrent requests make of one table, answered by one statement: a
//! request asks for a key and waits, and the keys asked for until the reading task's next turn
//! of the scheduler (see `batching`) go to the database together. Under load that turns N
//! statements, N pool checkouts and N wake-ups of the database (and of the caller, when the
//! answer comes) into one; a lone request waits one turn.
//!
//! Read-your-writes holds as for a direct read: a statement is sent only after every key it
//! answers was asked for, so it sees every write that had answered before any of its requests
//! asked. A request never joins a statement that is already on its way.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::Database;
use crate::batching::Batches;

/// An error each waiter of a failed read gets a copy of.
pub trait SharedError: Send + 'static {
    /// A copy that keeps what callers decide on (for a database error: unavailable or not).
    fn copy(&self) -> Self;
    /// The answer for a read whose task ended without one (it panicked).
    fn lost() -> Self;
}

impl SharedError for sqlx::Error {
    fn copy(&self) -> Self {
        // `sqlx::Error` is not `Clone`; what callers branch on is whether the database is
        // unavailable (503) or the statement failed (500), which these two keep.
        if super::is_unavailable(self) {
            sqlx::Error::Io(std::io::Error::other(self.to_string()))
        } else {
            sqlx::Error::Protocol(self.to_string())
        }
    }

    fn lost() -> Self {
        sqlx::Error::Protocol("a coalesced read ended without an answer".into())
    }
}

type Waiter<V, E> = oneshot::Sender<Result<Option<V>, E>>;
type Read<K, V, E> =
    Box<dyn Fn(Vec<K>) -> BoxFuture<'static, Result<Vec<(K, V)>, E>> + Send + Sync>;

/// Reads by key, coalesced across concurrent callers (see the module).
pub struct Coalesced<K, V, E = sqlx::Error> {
    inner: Arc<Inner<K, V, E>>,
}

/// Keys one statement takes at most (SQLite binds each, in lists of 500).
const MAX_KEYS: usize = 500;

struct Inner<K, V, E> {
    waiting: Batches<(K, Waiter<V, E>)>,
    read: Read<K, V, E>,
}

impl<K, V, E> Clone for Coalesced<K, V, E> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K, V, E> std::fmt::Debug for Coalesced<K, V, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalesced")
            .field("waiting", &self.inner.waiting.waiting())
            .finish()
    }
}

impl<K, V, E> Coalesced<K, V, E>
where
    K: Hash + Eq + Clone + Send + 'static,
    V: Clone + Send + 'static,
    E: SharedError,
{
    /// `read` answers a set of distinct keys with the values found (absent keys left out).
    pub fn new<F, Fut>(read: F) -> Self
    where
        F: Fn(Vec<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<(K, V)>, E>> + Send + 'static,
    {
        Self {
            inner: Arc::new(Inner {
                waiting: Batches::default(),
                read: Box::new(move |keys| Box::pin(read(keys))),
            }),
        }
    }

    /// The value of `key`, read together with the keys other callers ask for meanwhile.
    pub async fn get(&self, key: K) -> Result<Option<V>, E> {
        let (tx, rx) = oneshot::channel();
        if self.inner.waiting.push((key, tx)) {
            tokio::spawn(self.inner.clone().run());
        }
        rx.await.unwrap_or_else(|_| Err(E::lost()))
    }
}

impl<K, V, E> Inner<K, V, E>
where
    K: Hash + Eq + Clone + Send + 'static,
    V: Clone + Send + 'static,
    E: SharedError,
{
    /// Sends what waits, one statement per turn, until nothing does.
    async fn run(self: Arc<Self>) {
        self.waiting
            .run(MAX_KEYS, |batch| {
                let inner = self.clone();
                async move { inner.read_batch(batch).await }
            })
            .await;
    }

    async fn read_batch(&self, batch: Vec<(K, Waiter<V, E>)>) {
        let mut by_key: HashMap<K, Vec<Waiter<V, E>>> = HashMap::with_capacity(batch.len());
        for (key, tx) in batch {
            by_key.entry(key).or_default().push(tx);
        }
        let keys: Vec<K> = by_key.keys().cloned().collect();
        match (self.read)(keys).await {
            Ok(rows) => {
                let mut found: HashMap<K, V> = rows.into_iter().collect();
                for (key, mut waiters) in by_key {
                    let value = found.remove(&key);
                    let last = waiters.pop();
                    for tx in waiters {
                        let _ = tx.send(Ok(value.clone()));
                    }
                    if let Some(tx) = last {
                        let _ = tx.send(Ok(value));
                    }
                }
            }
            Err(e) => {
                for tx in by_key.into_values().flatten() {
                    let _ = tx.send(Err(e.copy()));
                }
            }
        }
    }
}

/// The rows of one table that share a project and a column's value `V` (a user's row, a user's
/// addresses, a refresh token), read by `(project, value)` and coalesced: one `select_in` per
/// project among the keys asked for together.
pub struct RowsBy<T, V = Uuid> {
    reads: Coalesced<(Uuid, V), Vec<T>>,
}

impl<T, V> Clone for RowsBy<T, V> {
    fn clone(&self) -> Self {
        Self {
            reads: self.reads.clone(),
        }
    }
}

impl<T, V> std::fmt::Debug for RowsBy<T, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.reads.fmt(f)
    }
}

impl<T, V> RowsBy<T, V>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
        + for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
        + Clone
        + Send
        + Sync
        + Unpin
        + 'static,
    V: for<'q> sqlx::Encode<'q, sqlx::Postgres>
        + sqlx::Type<sqlx::Postgres>
        + for<'q> sqlx::Encode<'q, sqlx::Sqlite>
        + sqlx::Type<sqlx::Sqlite>
        + Hash
        + Eq
        + Clone
        + Send
        + Sync
        + 'static,
{
    /// `select` is `SELECT … FROM table` without a condition; `key_of` gives a row's
    /// `(project, value of column)`.
    pub fn new(
        db: &Database,
        select: String,
        column: &'static str,
        key_of: fn(&T) -> (Uuid, V),
    ) -> Self {
        let db = db.clone();
        let select: Arc<str> = select.into();
        let reads = Coalesced::new(move |keys: Vec<(Uuid, V)>| {
            let (db, select) = (db.clone(), select.clone());
            async move {
                let mut by_project: HashMap<Uuid, Vec<V>> = HashMap::new();
                for (project, value) in keys {
                    by_project.entry(project).or_default().push(value);
                }
                let mut rows: HashMap<(Uuid, V), Vec<T>> = HashMap::new();
                for (project, values) in by_project {
                    let found: Vec<T> =
                        super::select_in(&db, &select, project, column, &values).await?;
                    for row in found {
                        rows.entry(key_of(&row)).or_default().push(row);
                    }
                }
                Ok(rows.into_iter().collect())
            }
        });
        Self { reads }
    }

    /// Every row of `project` whose column is `value`, in no particular order.
    pub async fn all(&self, project: Uuid, value: V) -> sqlx::Result<Vec<T>> {
        Ok(self.reads.get((project, value)).await?.unwrap_or_default())
    }

    /// The row of `project` whose column is `value` (for a unique column).
    pub async fn one(&self, project: Uuid, value: V) -> sqlx::Result<Option<T>> {
        Ok(self.all(project, value).await?.into_iter().next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// The keys of each read sent, in order.
    type Sent = Arc<Mutex<Vec<Vec<u32>>>>;

    /// Counts the reads and the keys each was sent with.
    fn counting() -> (Coalesced<u32, u32>, Sent) {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let log = sent.clone();
        let reads = Coalesced::new(move |mut keys: Vec<u32>| {
            keys.sort_unstable();
            if let Ok(mut log) = log.lock() {
                log.push(keys.clone());
            }
            async move {
                Ok(keys
                    .into_iter()
                    .filter(|k| k % 2 == 0)
                    .map(|k| (k, k * 10))
                    .collect())
            }
        });
        (reads, sent)
    }

    #[tokio::test]
    async fn requests_that_ask_together_share_one_read() {
        let (reads, sent) = counting();
        let reads = Arc::new(reads);
        let asks = (0..16u32).map(|k| {
            let reads = reads.clone();
            async move { reads.get(k % 8).await }
        });
        let answers = futures::future::join_all(asks).await;
        for (k, answer) in (0..16u32).zip(answers) {
            let k = k % 8;
            let expected = (k % 2 == 0).then_some(k * 10);
            assert_eq!(answer.unwrap_or_else(|e| panic!("{e}")), expected);
        }
        let sent = sent.lock().map(|s| s.clone()).unwrap_or_default();
        // Joined futures ask in one poll, before the reading task first runs: one read answers
        // all, each key sent once.
        assert_eq!(sent, vec![(0..8).collect::<Vec<_>>()]);
    }

    #[tokio::test]
    async fn a_request_never_joins_a_read_already_sent() {
        // Reads hold until released.
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let started = Arc::new(AtomicUsize::new(0));
        let (g, s) = (gate.clone(), started.clone());
        let reads = Arc::new(Coalesced::<u32, u32>::new(move |keys: Vec<u32>| {
            let (g, s) = (g.clone(), s.clone());
            let n = s.fetch_add(1, Ordering::SeqCst) as u32;
            async move {
                g.acquire().await.map(|p| p.forget()).ok();
                Ok(keys.into_iter().map(|k| (k, n)).collect())
            }
        }));
        let ask = |reads: Arc<Coalesced<u32, u32>>| tokio::spawn(async move { reads.get(1).await });
        let until = |n: usize| {
            let started = started.clone();
            async move {
                while started.load(Ordering::SeqCst) < n {
                    tokio::task::yield_now().await;
                }
            }
        };
        let first = ask(reads.clone());
        until(1).await;
        // Asked while the first read is out: a read of its own, not the first one's answer.
        let second = ask(reads.clone());
        until(2).await;
        gate.add_permits(2);
        let first = first.await.unwrap_or_else(|e| panic!("{e}"));
        let second = second.await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first.unwrap_or_else(|e| panic!("{e}")), Some(0));
        assert_eq!(second.unwrap_or_else(|e| panic!("{e}")), Some(1));
    }

    #[tokio::test]
    async fn a_failed_read_fails_every_waiter_and_keeps_unavailability() {
        let reads = Arc::new(Coalesced::<u32, u32>::new(|_keys: Vec<u32>| async {
            Err(sqlx::Error::PoolTimedOut)
        }));
        let (a, b) = tokio::join!(reads.get(1), reads.get(2));
        for answer in [a, b] {
            let e = answer
                .err()
                .unwrap_or_else(|| panic!("a failed read answered"));
            assert!(super::super::is_unavailable(&e), "{e:?}");
        }
    }
}
