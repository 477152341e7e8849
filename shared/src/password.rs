//! Password hashing: argon2id with OWASP parameters (19 MiB, 2 passes, 1 lane), on a fixed set
//! of hashing threads (about one per core) fed by a queue, so a sign-in flood queues instead of
//! starving the runtime. Each thread hashes into one block of memory it allocated at start, so
//! resident memory is lanes × 19 MiB whatever the load (one block more once the lanes were
//! starved, see `Lanes`), and no hash pays for fresh pages or leaves its 19 MiB to the allocator's
//! arenas. The blocks sit on huge pages where the kernel offers them (`advise_huge_pages`).
//! Verifies argon2 PHC strings and imported bcrypt hashes.

use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{Output, ParamsString, PasswordHash, Salt, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use tokio::sync::{oneshot, OnceCell};

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("hashing failed: {0}")]
    Hash(String),
    #[error("the hashing threads are gone")]
    Stopped,
}

fn params() -> Params {
    Params::new(19 * 1024, 2, 1, None).unwrap_or_default()
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

/// A lane's own argon2 memory, reused by every hash it runs.
pub struct Memory(Vec<Block>);

impl Memory {
    fn new() -> Self {
        let blocks = params().block_count();
        let mut memory = Vec::with_capacity(blocks);
        advise_huge_pages(memory.spare_capacity_mut());
        memory.resize(blocks, Block::default());
        Self(memory)
    }

    /// The `len`-byte argon2 output for `plain` and `salt`, computed in this memory; a hash
    /// asking for more memory than the lane holds (a stored hash made with other parameters)
    /// gets memory of its own for that one hash.
    fn output(
        &mut self,
        argon2: &Argon2<'_>,
        plain: &[u8],
        salt: Salt<'_>,
        len: usize,
    ) -> argon2::password_hash::Result<Output> {
        let mut salt_bytes = [0u8; 64];
        let salt = salt.decode_b64(&mut salt_bytes)?;
        let blocks = argon2.params().block_count();
        Output::init_with(len, |out| {
            let hashed = if blocks <= self.0.len() {
                argon2.hash_password_into_with_memory(plain, salt, out, &mut self.0[..blocks])
            } else {
                argon2.hash_password_into_with_memory(
                    plain,
                    salt,
                    out,
                    vec![Block::default(); blocks],
                )
            };
            hashed.map_err(|_| argon2::password_hash::Error::Crypto)
        })
    }
}

/// The unit of transparent huge pages on x86-64 and on arm64 with 4 KiB pages; a multiple of
/// every base page size, so a range aligned to it is a valid `madvise` range everywhere.
const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel to back the 2 MiB-aligned part of `memory` with huge pages when it is first
/// written. argon2 reads its block at random: on 4 KiB pages a lane that request threads have
/// preempted comes back to a TLB they have filled, and in the benchmark's sign-in flood the lanes
/// hashed about 12 % fewer passwords than with this hint (lanes hashing alone run as fast either
/// way). Only the lanes' blocks ask, not the whole heap (see the allocator in the gateway's
/// `main.rs`), so resident memory is unchanged. A hint: where transparent huge pages are off,
/// nothing changes.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn advise_huge_pages<T>(memory: &mut [std::mem::MaybeUninit<T>]) {
    let bytes = std::mem::size_of_val(memory);
    let base = memory.as_mut_ptr().cast::<u8>();
    let skip = base.align_offset(HUGE_PAGE);
    let len = bytes.saturating_sub(skip) / HUGE_PAGE * HUGE_PAGE;
    if len == 0 {
        return;
    }
    let start = base.wrapping_add(skip).cast::<libc::c_void>();
    // SAFETY: `[start, start + len)` lies inside `memory`, which is borrowed mutably here, and
    // MADV_HUGEPAGE changes neither the contents of memory nor whether it is mapped: it only
    // lets the kernel pick the page size when a page is first touched.
    let advised = unsafe { libc::madvise(start, len, libc::MADV_HUGEPAGE) };
    if advised != 0 {
        let error = std::io::Error::last_os_error();
        tracing::debug!(%error, "the hashing memory stays on base pages");
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages<T>(_memory: &mut [std::mem::MaybeUninit<T>]) {}

/// How long a hash may go without finishing before a thread at normal priority takes it too
/// (see `Lanes`): half the callers' default deadline, leaving the other half for the hash. At
/// two seconds the benchmark's read flood over a sign-in flood, which the lanes should merely
/// slow, escalated 8-11 hashes a run, and the urgent thread's block then stayed resident.
const ESCALATE_AFTER: Duration =
    Duration::from_secs(crate::grpc::context::DEFAULT_DEADLINE.as_secs() / 2);

/// One hash or verification and who has taken it. It may run twice (a lane starved while
/// running it, then the urgent thread): the first answer is the one sent.
struct Job {
    work: Box<dyn Fn(&mut Memory) + Send + Sync>,
    state: Mutex<JobState>,
}

#[derive(Default)]
struct JobState {
    /// When a lane started it.
    on_lane: Option<Instant>,
    /// Sent to the urgent thread and not yet looked at there.
    escalated: bool,
    /// Taken by the urgent thread.
    urgent: bool,
    done: bool,
}

impl Job {
    fn state(&self) -> std::sync::MutexGuard<'_, JobState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A lane runs a job nobody has taken yet.
    fn claim_for_lane(&self) -> bool {
        let mut state = self.state();
        if state.done || state.urgent || state.on_lane.is_some() {
            return false;
        }
        state.on_lane = Some(Instant::now());
        true
    }

    /// Whether the job should go to the urgent thread: neither done nor there yet, and still
    /// waiting for a lane or running on one for longer than a hash takes on a core of its own.
    fn escalate(&self, after: Duration) -> bool {
        let mut state = self.state();
        let starving = state
            .on_lane
            .is_none_or(|started| started.elapsed() >= after);
        if state.done || state.urgent || state.escalated || !starving {
            return false;
        }
        state.escalated = true;
        true
    }

    /// The urgent thread runs an escalated job unless a lane finished it or has just begun it
    /// (its submitter escalates it again if that lane is starved too).
    fn claim_urgent(&self, after: Duration) -> bool {
        let mut state = self.state();
        state.escalated = false;
        let fresh_on_lane = state
            .on_lane
            .is_some_and(|started| started.elapsed() < after);
        if state.done || state.urgent || fresh_on_lane {
            return false;
        }
        state.urgent = true;
        true
    }

    fn run(&self, memory: &mut Memory) {
        (self.work)(memory);
        self.state().done = true;
    }
}

/// Takes jobs from `queue` until every sender is gone.
fn take_jobs(queue: &Mutex<mpsc::Receiver<Arc<Job>>>) -> impl Iterator<Item = Arc<Job>> + '_ {
    // The lock is held only while taking a job, not while running it.
    std::iter::from_fn(move || queue.lock().ok()?.recv().ok())
}

/// Hashing threads taking jobs from one queue; they end when the last `Lanes` handle is dropped.
///
/// Lanes run below request threads (`yield_to_requests`), which keeps a sign-in flood from
/// stretching other requests; but CPU-bound work of normal priority — a read flood, another
/// process on the same cores — can then starve a lane almost completely, and a sign-in would
/// outlast its deadline. So a job that has not finished `escalate_after` after it arrived, still
/// queued or running on a lane that slow, is also handed to an urgent thread at normal
/// priority: a sign-in yields to requests for that long at most (a lone sign-up starved by two
/// busy loops on this machine's two cores outlasted its 10 s deadline before). One urgent
/// thread suffices to guarantee progress and keeps the extra memory to one block, which it
/// allocates on its first job, so it costs nothing resident until needed.
struct Lanes {
    jobs: mpsc::Sender<Arc<Job>>,
    urgent: mpsc::Sender<Arc<Job>>,
    escalate_after: Duration,
}

impl Lanes {
    fn start(threads: usize, escalate_after: Duration) -> Self {
        let (jobs, queue) = mpsc::channel::<Arc<Job>>();
        let (urgent, urgent_queue) = mpsc::channel::<Arc<Job>>();
        let queue = Arc::new(Mutex::new(queue));
        let urgent_queue = Mutex::new(urgent_queue);
        for i in 0..threads.max(1) {
            let queue = queue.clone();
            spawn_thread(format!("password-{i}"), move || {
                yield_to_requests();
                let mut memory = Memory::new();
                let mut waiting = Instant::now();
                for job in take_jobs(&queue) {
                    if !job.claim_for_lane() {
                        continue;
                    }
                    let working = Instant::now();
                    job.run(&mut memory);
                    let lanes = &crate::metrics::PASSWORD_LANES;
                    lanes.add("state=\"idle\"".into(), (working - waiting).as_secs_f64());
                    lanes.add("state=\"busy\"".into(), working.elapsed().as_secs_f64());
                    waiting = Instant::now();
                }
            });
        }
        spawn_thread("urgent-hash".to_owned(), move || {
            let mut memory = None;
            for job in take_jobs(&urgent_queue) {
                if job.claim_urgent(escalate_after) {
                    crate::metrics::PASSWORD_ESCALATIONS.add(String::new(), 1.0);
                    job.run(memory.get_or_insert_with(Memory::new));
                }
            }
        });
        Self {
            jobs,
            urgent,
            escalate_after,
        }
    }

    /// Runs `work` on a hashing thread and waits for its answer without blocking the runtime.
    async fn run<T: Send + 'static>(
        &self,
        work: impl Fn(&mut Memory) -> T + Send + Sync + 'static,
    ) -> Result<T, PasswordError> {
        let _queued = Queued::enter();
        let (done, answer) = oneshot::channel();
        let done = Mutex::new(Some(done));
        let span = tracing::Span::current();
        let job = Arc::new(Job {
            work: Box::new(move |memory| {
                let answer = span.in_scope(|| work(memory));
                if let Some(done) = done.lock().ok().and_then(|mut d| d.take()) {
                    let _ = done.send(answer);
                }
            }),
            state: Mutex::default(),
        });
        self.jobs
            .send(job.clone())
            .map_err(|_| PasswordError::Stopped)?;
        let mut answer = std::pin::pin!(answer);
        loop {
            match tokio::time::timeout(self.escalate_after, &mut answer).await {
                Ok(answer) => return answer.map_err(|_| PasswordError::Stopped),
                Err(_) => {
                    if job.escalate(self.escalate_after) {
                        self.urgent
                            .send(job.clone())
                            .map_err(|_| PasswordError::Stopped)?;
                    }
                }
            }
        }
    }
}

