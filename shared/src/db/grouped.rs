//! Writes that concurrent requests make, committed together (group commit). On a database that
//! takes one writer at a time and syncs its log at every commit (SQLite), each write of its
//! own pays for the write lock, a `BEGIN` and a `COMMIT` with its sync, one after another. Here
//! a write waits for the writes before it to commit, and all that arrived meanwhile go in the
//! next transaction: under load one sync serves a batch; a lone write waits one turn.
//!
//! A caller is answered only after the transaction holding its write committed, so the next
//! request sees it, as with a write of its own. A failed transaction fails every write in it.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::coalesce::SharedError;
use crate::batching::{one_turn, Batches};

type Waiter<E> = oneshot::Sender<Result<(), E>>;
type Write<W, E> = Box<dyn Fn(Vec<W>) -> BoxFuture<'static, Result<(), E>> + Send + Sync>;

/// Writes committed in groups (see the module).
pub struct Grouped<W, E = sqlx::Error> {
    inner: Arc<Inner<W, E>>,
}

/// Writes one transaction takes at most.
const MAX_WRITES: usize = 256;

struct Inner<W, E> {
    waiting: Batches<(W, Waiter<E>)>,
    write: Write<W, E>,
}

impl<W, E> Clone for Grouped<W, E> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<W, E> std::fmt::Debug for Grouped<W, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grouped")
            .field("waiting", &self.inner.waiting.waiting())
            .finish()
    }
}

impl<W, E> Grouped<W, E>
where
    W: Send + 'static,
    E: SharedError,
{
    /// `write` commits a group of writes in one transaction, all or none.
    pub fn new<F, Fut>(write: F) -> Self
    where
        F: Fn(Vec<W>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
    {
        Self {
            inner: Arc::new(Inner {
                waiting: Batches::default(),
                write: Box::new(move |writes| Box::pin(write(writes))),
            }),
        }
    }

    /// Commits `write` with the others' of the moment; answers once it is committed. A caller
    /// that gives up waiting does not take its write back.
    pub async fn write(&self, write: W) -> Result<(), E> {
        let (tx, rx) = oneshot::channel();
        if self.inner.waiting.push((write, tx)) {
            tokio::spawn(self.inner.clone().run());
        }
        rx.await.unwrap_or_else(|_| Err(E::lost()))
    }
}

impl<W, E> Inner<W, E>
where
    W: Send + 'static,
    E: SharedError,
{
    /// Commits what waits, one transaction at a time, until nothing does: unlike reads, the
    /// next group is taken only when the last committed, so that it holds every write that
    /// arrived meanwhile.
    async fn run(self: Arc<Self>) {
        loop {
            one_turn().await;
            let Some(group) = self.waiting.next(MAX_WRITES) else {
                return;
            };
            let (writes, waiters): (Vec<W>, Vec<Waiter<E>>) = group.into_iter().unzip();
            match (self.write)(writes).await {
                Ok(()) => waiters.into_iter().for_each(|tx| {
                    let _ = tx.send(Ok(()));
                }),
                Err(e) => waiters.into_iter().for_each(|tx| {
                    let _ = tx.send(Err(e.copy()));
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    type Committed = Arc<Mutex<Vec<Vec<u32>>>>;

    /// Records each group committed, once `gate` lets it; a group holding 13 fails.
    fn recording(gate: Arc<tokio::sync::Semaphore>) -> (Grouped<u32>, Committed, Arc<AtomicUsize>) {
        let committed = Arc::new(Mutex::new(Vec::new()));
        let started = Arc::new(AtomicUsize::new(0));
        let (log, begun) = (committed.clone(), started.clone());
        let grouped = Grouped::new(move |writes: Vec<u32>| {
            let (log, gate) = (log.clone(), gate.clone());
            begun.fetch_add(1, Ordering::SeqCst);
            async move {
                gate.acquire().await.map(|p| p.forget()).ok();
                if writes.contains(&13) {
                    return Err(sqlx::Error::Protocol("refused".into()));
                }
                if let Ok(mut log) = log.lock() {
                    log.push(writes);
                }
                Ok(())
            }
        });
        (grouped, committed, started)
    }

    #[tokio::test]
    async fn writes_that_arrive_while_a_group_commits_go_in_the_next_one() {
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let (grouped, committed, started) = recording(gate.clone());
        let first = tokio::spawn({
            let grouped = grouped.clone();
            async move { grouped.write(1).await }
        });
        // The first group is out (holding 1) before the others arrive.
        while started.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let later: Vec<_> = (2..6)
            .map(|w| {
                let grouped = grouped.clone();
                tokio::spawn(async move { grouped.write(w).await })
            })
            .collect();
        while grouped.inner.waiting.waiting() < 4 {
            tokio::task::yield_now().await;
        }
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            started.load(Ordering::SeqCst),
            1,
            "no group starts while one is committing"
        );
        gate.add_permits(2);
        first
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("{e}"));
        for w in later {
            w.await
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let committed = committed.lock().map(|c| c.clone()).unwrap_or_default();
        assert_eq!(committed, vec![vec![1], vec![2, 3, 4, 5]]);
    }

    #[tokio::test]
    async fn a_failed_group_fails_each_of_its_writes_and_no_other() {
        let gate = Arc::new(tokio::sync::Semaphore::new(10));
        let (grouped, committed, _) = recording(gate);
        let (a, b) = tokio::join!(grouped.write(12), grouped.write(13));
        assert!(a.is_err() && b.is_err(), "12 went in 13's group");
        grouped
            .write(14)
            .await
            .unwrap_or_else(|e| panic!("a later group commits: {e}"));
        let committed = committed.lock().map(|c| c.clone()).unwrap_or_default();
        assert_eq!(committed, vec![vec![14]]);
    }
}
