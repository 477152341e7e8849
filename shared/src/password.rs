//! Password hashing: argon2id with OWASP parameters (19 MiB, 2 passes, 1 lane), on a fixed set
//! of hashing threads (about one per core) fed by a queue, so a sign-in flood queues instead of
//! starving the runtime. Fixed threads also keep memory flat: each thread's allocator keeps the
//! 19 MiB of its last hash, and a pool that wandered over the runtime's many blocking threads
//! would keep that much per thread it ever used. Verifies argon2 PHC strings and imported bcrypt
//! hashes.

use std::sync::{mpsc, Arc, Mutex};

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use tokio::sync::{oneshot, OnceCell};

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("hashing failed: {0}")]
    Hash(String),
    #[error("the hashing threads are gone")]
    Stopped,
}

fn argon2() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Whether `hash` is a bcrypt hash we can import (Modular Crypt Format `$2a$`, `$2b$`, `$2y$`).
pub fn is_bcrypt(hash: &str) -> bool {
    ["$2a$", "$2b$", "$2y$"].iter().any(|p| hash.starts_with(p))
        && hash.len() == 60
        && hash.parse::<bcrypt::HashParts>().is_ok()
}

/// Counts a hash in the pool's queue-depth gauge from its arrival until it is done.
struct Queued;

impl Queued {
    fn enter() -> Self {
        crate::metrics::PASSWORD_QUEUE.add(String::new(), 1.0);
        Self
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        crate::metrics::PASSWORD_QUEUE.add(String::new(), -1.0);
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// Hashing threads taking jobs from one queue; they end when the last `Lanes` handle is dropped.
struct Lanes {
    jobs: mpsc::Sender<Job>,
}

impl Lanes {
    fn start(threads: usize) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..threads.max(1) {
            let queue = queue.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("password-{i}"))
                .spawn(move || loop {
                    // The lock is held only while taking a job, not while running it.
                    let job = match queue.lock() {
                        Ok(q) => q.recv(),
                        Err(_) => return,
                    };
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "could not start a password hashing thread");
            }
        }
        Self { jobs }
    }

    /// Runs `work` on a hashing thread and waits for its answer without blocking the runtime.
    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, PasswordError> {
        let _queued = Queued::enter();
        let (done, answer) = oneshot::channel();
        let span = tracing::Span::current();
        let job: Job = Box::new(move || {
            let _ = done.send(span.in_scope(work));
        });
        self.jobs.send(job).map_err(|_| PasswordError::Stopped)?;
        answer.await.map_err(|_| PasswordError::Stopped)
    }
}

#[derive(Clone)]
pub struct Passwords {
    lanes: Arc<Lanes>,
    /// A real hash to verify against when there is no user, so unknown e-mails cost the same.
    dummy: Arc<OnceCell<String>>,
}

impl Default for Passwords {
    fn default() -> Self {
        let lanes = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::new(lanes)
    }
}

impl Passwords {
    pub fn new(concurrent: usize) -> Self {
        Self {
            lanes: Arc::new(Lanes::start(concurrent)),
            dummy: Arc::new(OnceCell::new()),
        }
    }

    /// Hashes on a hashing thread.
    pub async fn hash(&self, plain: &str) -> Result<String, PasswordError> {
        let plain = plain.to_owned();
        self.lanes
            .run(move || {
                let salt = SaltString::generate(&mut OsRng);
                argon2()
                    .hash_password(plain.as_bytes(), &salt)
                    .map(|h| h.to_string())
                    .map_err(|e| PasswordError::Hash(e.to_string()))
            })
            .await?
    }

    /// Verifies `plain` against `stored`; with no stored hash, burns the same time and fails.
    pub async fn verify(&self, plain: &str, stored: Option<&str>) -> Result<bool, PasswordError> {
        let (hash, real) = match stored {
            Some(h) => (h.to_owned(), true),
            None => (self.dummy_hash().await?, false),
        };
        let plain = plain.to_owned();
        let ok = self
            .lanes
            .run(move || {
                if is_bcrypt(&hash) {
                    bcrypt::verify(plain.as_bytes(), &hash).unwrap_or(false)
                } else {
                    PasswordHash::new(&hash).is_ok_and(|parsed| {
                        argon2().verify_password(plain.as_bytes(), &parsed).is_ok()
                    })
                }
            })
            .await?;
        Ok(ok && real)
    }

    async fn dummy_hash(&self) -> Result<String, PasswordError> {
        let init = || async { self.hash(&crate::crypto::random_base32(20)).await };
        self.dummy.get_or_try_init(init).await.cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_unknown_users_fail() {
        let p = Passwords::new(2);
        let h = p.hash("correct horse").await.unwrap_or_default();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(p.verify("correct horse", Some(&h)).await.unwrap_or(false));
        assert!(!p.verify("wrong horse", Some(&h)).await.unwrap_or(true));
        assert!(!p.verify("correct horse", None).await.unwrap_or(true));
    }

    #[tokio::test]
    async fn imported_bcrypt_hashes_verify() {
        let hash = bcrypt::hash("imported-pass", 4).unwrap_or_default();
        assert!(is_bcrypt(&hash));
        assert!(!is_bcrypt("$2x$nope"));
        let p = Passwords::new(1);
        assert!(p
            .verify("imported-pass", Some(&hash))
            .await
            .unwrap_or(false));
        assert!(!p.verify("other", Some(&hash)).await.unwrap_or(true));
    }
}
