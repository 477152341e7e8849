//! Per-call balancing over every ready replica of a target. A Kubernetes ClusterIP Service
//! balances connections, not calls, and a gRPC client holds one HTTP/2 connection for as long as
//! it lives, so one connection per target would pin each caller to one replica. Instead a target
//! (`host:port`, or a comma-separated list of them) is resolved to every address its names stand
//! for (a headless Service's DNS records), each address gets its own connection, and each call
//! goes to the least busy ready replica, taking turns among equals. Names are resolved again
//! every `REFRESH` and at once after a connection fails; addresses that disappear are dropped.
//! Each replica's `grpc.health.v1` status is watched, so a draining replica (NOT_SERVING) gets
//! no new calls while it finishes the ones it has.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use tonic::transport::Endpoint;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};

/// How often names are resolved again when nothing failed (issue 16 asks for at most 30 s).
pub const REFRESH: Duration = Duration::from_secs(10);
/// Waits between attempts to watch a replica that cannot be reached.
const WATCH_BACKOFF: [Duration; 4] = [
    Duration::from_millis(100),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
];

/// What a replica's health watch last said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Health {
    /// Not known yet (or the server has no health service): usable.
    Unknown = 0,
    Serving = 1,
    /// Draining for shutdown: no new calls.
    NotServing = 2,
    /// The connection failed: no new calls until it answers again.
    Unreachable = 3,
}

impl Health {
    fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Serving,
            2 => Self::NotServing,
            3 => Self::Unreachable,
            _ => Self::Unknown,
        }
    }
}

/// One address of a target, with its own connection.
pub struct Replica {
    pub addr: Option<SocketAddr>,
    pub channel: tonic::transport::Channel,
    /// Small unary calls, sent together under load.
    pub mux: Arc<super::mux::Client>,
    in_flight: AtomicUsize,
    health: Arc<AtomicU8>,
    watcher: Option<tokio::task::AbortHandle>,
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(w) = &self.watcher {
            w.abort();
        }
    }
}

impl Replica {
    fn health(&self) -> Health {
        Health::from_u8(self.health.load(Ordering::Relaxed))
    }

    fn usable(&self) -> bool {
        matches!(self.health(), Health::Unknown | Health::Serving)
    }

    /// A call could not reach it: keep it out of picks until its health watch reconnects.
    pub fn unreachable(&self) {
        self.health
            .store(Health::Unreachable as u8, Ordering::Relaxed);
    }
}

/// Counts a call against its replica while it is in flight.
pub struct InFlight(Arc<Replica>);

impl InFlight {
    pub fn replica(&self) -> &Arc<Replica> {
        &self.0
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The replicas of one target.
pub struct Pool {
    scheme: &'static str,
    /// (host, port) as configured; a host may be a name or an IP literal.
    target: Vec<(String, u16)>,
    replicas: RwLock<Arc<Vec<Arc<Replica>>>>,
    turn: AtomicUsize,
    wake: Arc<tokio::sync::Notify>,
    refresher_started: AtomicBool,
    /// The target when it is one IP address: a component of this process may serve it.
    local_addr: Option<SocketAddr>,
}

fn endpoint(uri: String) -> Result<Endpoint, tonic::transport::Error> {
    Ok(Endpoint::from_shared(uri)?
        .connect_timeout(Duration::from_secs(2))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(true))
}

/// Splits `a:1,b:2` (optionally with an `http://` scheme) into its (host, port) entries.
pub fn parse_target(text: &str) -> anyhow::Result<(&'static str, Vec<(String, u16)>)> {
    let mut scheme = "http";
    let mut entries = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let rest = if let Some(r) = part.strip_prefix("https://") {
            scheme = "https";
            r
        } else {
            part.strip_prefix("http://").unwrap_or(part)
        };
        let rest = rest.trim_end_matches('/');
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| anyhow::anyhow!("{part}: expected host:port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| anyhow::anyhow!("{part}: the port is not a number"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            anyhow::bail!("{part}: expected host:port");
        }
        entries.push((host.to_owned(), port));
    }
    if entries.is_empty() {
        anyhow::bail!("no address given");
    }
    Ok((scheme, entries))
}

impl Pool {
    /// A pool for `text` (see `parse_target`); nothing is resolved or connected until the
    /// first call.
    pub fn new(text: &str) -> anyhow::Result<Arc<Self>> {
        let (scheme, target) = parse_target(text)?;
        let local_addr = match target.as_slice() {
            [(host, port)] => host
                .parse::<std::net::IpAddr>()
                .ok()
                .map(|ip| SocketAddr::new(ip, *port)),
            _ => None,
        };
        Ok(Arc::new(Self {
            local_addr,
            scheme,
            target,
            replicas: RwLock::new(Arc::new(Vec::new())),
            turn: AtomicUsize::new(0),
            wake: Arc::new(tokio::sync::Notify::new()),
            refresher_started: AtomicBool::new(false),
        }))
    }