fn spawn_thread(name: String, body: impl FnOnce() + Send + 'static) {
    if let Err(e) = std::thread::Builder::new().name(name).spawn(body) {
        tracing::error!(error = %e, "could not start a password hashing thread");
    }
}

/// Lowers the calling thread's priority to the floor (nice 19, batch scheduling): hashing is
/// throughput work that takes whatever the cores have left, while a request thread that wakes up
/// is someone waiting. The scheduler lets a running thread finish a slice of its own before a
/// waking one of higher priority takes the core, so how often a lane is picked while requests
/// are waiting is what reaches request latency; at nice 10 that was often enough to triple
/// `/users/me`'s p99 under a sign-in flood, at nice 19 it stays within 2x. Lanes still get every
/// cycle the rest leaves idle (a sign-in flood alone keeps them busy), and under a read flood
/// sign-ins slow down rather than reads. `SCHED_IDLE` was measured too and is worse: a core
/// running only idle-policy work is not balanced onto, so request threads pile up on the other
/// core. Raising niceness needs no privilege.
fn yield_to_requests() {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::{
            NormalThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
        };
        // The crate maps 0..=99 onto niceness 19..=-20.
        let lowered = ThreadPriorityValue::try_from(0u8)
            .map_err(|e| format!("{e:?}"))
            .and_then(|value| {
                thread_priority::set_thread_priority_and_policy(
                    thread_priority::thread_native_id(),
                    ThreadPriority::Crossplatform(value),
                    ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Batch),
                )
                .map_err(|e| format!("{e:?}"))
            });
        if let Err(e) = lowered {
            tracing::warn!(error = %e, "could not lower the hashing threads' priority");
        }
    }
}

