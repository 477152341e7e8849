//! Natural batching: a runner takes what waits, one batch per turn of the scheduler. A lone
//! request waits one turn; under load everything that became ready to run before the runner's
//! turn leaves in the same batch, so per-batch costs (a statement, a stream, a wake-up of the
//! other side) are shared by all of it. Nothing is held back on a timer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Waits one turn of the scheduler: the task goes to the back of its worker's run queue, so
/// every task that was ready to run goes first. (`tokio::task::yield_now` waits instead for the
/// worker's next poll of the I/O driver, which under load is dozens of turns later.)
pub async fn one_turn() {
    let mut turned = false;
    std::future::poll_fn(|cx| {
        if turned {
            return std::task::Poll::Ready(());
        }
        turned = true;
        // Woken while it runs, a task is queued again behind those already waiting.
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await;
}

/// Items waiting for the next batch, and whether a runner is taking batches.
pub struct Batches<W> {
    waiting: Mutex<Vec<W>>,
    running: AtomicBool,
}

impl<W> Default for Batches<W> {
    fn default() -> Self {
        Self {
            waiting: Mutex::new(Vec::new()),
            running: AtomicBool::new(false),
        }
    }
}

impl<W> Batches<W> {
    /// Adds `item`; true when no runner is taking batches, so the caller must start one (which
    /// then takes batches with `next`, a turn apart, until it gets `None`).
    pub fn push(&self, item: W) -> bool {
        match self.waiting.lock() {
            Ok(mut waiting) => waiting.push(item),
            // Poisoned only by a panic while pushing or taking; the item is dropped, so its
            // caller gets its "lost" answer.
            Err(_) => return false,
        }
        !self.running.swap(true, Ordering::AcqRel)
    }

    /// The runner's next batch: up to `max` of the items waiting, or `None` once none wait, at
    /// which point the runner has stopped and the next `push` starts another.
    pub fn next(&self, max: usize) -> Option<Vec<W>> {
        loop {
            if let Some(batch) = self.take(max) {
                return Some(batch);
            }
            self.running.store(false, Ordering::Release);
            // An item pushed between the take and the store saw a runner and started none:
            // carry on for it, unless its pusher already started a new runner.
            let waiting = self.waiting.lock().is_ok_and(|w| !w.is_empty());
            if !waiting || self.running.swap(true, Ordering::AcqRel) {
                return None;
            }
        }
    }

    /// The runner's loop: one batch of at most `max` per turn of the scheduler, each handed to
    /// `send` on a task of its own, until nothing waits.
    pub async fn run<F, Fut>(&self, max: usize, send: F)
    where
        F: Fn(Vec<W>) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        loop {
            one_turn().await;
            let Some(batch) = self.next(max) else {
                return;
            };
            tokio::spawn(send(batch));
        }
    }

    fn take(&self, max: usize) -> Option<Vec<W>> {
        let mut waiting = self.waiting.lock().ok()?;
        if waiting.is_empty() {
            return None;
        }
        let first = waiting.len().min(max);
        let rest = waiting.split_off(first);
        Some(std::mem::replace(&mut *waiting, rest))
    }

    /// How many items wait (for diagnostics).
    pub fn waiting(&self) -> usize {
        self.waiting.lock().map_or(0, |w| w.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_push_starts_a_runner_and_later_ones_wait_for_it() {
        let batches = Batches::default();
        assert!(batches.push(1));
        assert!(!batches.push(2));
        assert_eq!(batches.next(10), Some(vec![1, 2]));
        assert!(!batches.push(3), "the runner is still out with 1 and 2");
        assert!(!batches.push(4));
        assert_eq!(batches.next(1), Some(vec![3]));
        assert_eq!(batches.next(10), Some(vec![4]));
        assert_eq!(batches.next(10), None);
        assert!(
            batches.push(5),
            "the runner stopped, so the next push starts one"
        );
    }
}