    /// A pool of one given channel, never resolved (tests, and callers that built their own).
    pub fn fixed(channel: tonic::transport::Channel) -> Arc<Self> {
        let replica = Arc::new(Replica {
            addr: None,
            mux: super::mux::Client::new(channel.clone()),
            channel,
            in_flight: AtomicUsize::new(0),
            health: Arc::new(AtomicU8::new(Health::Unknown as u8)),
            watcher: None,
        });
        Arc::new(Self {
            scheme: "http",
            target: Vec::new(),
            replicas: RwLock::new(Arc::new(vec![replica])),
            turn: AtomicUsize::new(0),
            wake: Arc::new(tokio::sync::Notify::new()),
            refresher_started: AtomicBool::new(true),
            local_addr: None,
        })
    }

    /// The address to try in-process first, when the target is one address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    fn snapshot(&self) -> Arc<Vec<Arc<Replica>>> {
        self.replicas.read().map(|r| r.clone()).unwrap_or_default()
    }

    /// The addresses the pool holds now, for tests and diagnostics.
    pub fn addresses(&self) -> Vec<SocketAddr> {
        self.snapshot().iter().filter_map(|r| r.addr).collect()
    }

    /// Picks the replica for one call: the least busy usable one, taking turns among equals;
    /// when none is usable, the least busy of all (a call that may fail beats one that surely
    /// does). Resolves first when nothing is known yet.
    pub async fn pick(self: &Arc<Self>) -> Option<InFlight> {
        self.start_refresher();
        let mut replicas = self.snapshot();
        if replicas.is_empty() {
            self.refresh().await;
            replicas = self.snapshot();
        }
        let n = replicas.len();
        if n == 0 {
            return None;
        }
        let start = self.turn.fetch_add(1, Ordering::Relaxed) % n;
        let in_turn = (0..n).map(|i| &replicas[(start + i) % n]);
        let least = |only_usable: bool| {
            in_turn
                .clone()
                .filter(|r| !only_usable || r.usable())
                .min_by_key(|r| r.in_flight.load(Ordering::Relaxed))
                .cloned()
        };
        let chosen = least(true).or_else(|| least(false))?;
        chosen.in_flight.fetch_add(1, Ordering::Relaxed);
        Some(InFlight(chosen))
    }

    /// Asks for a resolution now (a connection failed: the replica may be gone for good).
    pub fn resolve_soon(&self) {
        self.wake.notify_one();
    }

