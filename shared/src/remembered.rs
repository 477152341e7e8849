//! Rows a service remembers between requests when it is the only writer of its database (the
//! embedded system's SQLite files): each read through the worker thread of SQLite costs more
//! than the work it does, and the hottest reads (a user for `/users/me`, its addresses) repeat
//! far more often than they change. Every write through the owning store forgets what it
//! touches before it answers, so nothing a write has answered is served stale. With PostgreSQL
//! (several replicas writing) nothing is remembered: another replica's write would go unseen.
//!
//! A read that raced a write must not put back what it read before the write: a reader takes a
//! ticket before it reads the database, and what it brings back is remembered only if nothing
//! forgot that key (or everything) since the ticket was taken.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Mutex;

use crate::db::Database;

/// Entries kept at most; beyond it everything is forgotten and memory starts over.
const MAX_ENTRIES: usize = 100_000;

pub struct Remembered<K, V> {
    enabled: bool,
    state: Mutex<State<K, V>>,
}

struct State<K, V> {
    /// Bumped when everything is forgotten, so tickets from before stay refused.
    epoch: u64,
    slots: HashMap<K, Slot<V>>,
}

struct Slot<V> {
    /// Bumped by every write to the key.
    generation: u64,
    value: Option<V>,
}

/// Taken before reading the database; see the module's rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    epoch: u64,
    generation: u64,
}

impl<K, V> std::fmt::Debug for Remembered<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remembered")
            .field("enabled", &self.enabled)
            .field("entries", &self.state.lock().map_or(0, |s| s.slots.len()))
            .finish()
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Remembered<K, V> {
    /// Remembers only over `db` when it is SQLite (one process, the only writer).
    pub fn over(db: &Database) -> Self {
        Self::new(matches!(db, Database::Sqlite(_)))
    }

    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            state: Mutex::new(State {
                epoch: 0,
                slots: HashMap::new(),
            }),
        }
    }

    /// What is remembered for `key`, or a ticket to read it with.
    pub fn get(&self, key: &K) -> Result<V, Ticket> {
        let Ok(state) = self.state.lock() else {
            return Err(Ticket {
                epoch: u64::MAX,
                generation: 0,
            });
        };
        let slot = state.slots.get(key);
        match slot.and_then(|s| s.value.clone()) {
            Some(value) if self.enabled => Ok(value),
            _ => Err(Ticket {
                epoch: state.epoch,
                generation: slot.map_or(0, |s| s.generation),
            }),
        }
    }

    /// Remembers what a read with `ticket` found, unless a write to `key` came in between.
    pub fn put(&self, key: K, ticket: Ticket, value: V) {
        if !self.enabled {
            return;
        }
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let generation = state.slots.get(&key).map_or(0, |s| s.generation);
        if state.epoch != ticket.epoch || generation != ticket.generation {
            return;
        }
        if state.slots.len() >= MAX_ENTRIES {
            state.epoch += 1;
            state.slots.clear();
            return;
        }
        state.slots.insert(
            key,
            Slot {
                generation,
                value: Some(value),
            },
        );
    }

    /// What is remembered for `key`, or what `read` finds in the database (then remembered,
    /// unless a write to `key` came in between).
    pub async fn or_read<E>(
        &self,
        key: K,
        read: impl Future<Output = Result<Option<V>, E>>,
    ) -> Result<Option<V>, E> {
        // Nothing to remember (another process may write too): no lock, no hashing.
        if !self.enabled {
            return read.await;
        }
        let ticket = match self.get(&key) {
            Ok(value) => return Ok(Some(value)),
            Err(ticket) => ticket,
        };
        let found = read.await?;
        if let Some(value) = &found {
            self.put(key, ticket, value.clone());
        }
        Ok(found)
    }

    /// Runs a write to `key`, then forgets `key` whatever came of it.
    pub async fn writing<T>(&self, key: &K, write: impl Future<Output = T>) -> T {
        let done = write.await;
        self.forget(key);
        done
    }

    /// A write to `key`: forgotten, and reads in flight will not put it back.
    pub fn forget(&self, key: &K) {
        if !self.enabled {
            return;
        }
        if let Ok(mut state) = self.state.lock() {
            if state.slots.len() >= MAX_ENTRIES {
                state.epoch += 1;
                state.slots.clear();
            }
            let slot = state.slots.entry(key.clone()).or_insert(Slot {
                generation: 0,
                value: None,
            });
            slot.generation += 1;
            slot.value = None;
        }
    }

    /// A write whose keys are not known one by one.
    pub fn forget_all(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.epoch += 1;
            state.slots.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_that_raced_a_write_are_not_remembered() {
        let r: Remembered<u32, &str> = Remembered::new(true);
        let ticket = r.get(&1).err().unwrap_or_else(|| panic!("nothing yet"));
        r.put(1, ticket, "read");
        assert_eq!(r.get(&1), Ok("read"));
        // A read starts, a write forgets the key, the read comes back: not remembered.
        r.forget(&1);
        let stale = r.get(&1).err().unwrap_or_else(|| panic!("forgotten"));
        r.forget(&1);
        r.put(1, stale, "before the write");
        assert!(r.get(&1).is_err());
        // Forgetting everything refuses every ticket taken before.
        let before = r.get(&2).err().unwrap_or_else(|| panic!("nothing yet"));
        r.forget_all();
        r.put(2, before, "old");
        assert!(r.get(&2).is_err());
        // Disabled: never remembers.
        let off: Remembered<u32, &str> = Remembered::new(false);
        let t = off.get(&1).err().unwrap_or_else(|| panic!("nothing"));
        off.put(1, t, "x");
        assert!(off.get(&1).is_err());
    }
}
