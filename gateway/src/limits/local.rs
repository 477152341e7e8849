//! Fixed-window counters in this process: the embedded limiter, and the fallback when Redis
//! cannot answer.

use std::collections::HashMap;
use std::sync::Mutex;

/// Entries beyond this trigger a sweep of finished windows.
const SWEEP_AT: usize = 100_000;

#[derive(Default)]
pub struct LocalCounters {
    counts: Mutex<HashMap<String, (u64, u64)>>,
}

impl LocalCounters {
    /// Counts a request in all `keys` (key, limit, expiry in ms since the epoch), or in none
    /// when any is full; whether it was counted, and the counts.
    pub fn count(&self, keys: &[(String, u64, u64)], now_ms: u64) -> (bool, Vec<u64>) {
        let Ok(mut counts) = self.counts.lock() else {
            return (true, vec![0; keys.len()]);
        };
        if counts.len() > SWEEP_AT {
            counts.retain(|_, (expires, _)| *expires > now_ms);
        }
        let current: Vec<u64> = keys
            .iter()
            .map(|(key, _, _)| counts.get(key).map_or(0, |(_, n)| *n))
            .collect();
        if keys
            .iter()
            .zip(&current)
            .any(|((_, limit, _), n)| n >= limit)
        {
            return (false, current);
        }
        let counted = keys
            .iter()
            .map(|(key, _, expires_at_ms)| {
                let entry = counts.entry(key.clone()).or_insert((*expires_at_ms, 0));
                entry.1 += 1;
                entry.1
            })
            .collect();
        (true, counted)
    }

    /// Settles counters `count` added to: `Clear` forgets one, `Refund` takes one count back.
    pub fn settle(&self, keys: &[(String, super::redis::Settle)]) {
        let Ok(mut counts) = self.counts.lock() else {
            return;
        };
        for (key, how) in keys {
            match how {
                super::redis::Settle::Clear => {
                    counts.remove(key);
                }
                super::redis::Settle::Refund => {
                    if let Some((_, n)) = counts.get_mut(key) {
                        *n = n.saturating_sub(1);
                    }
                }
            }
        }
    }
}