    /// Resolves the target and replaces the replica set: kept addresses keep their connection,
    /// new ones get one, vanished ones are dropped. A failed resolution keeps what is known.
    pub async fn refresh(&self) {
        if self.target.is_empty() {
            return;
        }
        let mut found: Vec<SocketAddr> = Vec::new();
        for (host, port) in &self.target {
            match tokio::net::lookup_host((host.as_str(), *port)).await {
                Ok(addrs) => found.extend(addrs),
                Err(e) => {
                    tracing::warn!(%host, error = %e, "cannot resolve a gRPC target; keeping the addresses known");
                    return;
                }
            }
        }
        found.sort();
        found.dedup();
        let current = self.snapshot();
        if current
            .iter()
            .filter_map(|r| r.addr)
            .eq(found.iter().copied())
        {
            return;
        }
        let next: Vec<Arc<Replica>> = found
            .iter()
            .filter_map(|addr| {
                current
                    .iter()
                    .find(|r| r.addr == Some(*addr))
                    .cloned()
                    .or_else(|| self.connect(*addr))
            })
            .collect();
        tracing::info!(
            target = ?self.target,
            addresses = ?found,
            "gRPC target resolved"
        );
        if let Ok(mut r) = self.replicas.write() {
            *r = Arc::new(next);
        }
    }

    fn connect(&self, addr: SocketAddr) -> Option<Arc<Replica>> {
        let channel = match endpoint(format!("{}://{addr}", self.scheme)) {
            Ok(e) => e.connect_lazy(),
            Err(e) => {
                tracing::warn!(%addr, error = %e, "cannot make a channel");
                return None;
            }
        };
        let health = Arc::new(AtomicU8::new(Health::Unknown as u8));
        let watcher = tokio::spawn(watch(channel.clone(), health.clone())).abort_handle();
        Some(Arc::new(Replica {
            addr: Some(addr),
            mux: super::mux::Client::new(channel.clone()),
            channel,
            in_flight: AtomicUsize::new(0),
            health,
            watcher: Some(watcher),
        }))
    }

    /// Resolves again every `REFRESH`, or sooner when asked, for as long as the pool lives.
    fn start_refresher(self: &Arc<Self>) {
        if self.refresher_started.swap(true, Ordering::Relaxed) {
            return;
        }
        // Only a weak reference while waiting, so a dropped channel's pool goes at once.
        let pool: Weak<Self> = Arc::downgrade(self);
        let wake = self.wake.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = wake.notified() => {}
                    () = tokio::time::sleep(REFRESH) => {}
                }
                let Some(p) = pool.upgrade() else { break };
                p.refresh().await;
                drop(p);
                // At most one resolution per moment, however many calls failed at once.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }
}

/// How often a draining replica is asked whether it serves again.
const DRAINING_POLL: Duration = Duration::from_millis(500);
/// How long one watch stream is kept before a new one replaces it. A server ends an aged
/// connection gracefully (GOAWAY, then it waits for the streams on it), so a stream held
/// for ever would keep every aged connection open for ever.
const WATCH_RENEWAL: Duration = Duration::from_secs(30);

