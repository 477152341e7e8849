//! The distributed stack as the tests run it: one `latchkey serve <component>` process per
//! component, each service on its own Postgres database, events over a fresh RabbitMQ vhost.
//! Optionally each component sits behind a loopback balancer standing in for a Kubernetes
//! Service, so a component can be replaced one instance at a time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use latchkey_shared::testing::Infra;
use secrecy::SecretString;

use crate::helpers::{redis_url, RETRY_SCHEDULE, TRUSTED_PROXY};

pub const COMPONENTS: [&str; 5] = ["auth", "teams", "contacts", "webhooks", "gateway"];

fn expect<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Ports handed to component processes come from below the kernel's ephemeral range
/// (32768 and up), so that the listeners tests open on port 0 meanwhile cannot take one of them
/// before its process binds it; each port is handed out once per run.
const PORTS: std::ops::Range<u16> = 10_000..30_000;
static NEXT_PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);

/// A loopback port nobody listens on right now, and that no other test of this run was given.
pub fn free_port() -> String {
    let span = PORTS.end - PORTS.start;
    let _ = NEXT_PORT.compare_exchange(
        0,
        PORTS.start + (std::process::id() % u32::from(span)) as u16,
        std::sync::atomic::Ordering::SeqCst,
        std::sync::atomic::Ordering::SeqCst,
    );
    for _ in 0..span {
        let n = NEXT_PORT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let port = PORTS.start + n.wrapping_sub(PORTS.start) % span;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return format!("127.0.0.1:{port}");
        }
    }
    panic!("no free loopback port in {PORTS:?}");
}

/// A running component process.
pub struct Process {
    pub name: String,
    pub component: &'static str,
    pub child: std::process::Child,
    /// Where it listens: gRPC for a service, HTTP for a gateway.
    pub listen: String,
    /// Where a service serves `/metrics` (a gateway serves it on `listen`).
    pub metrics: String,
}

