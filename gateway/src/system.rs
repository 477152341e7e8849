//! Composition of the whole system: the four services and the gateway, each on its own
//! loopback listener, in this process. Embedded mode runs it on SQLite with the in-process bus;
//! tests also run it on Postgres and RabbitMQ. Production runs each component as its own
//! process (`latchkey serve <component>`), through the same `serve` functions.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use latchkey_shared::clock;
use latchkey_shared::events::amqp::AmqpBus;
use latchkey_shared::events::in_process::InProcessBus;
use latchkey_shared::events::SharedBus;
use latchkey_shared::grpc::Deps;
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::state::{AppState, GatewayConfig};

/// Database URLs of the four services.
#[derive(Debug, Clone)]
pub struct Databases {
    pub auth: String,
    pub teams: String,
    pub contacts: String,
    pub webhooks: String,
}

impl Databases {
    /// One SQLite file per service in `dir`.
    pub fn sqlite_in(dir: &std::path::Path) -> Self {
        let url = |name: &str| format!("sqlite://{}", dir.join(format!("{name}.db")).display());
        Self {
            auth: url("auth"),
            teams: url("teams"),
            contacts: url("contacts"),
            webhooks: url("webhooks"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SystemConfig {
    pub http_addr: String,
    /// Public base URL; defaults to `http://<bound address>`.
    pub public_url: Option<String>,
    pub databases: Databases,
    /// RabbitMQ; `None` selects the in-process bus.
    pub amqp_url: Option<SecretString>,
    pub mail: latchkey_contacts::MailConfig,
    pub max_body_bytes: usize,
    pub key_cache_ttl: Duration,
    /// Delivery settings; its `database_url` is replaced by `databases.webhooks`.
    pub webhooks: latchkey_webhooks::Config,
    pub rate_limits: crate::limits::RateLimitConfig,
    /// Seals stored secrets that must be read back.
    pub secrets: latchkey_shared::sealed::SecretsKey,
}

/// A running system; dropping it does not stop it, `shutdown` does.
pub struct Running {
    /// The event bus the components share.
    pub bus: SharedBus,
    pub http_addr: SocketAddr,
    pub grpc_addrs: Vec<(&'static str, SocketAddr)>,
    pub internal_token: SecretString,
    stop: watch::Sender<bool>,
    tasks: Vec<(&'static str, JoinHandle<anyhow::Result<()>>)>,
}

/// A future that resolves once `stop` flips to true.
pub async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Chooses the bus: RabbitMQ when a URL is configured (checked now), else in-process.
pub async fn bus(amqp_url: Option<&SecretString>) -> anyhow::Result<SharedBus> {
    Ok(match amqp_url {
        Some(url) => {
            let bus = AmqpBus::new(url.expose_secret());
            bus.check().await?;
            Arc::new(bus)
        }
        None => Arc::new(InProcessBus::new()),
    })
}

pub async fn start(cfg: SystemConfig) -> anyhow::Result<Running> {
    let internal_token = SecretString::from(latchkey_shared::crypto::random_base32(45));
    // Every listener is bound before anything starts, so each component knows the others'
    // addresses (and tokens their issuer) from the start.
    let loopback = || tokio::net::TcpListener::bind("127.0.0.1:0");
    let listeners = [
        loopback().await?,
        loopback().await?,
        loopback().await?,
        loopback().await?,
    ];
    let names = ["auth", "teams", "contacts", "webhooks"];
    let grpc_addrs: Vec<(&'static str, SocketAddr)> = names
        .iter()
        .zip(&listeners)
        .map(|(n, l)| Ok((*n, l.local_addr()?)))
        .collect::<std::io::Result<_>>()?;
    let addr = |name: &str| {
        grpc_addrs
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, a)| a.to_string())
            .unwrap_or_default()
    };
    let http_listener = tokio::net::TcpListener::bind(&cfg.http_addr).await?;
    let http_addr = http_listener.local_addr()?;
    let public_url = cfg
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{http_addr}"));

    let bus = bus(cfg.amqp_url.as_ref()).await?;
    let deps = Deps {
        calls: Default::default(),
        bus: bus.clone(),
        clock: clock::system(),
        internal_token: internal_token.clone(),
        auth_addr: addr("auth"),
        // One process, no load balancer to wait for.
        shutdown_delay: Duration::ZERO,
        max_connection_age: latchkey_shared::grpc::server::MAX_CONNECTION_AGE,
        secrets: cfg.secrets.clone(),
    };
    let (stop, stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    let [auth_l, teams_l, contacts_l, webhooks_l] = listeners;
    let dbs = &cfg.databases;
    macro_rules! start_service {
        ($name:literal, $krate:ident, $cfg:expr, $listener:expr) => {{
            let task = tokio::spawn($krate::serve(
                $cfg,
                deps.clone(),
                $listener,
                stopped(stop_rx.clone()),
            ));
            tasks.push(($name, task));
        }};
    }
    let auth = latchkey_auth::Config {
        database_url: dbs.auth.clone(),
        contacts_addr: addr("contacts"),
        teams_addr: addr("teams"),
        public_url: public_url.clone(),
    };
    start_service!("auth", latchkey_auth, auth, auth_l);
    let teams = latchkey_teams::Config {
        database_url: dbs.teams.clone(),
        contacts_addr: addr("contacts"),
    };
    start_service!("teams", latchkey_teams, teams, teams_l);
    let contacts = latchkey_contacts::Config {
        database_url: dbs.contacts.clone(),
        mail: cfg.mail.clone(),
    };
    start_service!("contacts", latchkey_contacts, contacts, contacts_l);
    let webhooks = latchkey_webhooks::Config {
        database_url: dbs.webhooks.clone(),
        ..cfg.webhooks.clone()
    };
    start_service!("webhooks", latchkey_webhooks, webhooks, webhooks_l);

    let gateway = GatewayConfig {
        auth_addr: addr("auth"),
        teams_addr: addr("teams"),
        contacts_addr: addr("contacts"),
        webhooks_addr: addr("webhooks"),
        internal_token: internal_token.clone(),
        public_url,
        max_body_bytes: cfg.max_body_bytes,
        key_cache_ttl: cfg.key_cache_ttl,
        rate_limits: cfg.rate_limits.clone(),
        shutdown_delay: Duration::ZERO,
    };
    let state = AppState::new(gateway, Some(bus.clone()))?;
    let listener = http_listener;
    tasks.push((
        "gateway",
        tokio::spawn(crate::serve(listener, state, stopped(stop_rx.clone()))),
    ));
    let running = Running {
        bus,
        http_addr,
        grpc_addrs,
        internal_token,
        stop,
        tasks,
    };
    running.wait_ready().await?;
    Ok(running)
}

impl Running {
    /// Waits until every service answers health and the gateway answers `GET /api/v1/`.
    async fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Some((name, task)) = self.tasks.iter().find(|(_, t)| t.is_finished()) {
                let _ = task;
                anyhow::bail!("component {name} stopped during start-up; see the log above");
            }
            let mut all = true;
            for (_, addr) in &self.grpc_addrs {
                let channel = latchkey_shared::grpc::lazy_channel(&addr.to_string())?;
                let mut client = tonic_health::pb::health_client::HealthClient::new(channel);
                let ok = client
                    .check(tonic_health::pb::HealthCheckRequest {
                        service: String::new(),
                    })
                    .await
                    .is_ok_and(|r| {
                        r.into_inner().status()
                            == tonic_health::pb::health_check_response::ServingStatus::Serving
                    });
                all &= ok;
            }
            if all {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                anyhow::bail!("services did not become ready within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// An auth client authenticated as an internal component.
    pub fn auth_client(&self) -> anyhow::Result<crate::state::AuthClient> {
        let addr = self
            .grpc_addrs
            .iter()
            .find(|(n, _)| *n == "auth")
            .map(|(_, a)| a.to_string())
            .unwrap_or_default();
        let caller = latchkey_shared::grpc::PresentCaller::new(&self.internal_token)?;
        Ok(
            latchkey_proto::auth::v1::projects_client::ProjectsClient::with_interceptor(
                latchkey_shared::grpc::lazy_channel(&addr)?,
                caller,
            ),
        )
    }

    /// Stops every component gracefully and waits for them; reports the first failure.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let _ = self.stop.send(true);
        let mut first_error = None;
        for (name, task) in self.tasks {
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_error.get_or_insert(anyhow::anyhow!("{name}: {e}"));
                }
                Err(e) => {
                    first_error.get_or_insert(anyhow::anyhow!("{name} panicked: {e}"));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Resolves when any component stops on its own (which is a failure while running).
    pub async fn any_stopped(&mut self) -> &'static str {
        loop {
            if let Some((name, _)) = self.tasks.iter().find(|(_, t)| t.is_finished()) {
                return name;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