/// Follows a replica's health for as long as the replica is in the pool (the task is aborted
/// when it leaves). A server without a health service stays `Unknown`, which is usable.
/// While the replica serves, one watch stream says at once when it starts draining; then the
/// stream is dropped (an open stream would hold the replica's graceful shutdown until it ends)
/// and single checks follow until it serves again or goes away. The stream is renewed every
/// `WATCH_RENEWAL`, on the channel's current connection.
async fn watch(channel: tonic::transport::Channel, health: Arc<AtomicU8>) {
    let set = |h: Health| health.store(h as u8, Ordering::Relaxed);
    let request = || HealthCheckRequest {
        service: String::new(),
    };
    let mut failures = 0usize;
    loop {
        let mut client = HealthClient::new(channel.clone());
        match client.watch(request()).await {
            Ok(response) => {
                let mut stream = response.into_inner();
                failures = 0;
                let renew = tokio::time::sleep(WATCH_RENEWAL);
                tokio::pin!(renew);
                let draining = loop {
                    let message = tokio::select! {
                        m = stream.message() => m,
                        () = &mut renew => break false,
                    };
                    match message {
                        Ok(Some(m)) if m.status() == ServingStatus::Serving => {
                            set(Health::Serving);
                        }
                        Ok(Some(_)) => break true,
                        // The server ended the stream (connection aged out): watch again.
                        Ok(None) => break false,
                        Err(_) => {
                            set(Health::Unreachable);
                            break false;
                        }
                    }
                };
                drop(stream);
                if draining {
                    set(Health::NotServing);
                    loop {
                        tokio::time::sleep(DRAINING_POLL).await;
                        match client.check(request()).await {
                            Ok(r) if r.get_ref().status() == ServingStatus::Serving => break,
                            Ok(_) => {}
                            Err(_) => {
                                set(Health::Unreachable);
                                break;
                            }
                        }
                    }
                }
            }
            Err(status) if status.code() == tonic::Code::Unimplemented => {
                set(Health::Unknown);
                return;
            }
            Err(_) => {
                set(Health::Unreachable);
                let wait = WATCH_BACKOFF[failures.min(WATCH_BACKOFF.len() - 1)];
                failures += 1;
                tokio::time::sleep(wait).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_lists_of_host_and_port() {
        let (scheme, entries) = parse_target("auth-0:50051, http://auth-1:50051,[::1]:7")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(scheme, "http");
        assert_eq!(
            entries,
            vec![
                ("auth-0".to_owned(), 50051),
                ("auth-1".to_owned(), 50051),
                ("::1".to_owned(), 7)
            ]
        );
        for bad in ["", "nohost", "a:b", ":1"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }

    /// Three replicas whose health nobody watches, so the test alone decides it.
    fn unwatched() -> Arc<Pool> {
        let replicas = ["127.0.0.1:1", "127.0.0.2:1", "127.0.0.3:1"]
            .iter()
            .map(|a| {
                let channel = endpoint(format!("http://{a}"))
                    .unwrap_or_else(|e| panic!("{e}"))
                    .connect_lazy();
                let mut r = Pool::fixed(channel).snapshot()[0].clone();
                if let Some(r) = Arc::get_mut(&mut r) {
                    r.addr = a.parse().ok();
                }
                r
            })
            .collect();
        let pool = Pool::new("127.0.0.1:1").unwrap_or_else(|e| panic!("{e}"));
        if let Ok(mut r) = pool.replicas.write() {
            *r = Arc::new(replicas);
        }
        pool.refresher_started.store(true, Ordering::Relaxed);
        pool
    }

    #[tokio::test]
    async fn calls_take_turns_and_avoid_busy_and_unreachable_replicas() {
        let pool = unwatched();
        assert_eq!(pool.addresses().len(), 3);
        // Idle replicas take turns.
        let mut seen = Vec::new();
        for _ in 0..6 {
            let call = pool.pick().await.unwrap_or_else(|| panic!("no replica"));
            seen.push(call.replica().addr);
        }
        assert_eq!(seen[0..3], seen[3..6]);
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 3);
        // A busy one is passed over while the others are idle.
        let busy = pool.pick().await.unwrap_or_else(|| panic!("no replica"));
        for _ in 0..4 {
            let call = pool.pick().await.unwrap_or_else(|| panic!("no replica"));
            assert_ne!(call.replica().addr, busy.replica().addr);
        }
        drop(busy);
        // Unreachable ones get nothing while another can be had; with none left, still a pick.
        let replicas = pool.snapshot();
        replicas[0].unreachable();
        replicas[1].unreachable();
        for _ in 0..3 {
            let call = pool.pick().await.unwrap_or_else(|| panic!("no replica"));
            assert_eq!(call.replica().addr, replicas[2].addr);
        }
        replicas[2].unreachable();
        assert!(pool.pick().await.is_some());
    }

    #[tokio::test]
    async fn names_resolve_to_every_address_and_vanished_ones_leave() {
        let pool = Pool::new("localhost:9, 127.0.0.7:9").unwrap_or_else(|e| panic!("{e}"));
        pool.refresh().await;
        let addrs = pool.addresses();
        assert!(addrs.contains(&"127.0.0.7:9".parse().unwrap_or_else(|e| panic!("{e}"))));
        assert!(addrs.len() >= 2, "{addrs:?}");
    }
}