pub struct Processes {
    pub children: Vec<Process>,
    /// The environment every process starts with.
    pub env: Vec<(String, String)>,
    balancers: Vec<(&'static str, Balancer)>,
    dir: std::path::PathBuf,
    started: usize,
}

/// A component run as several instances, listening at `listen`, that every other component
/// (and the test) reaches through `target`: a list of addresses, or a name standing for them.
pub struct Replicated {
    pub component: &'static str,
    pub listen: Vec<String>,
    pub target: String,
}

/// What the test app needs from a freshly started stack.
pub struct Started {
    pub processes: Processes,
    pub base: String,
    pub grpc: Vec<(&'static str, String)>,
    pub token: SecretString,
    pub auth_db_url: String,
    pub bus: latchkey_shared::events::SharedBus,
}

impl Processes {
    /// Starts every component and waits until the gateway is ready. With `balanced`, the
    /// components reach each other (and the tests reach the gateway) through balancers.
    pub async fn start(
        infra: &Infra,
        dir: &std::path::Path,
        smtp_url: &str,
        balanced: bool,
        extra_env: &[(&str, String)],
        replicas: &[Replicated],
    ) -> Started {
        let mut env: Vec<(String, String)> = Vec::new();
        for name in ["auth", "teams", "contacts", "webhooks"] {
            let url = expect(infra.postgres_database(name).await, "postgres database");
            env.push((
                format!("LATCHKEY_{}_DATABASE_URL", name.to_uppercase()),
                url,
            ));
        }
        let auth_db_url = env[0].1.clone();
        let amqp_url = expect(infra.amqp_vhost().await, "rabbitmq vhost");
        env.push(("LATCHKEY_AMQP_URL".into(), amqp_url.clone()));
        env.push(("LATCHKEY_SMTP_URL".into(), smtp_url.to_owned()));
        let token = latchkey_shared::crypto::random_base32(45);
        env.push(("LATCHKEY_INTERNAL_TOKEN".into(), token.clone()));
        env.push((
            "LATCHKEY_SECRETS_KEY".into(),
            latchkey_shared::sealed::SecretsKey::generate_base64(),
        ));
        let mut balancers = Vec::new();
        let mut listen = Vec::new();
        let mut reach = Vec::new();
        for name in COMPONENTS {
            if let Some(r) = replicas.iter().find(|r| r.component == name) {
                listen.extend(r.listen.iter().map(|l| (name, l.clone())));
                reach.push((name, r.target.clone()));
                continue;
            }
            let own = free_port();
            let shared = if balanced {
                let balancer = Balancer::start(own.clone()).await;
                let addr = balancer.addr.clone();
                balancers.push((name, balancer));
                addr
            } else {
                own.clone()
            };
            listen.push((name, own));
            reach.push((name, shared));
        }
        for (name, addr) in &reach {
            let var = if *name == "gateway" {
                "LATCHKEY_HTTP_ADDR".to_owned()
            } else {
                format!("LATCHKEY_{}_ADDR", name.to_uppercase())
            };
            env.push((var, addr.clone()));
        }
        let gateway = reach
            .iter()
            .find(|(n, _)| *n == "gateway")
            .map(|(_, a)| a.clone())
            .unwrap_or_default();
        // Every gateway of a deployment issues and accepts tokens under one public URL.
        env.push(("LATCHKEY_PUBLIC_URL".into(), format!("http://{gateway}")));
        env.push(("LATCHKEY_MAX_BODY_BYTES".into(), (64 * 1024).to_string()));
        env.push((
            "LATCHKEY_WEBHOOK_RETRY_SCHEDULE".into(),
            RETRY_SCHEDULE.into(),
        ));
        env.push(("LATCHKEY_WEBHOOK_ALLOW_HTTP".into(), "true".into()));
        env.push(("LATCHKEY_WEBHOOK_ALLOW_LOOPBACK".into(), "true".into()));
        env.push(("LATCHKEY_REDIS_URL".into(), redis_url()));
        env.push(("LATCHKEY_TRUSTED_PROXIES".into(), TRUSTED_PROXY.into()));
        env.push((
            "LATCHKEY_REDIS_KEY_PREFIX".into(),
            format!("{}:", latchkey_shared::testing::unique("lk")),
        ));
        if balanced {
            // Long enough for a load balancer to take the instance out; short for the tests.
            env.push(("LATCHKEY_SHUTDOWN_DELAY_SECONDS".into(), "1".into()));
            // Steady load from one address would meet the per-address limits; this stack
            // measures drains, not limits.
            env.push(("LATCHKEY_RATE_LIMITS".into(), "off".into()));
        }
        env.extend(extra_env.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        let mut processes = Self {
            children: Vec::new(),
            env,
            balancers,
            dir: dir.to_owned(),
            started: 0,
        };
        for (i, (component, addr)) in listen.into_iter().enumerate() {
            let name = if processes.children.iter().any(|p| p.component == component) {
                format!("{component}-{i}")
            } else {
                component.to_owned()
            };
            let process = processes.spawn(component, name, addr);
            processes.children.push(process);
        }
        let base = format!("http://{gateway}");
        if let Err(why) = wait_http_ready(&base, Duration::from_secs(60)).await {
            let logs = processes.logs();
            for p in &mut processes.children {
                let _ = p.child.kill();
            }
            panic!("distributed stack not ready: {why}\n{logs}");
        }
        let grpc = reach.into_iter().filter(|(n, _)| *n != "gateway").collect();
        let bus: latchkey_shared::events::SharedBus =
            Arc::new(latchkey_shared::events::amqp::AmqpBus::new(amqp_url));
        Started {
            processes,
            base,
            grpc,
            token: SecretString::from(token),
            auth_db_url,
            bus,
        }
    }

    /// Starts `latchkey serve <component>` listening on `listen`, logging to `<name>.log`.
    fn spawn(&mut self, component: &'static str, name: String, listen: String) -> Process {
        let log = expect(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join(format!("{name}.log"))),
            "log file",
        );
        let metrics = free_port();
        let listen_var = if component == "gateway" {
            "LATCHKEY_HTTP_ADDR"
        } else {
            "LATCHKEY_GRPC_ADDR"
        };
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_latchkey"));
        cmd.arg("serve")
            .arg(component)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("LATCHKEY_DATA_DIR", &self.dir)
            .env(listen_var, &listen)
            .env("LATCHKEY_METRICS_ADDR", &metrics);
        cmd.stdout(std::process::Stdio::null()).stderr(log);
        self.started += 1;
        Process {
            name,
            component,
            child: expect(cmd.spawn(), "spawn latchkey serve"),
            listen,
            metrics,
        }
    }

    /// The log of one process.
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default()
    }