/// An argon2id PHC string for `plain`, hashed in `memory`.
fn hash_in(memory: &mut Memory, plain: &[u8]) -> Result<String, PasswordError> {
    let failed = |e: &dyn std::fmt::Display| PasswordError::Hash(e.to_string());
    let argon2 = Argon2::new(Algorithm::Argon2id, Version::V0x13, params());
    let salt = SaltString::generate(&mut OsRng);
    let output = memory
        .output(&argon2, plain, salt.as_salt(), Params::DEFAULT_OUTPUT_LEN)
        .map_err(|e| failed(&e))?;
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(argon2.params()).map_err(|e| failed(&e))?,
        salt: Some(salt.as_salt()),
        hash: Some(output),
    };
    Ok(phc.to_string())
}

/// Whether `plain` matches the argon2 PHC string `stored`, computed in `memory` with the
/// algorithm, version and parameters `stored` names; compared in constant time.
fn verify_in(memory: &mut Memory, plain: &[u8], stored: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(stored) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (parsed.salt, parsed.hash) else {
        return false;
    };
    let (Ok(algorithm), Ok(params)) = (
        Algorithm::try_from(parsed.algorithm),
        Params::try_from(&parsed),
    ) else {
        return false;
    };
    let version = match parsed.version.map(Version::try_from) {
        None => Version::V0x13,
        Some(Ok(v)) => v,
        Some(Err(_)) => return false,
    };
    let argon2 = Argon2::new(algorithm, version, params);
    // `Output`'s equality is constant-time.
    memory
        .output(&argon2, plain, salt, expected.len())
        .is_ok_and(|computed| computed == expected)
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
            lanes: Arc::new(Lanes::start(concurrent, ESCALATE_AFTER)),
            dummy: Arc::new(OnceCell::new()),
        }
    }

    /// Hashes on a hashing thread.
    pub async fn hash(&self, plain: &str) -> Result<String, PasswordError> {
        let plain = plain.to_owned();
        self.lanes
            .run(move |memory| hash_in(memory, plain.as_bytes()))
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
            .run(move |memory| {
                if is_bcrypt(&hash) {
                    bcrypt::verify(plain.as_bytes(), &hash).unwrap_or(false)
                } else {
                    verify_in(memory, plain.as_bytes(), &hash)
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

    /// The mapping flags of the memory at `address`, from `/proc/self/smaps`.
    #[cfg(target_os = "linux")]
    fn mapping_flags(address: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
        let mut inside = false;
        for line in smaps.lines() {
            let range = line
                .split_whitespace()
                .next()
                .and_then(|r| r.split_once('-'));
            let bounds = range.and_then(|(from, to)| {
                Some((
                    usize::from_str_radix(from, 16).ok()?,
                    usize::from_str_radix(to, 16).ok()?,
                ))
            });
            if let Some((from, to)) = bounds {
                inside = (from..to).contains(&address);
            } else if let Some(flags) = line.strip_prefix("VmFlags:").filter(|_| inside) {
                return flags.trim().to_owned();
            }
        }
        String::new()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn lane_memory_asks_for_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            return; // a kernel without transparent huge pages refuses the hint
        }
        let memory = Memory::new();
        let middle = memory.0.as_ptr() as usize + memory.0.len() * Block::SIZE / 2;
        let flags = mapping_flags(middle);
        assert!(flags.split(' ').any(|f| f == "hg"), "VmFlags: {flags}");
        let fresh = vec![Block::default(); memory.0.len()];
        let flags = mapping_flags(fresh.as_ptr() as usize + fresh.len() * Block::SIZE / 2);
        assert!(!flags.split(' ').any(|f| f == "hg"), "VmFlags: {flags}");
    }

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
    async fn hashes_from_the_password_hash_api_verify_and_ours_verify_there() {
        use argon2::password_hash::{PasswordHasher, PasswordVerifier};
        let reference = Argon2::new(Algorithm::Argon2id, Version::V0x13, params());
        let salt = SaltString::generate(&mut OsRng);
        let theirs = reference
            .hash_password(b"interop", &salt)
            .map(|h| h.to_string())
            .unwrap_or_default();
        let p = Passwords::new(1);
        assert!(p.verify("interop", Some(&theirs)).await.unwrap_or(false));
        assert!(!p.verify("interoP", Some(&theirs)).await.unwrap_or(true));
        let ours = p.hash("interop").await.unwrap_or_default();
        let parsed = PasswordHash::new(&ours).unwrap_or_else(|e| panic!("{e}"));
        assert!(reference.verify_password(b"interop", &parsed).is_ok());
        // Other parameters than the lanes hold (more memory) still verify, in memory of their own.
        let bigger = Argon2::new(
            Algorithm::Argon2id,
            Version::V0x13,
            Params::new(24 * 1024, 1, 1, None).unwrap_or_else(|e| panic!("{e}")),
        )
        .hash_password(b"interop", &salt)
        .map(|h| h.to_string())
        .unwrap_or_default();
        assert!(p.verify("interop", Some(&bigger)).await.unwrap_or(false));
        assert!(!p
            .verify("interop", Some("$argon2id$v=19$garbage"))
            .await
            .unwrap_or(true));
    }

    /// Niceness and scheduling policy of this process's threads whose names start with
    /// `prefix`, as the kernel reports them.
    #[cfg(target_os = "linux")]
    fn priorities(prefix: &str) -> Vec<(i64, i64)> {
        std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|task| {
                let comm = std::fs::read_to_string(task.path().join("comm")).ok()?;
                if !comm.starts_with(prefix) {
                    return None;
                }
                let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
                let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
                // After the command: state is field 3, nice field 19, policy field 41.
                Some((fields.get(16)?.parse().ok()?, fields.get(38)?.parse().ok()?))
            })
            .collect()
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn lanes_run_below_request_threads_and_the_urgent_thread_beside_them() {
        let p = Passwords::new(1);
        let _ = p.hash("warm").await;
        let lanes = priorities("password-");
        assert!(!lanes.is_empty());
        // Nice 19, SCHED_BATCH (3).
        assert!(lanes.iter().all(|l| *l == (19, 3)), "{lanes:?}");
        let urgent = priorities("urgent-hash");
        assert!(!urgent.is_empty());
        // As this test's own threads: niceness unchanged, SCHED_OTHER (0).
        let nice = priorities("").first().map_or(0, |own| own.0);
        assert!(urgent.iter().all(|u| *u == (nice, 0)), "{urgent:?}");
    }

    /// A lane that cannot make progress (here: held by a job; in production: starved of CPU
    /// by work of normal priority) delays a hash by the escalation time, not indefinitely, and
    /// a hash that ran on the urgent thread is not run again when the lane gets to it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hash_behind_a_stuck_lane_runs_at_normal_priority_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let lanes = Arc::new(Lanes::start(1, Duration::from_millis(50)));
        let within = Duration::from_secs(30);
        // The lane takes a while to start (its memory); until then its jobs go urgent.
        until_the_lane_runs_one(&lanes, within).await;
        // A job whose run on the lane holds the lane; an escalated run returns at once. If the
        // lane was too slow to take it before it went urgent, another is sent.
        let mut holding = None;
        for _ in 0..20 {
            let (release, held) = mpsc::channel::<()>();
            let (on_lane, lane_held) = mpsc::channel::<()>();
            let hold = Mutex::new(Some((held, on_lane)));
            let holder = tokio::spawn({
                let lanes = lanes.clone();
                async move {
                    lanes
                        .run(move |_| {
                            if std::thread::current().name() != Some("password-0") {
                                return;
                            }
                            if let Some((held, on_lane)) =
                                hold.lock().ok().and_then(|mut h| h.take())
                            {
                                let _ = on_lane.send(());
                                let _ = held.recv();
                            }
                        })
                        .await
                }
            });
            let held = tokio::task::spawn_blocking(move || lane_held.recv_timeout(within));
            if matches!(held.await, Ok(Ok(()))) {
                holding = Some((release, holder));
                break;
            }
        }
        let Some((release, holder)) = holding else {
            panic!("the lane never held a job")
        };
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let hashed = tokio::time::timeout(
            within,
            lanes.run(move |memory| {
                counted.fetch_add(1, Ordering::SeqCst);
                hash_in(memory, b"urgent")
            }),
        )
        .await;
        let hash = hashed
            .unwrap_or_else(|_| panic!("no hash while the lane was held"))
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        let held_answer = tokio::time::timeout(within, holder).await;
        assert!(
            matches!(held_answer, Ok(Ok(Ok(())))),
            "the holding job itself was not answered"
        );
        // Free the lane, and wait until it has run a job queued after the hash (so it has
        // passed the hash's place in its queue).
        let _ = release.send(());
        until_the_lane_runs_one(&lanes, within).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    /// Sends jobs until one runs on the (single) lane rather than the urgent thread.
    async fn until_the_lane_runs_one(lanes: &Lanes, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let ran_on = lanes
                .run(|_| std::thread::current().name().map(str::to_owned))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            if ran_on.as_deref() == Some("password-0") {
                return;
            }
            assert!(Instant::now() < deadline, "the lane never ran a job");
        }
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