    /// The log of every process, for failure messages.
    pub fn logs(&self) -> String {
        self.children
            .iter()
            .map(|p| {
                format!(
                    "--- {}\n{}",
                    p.name,
                    std::fs::read_to_string(self.dir.join(format!("{}.log", p.name)))
                        .unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A second gateway process beside the first, sharing its services, broker and Redis; its
    /// base URL, once it is ready.
    pub async fn second_gateway(&mut self) -> String {
        let addr = free_port();
        let process = self.spawn("gateway", "gateway-2".into(), addr.clone());
        self.children.push(process);
        let base = format!("http://{addr}");
        expect(
            wait_http_ready(&base, Duration::from_secs(30)).await,
            "second gateway",
        );
        base
    }

    /// The balancer in front of `component` (the balanced stack only).
    fn balancer(&self, component: &str) -> Balancer {
        self.balancers
            .iter()
            .find(|(n, _)| *n == component)
            .map(|(_, b)| b.clone())
            .unwrap_or_else(|| panic!("{component} has no balancer: start the balanced stack"))
    }

    /// One more instance of `component` behind its balancer, which from now on hands new
    /// connections to its instances in turn (a Service over several replicas).
    pub async fn add_replica(&mut self, component: &'static str) {
        let balancer = self.balancer(component);
        let name = format!("{component}-{}", self.started);
        let fresh = self.spawn(component, name, free_port());
        if let Err(why) = wait_ready(component, &fresh.listen).await {
            panic!("new {component} not ready: {why}\n{}", self.logs());
        }
        balancer.add(fresh.listen.clone());
        self.children.push(fresh);
    }

    /// Starts one more instance of `component` on `listen` and waits until it is ready.
    pub async fn add_instance(&mut self, component: &'static str, listen: &str) {
        let name = format!("{component}-{}", self.started);
        let fresh = self.spawn(component, name, listen.to_owned());
        self.children.push(fresh);
        if let Err(why) = wait_ready(component, listen).await {
            panic!("new {component} not ready: {why}\n{}", self.logs());
        }
    }

    /// Ends the instance on `listen`: SIGKILL, or SIGTERM and a clean exit within the grace
    /// period.
    pub async fn end_instance(&mut self, listen: &str, kill: bool) {
        let Some(i) = self.children.iter().position(|p| p.listen == listen) else {
            panic!("no instance on {listen}");
        };
        let mut p = self.children.remove(i);
        if kill {
            let _ = p.child.kill();
            let _ = p.child.wait();
            return;
        }
        let status = terminate(&mut p.child, Duration::from_secs(40)).await;
        assert!(
            status.is_some_and(|s| s.success()),
            "{} did not exit cleanly on SIGTERM: {status:?}\n{}",
            p.name,
            self.log(&p.name)
        );
    }

    /// Stops every instance of `component` with SIGKILL; `resume` starts them again on the
    /// same addresses.
    pub fn halt(&mut self, component: &str) -> Vec<(String, &'static str, String)> {
        let mut halted = Vec::new();
        while let Some(i) = self.children.iter().position(|p| p.component == component) {
            let mut p = self.children.remove(i);
            let _ = p.child.kill();
            let _ = p.child.wait();
            halted.push((p.name, p.component, p.listen));
        }
        halted
    }

    /// Starts what `halt` stopped and waits until each instance is ready.
    pub async fn resume(&mut self, halted: Vec<(String, &'static str, String)>) {
        for (name, component, listen) in halted {
            let p = self.spawn(component, name, listen.clone());
            self.children.push(p);
            if let Err(why) = wait_ready(component, &listen).await {
                panic!("{component} not ready again: {why}\n{}", self.logs());
            }
        }
    }

    /// Kills a component with SIGKILL (no clean shutdown) and starts it again on the same
    /// address.
    pub fn kill_and_restart(&mut self, component: &str) -> bool {
        let Some(i) = self.children.iter().position(|p| p.component == component) else {
            return false;
        };
        let old = self.children.remove(i);
        let Process {
            name,
            component,
            mut child,
            listen,
            ..
        } = old;
        let _ = child.kill();
        let _ = child.wait();
        let process = self.spawn(component, name, listen);
        self.children.insert(i, process);
        true
    }

    /// Replaces a component the way a rolling update does: a new instance starts on a new
    /// address, the balancer sends new connections to it once it is ready, then the old one
    /// gets SIGTERM and must exit cleanly within the grace period.
    pub async fn roll(&mut self, component: &'static str) {
        let Some(i) = self.children.iter().position(|p| p.component == component) else {
            panic!("no {component} to roll");
        };
        let balancer = self.balancer(component);
        let name = format!("{component}-{}", self.started);
        let fresh = self.spawn(component, name, free_port());
        if let Err(why) = wait_ready(component, &fresh.listen).await {
            panic!("new {component} not ready: {why}\n{}", self.logs());
        }
        balancer.point_to(fresh.listen.clone());
        let mut old = std::mem::replace(&mut self.children[i], fresh);
        let name = old.name.clone();
        let status = terminate(&mut old.child, Duration::from_secs(40)).await;
        let log = std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default();
        assert!(
            status.is_some_and(|s| s.success()),
            "{name} did not exit cleanly on SIGTERM: {status:?}\n{log}"
        );
    }

    /// SIGTERM to every process; each must exit cleanly.
    pub async fn stop(mut self) {
        for p in &self.children {
            sigterm(&p.child);
        }
        for mut p in std::mem::take(&mut self.children) {
            let status = terminate(&mut p.child, Duration::from_secs(40)).await;
            let log = std::fs::read_to_string(self.dir.join(format!("{}.log", p.name)))
                .unwrap_or_default();
            assert!(
                status.is_some_and(|s| s.success()),
                "{} did not exit cleanly on SIGTERM: {status:?}\n{log}",
                p.name
            );
        }
    }
}

impl Drop for Processes {
    /// A failed test must not leave component processes behind.
    fn drop(&mut self) {
        for p in &mut self.children {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }
}

fn sigterm(child: &std::process::Child) {
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
}

/// Sends SIGTERM and waits up to `grace` for the exit; SIGKILL after that (then `None`).
async fn terminate(
    child: &mut std::process::Child,
    grace: Duration,
) -> Option<std::process::ExitStatus> {
    sigterm(child);
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

async fn wait_ready(component: &str, listen: &str) -> Result<(), String> {
    if component == "gateway" {
        wait_http_ready(&format!("http://{listen}"), Duration::from_secs(30)).await
    } else {
        wait_grpc_serving(listen, Duration::from_secs(30)).await
    }
}

async fn wait_http_ready(base: &str, within: Duration) -> Result<(), String> {
    let client = reqwest::Client::new();
    let deadline = std::time::Instant::now() + within;
    loop {
        let answer = client.get(format!("{base}/health/ready")).send().await;
        if answer.as_ref().is_ok_and(|r| r.status() == 200) {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("{base}/health/ready: {answer:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_grpc_serving(addr: &str, within: Duration) -> Result<(), String> {
    use tonic_health::pb::health_check_response::ServingStatus;
    let deadline = std::time::Instant::now() + within;
    loop {
        let channel = latchkey_shared::grpc::lazy_channel(addr).map_err(|e| e.to_string())?;
        let mut client = tonic_health::pb::health_client::HealthClient::new(channel);
        let answer = client
            .check(tonic_health::pb::HealthCheckRequest {
                service: String::new(),
            })
            .await;
        if answer
            .as_ref()
            .is_ok_and(|r| r.get_ref().status() == ServingStatus::Serving)
        {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("{addr}: {answer:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A loopback TCP balancer standing in for a Kubernetes Service: each new connection goes to
/// the next backend in turn; connections already open stay with the backend they reached.
#[derive(Clone)]
pub struct Balancer {
    pub addr: String,
    backends: Arc<Mutex<Vec<String>>>,
}

impl Balancer {
    async fn start(backend: String) -> Self {
        let listener = expect(tokio::net::TcpListener::bind("127.0.0.1:0").await, "bind");
        let addr = expect(listener.local_addr(), "local addr").to_string();
        let backends = Arc::new(Mutex::new(vec![backend]));
        let current = backends.clone();
        tokio::spawn(async move {
            let mut turn = 0usize;
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = current
                    .lock()
                    .ok()
                    .and_then(|b| b.get(turn % b.len().max(1)).cloned())
                    .unwrap_or_default();
                turn = turn.wrapping_add(1);
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = outbound.set_nodelay(true);
                        let _ = inbound.set_nodelay(true);
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self { addr, backends }
    }

    fn point_to(&self, backend: String) {
        if let Ok(mut b) = self.backends.lock() {
            *b = vec![backend];
        }
    }

    fn add(&self, backend: String) {
        if let Ok(mut b) = self.backends.lock() {
            b.push(backend);
        }
    }
}
