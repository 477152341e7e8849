//! The `latchkey` binary. Without a subcommand it runs the embedded all-in-one system;
//! `serve <component>` runs one component for production; `projects` and `migrate` are
//! operator commands against the configured storage (80 §1).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use latchkey_gateway::limits::RateLimitConfig;
use latchkey_gateway::system::{self, Databases, SystemConfig};
use latchkey_gateway::{AppState, GatewayConfig};
use latchkey_shared::config::Common;
use latchkey_shared::grpc::Deps;
use latchkey_shared::sealed::SecretsKey;
use latchkey_webhooks::UrlPolicy;
use serde_json::json;

/// Every component's allocator. With glibc's malloc, allocation took about a sixth of the CPU of
/// a `/users/me` (many small allocations per request across HTTP, gRPC and JSON, none big enough
/// alone to be worth removing); mimalloc serves each thread from pages of its own, for less.
/// Transparent huge pages are off for it (the `no_thp` feature): with them it backed mostly empty
/// pages in 2 MiB units, about 30 MiB more resident memory per process.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "latchkey",
    version,
    about = "Self-hostable authentication and team membership"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// Directory for the embedded SQLite files and project.json.
    #[arg(
        long,
        env = "LATCHKEY_DATA_DIR",
        default_value = "./latchkey-data",
        global = true
    )]
    data_dir: PathBuf,

    /// Address the gateway listens on.
    #[arg(
        long,
        env = "LATCHKEY_HTTP_ADDR",
        default_value = "127.0.0.1:8102",
        global = true
    )]
    http_addr: String,

    /// Public base URL of the gateway (token issuers); default `http://<http addr>`.
    #[arg(long, env = "LATCHKEY_PUBLIC_URL", global = true)]
    public_url: Option<String>,

    /// Largest accepted request body, in bytes.
    #[arg(long, env = "LATCHKEY_MAX_BODY_BYTES", default_value_t = 5 << 20, global = true)]
    max_body_bytes: usize,

    /// After SIGTERM, seconds to keep serving while reporting not ready (so load balancers
    /// stop routing here) before the listeners close and in-flight requests drain.
    #[arg(
        long,
        env = "LATCHKEY_SHUTDOWN_DELAY_SECONDS",
        default_value_t = 0,
        global = true
    )]
    shutdown_delay_seconds: u64,

    /// Seconds a caller's gRPC connection to a service lives before the service asks it (GOAWAY)
    /// to open a new one, so callers that do not balance per call spread over new replicas.
    #[arg(
        long,
        env = "LATCHKEY_GRPC_MAX_CONNECTION_AGE_SECONDS",
        default_value_t = latchkey_shared::grpc::server::MAX_CONNECTION_AGE.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..),
        global = true
    )]
    grpc_max_connection_age_seconds: u64,

    #[command(flatten)]
    databases: DatabaseArgs,

    #[command(flatten)]
    webhooks: WebhookArgs,

    #[command(flatten)]
    limits: LimitArgs,

    #[command(flatten)]
    common: Common,

    /// SMTP server for outgoing mail (`smtp://host:port`, `smtps://user:pass@host:465`).
    /// Unset: the dev mailbox (stored, logged, readable at `GET /api/v1/internal/emails`).
    #[arg(long, env = "LATCHKEY_SMTP_URL", hide_env_values = true, global = true)]
    smtp_url: Option<String>,

    /// Sender of outgoing mail.
    #[arg(
        long,
        env = "LATCHKEY_EMAIL_FROM",
        default_value = "Latchkey <noreply@latchkey.localhost>",
        global = true
    )]
    email_from: String,
}

/// Each service's database. Unset: a SQLite file in the data directory.
#[derive(clap::Args)]
struct DatabaseArgs {
    #[arg(
        long,
        env = "LATCHKEY_AUTH_DATABASE_URL",
        hide_env_values = true,
        global = true
    )]
    auth_database_url: Option<String>,
    #[arg(
        long,
        env = "LATCHKEY_TEAMS_DATABASE_URL",
        hide_env_values = true,
        global = true
    )]
    teams_database_url: Option<String>,
    #[arg(
        long,
        env = "LATCHKEY_CONTACTS_DATABASE_URL",
        hide_env_values = true,
        global = true
    )]
    contacts_database_url: Option<String>,
    #[arg(
        long,
        env = "LATCHKEY_WEBHOOKS_DATABASE_URL",
        hide_env_values = true,
        global = true
    )]
    webhooks_database_url: Option<String>,
}

/// Webhook delivery. The URL rules default to the mode: the embedded system allows plain http
/// and loopback receivers, `serve webhooks` only https to public addresses.
#[derive(clap::Args)]
struct WebhookArgs {
    /// Seconds to wait after each failed attempt, comma-separated (fractions allowed); one
    /// attempt more than entries. Default: 5,300,1800,7200,18000,36000,36000.
    #[arg(long, env = "LATCHKEY_WEBHOOK_RETRY_SCHEDULE", global = true)]
    webhook_retry_schedule: Option<String>,
    /// Allow `http://` receiver URLs.
    #[arg(long, env = "LATCHKEY_WEBHOOK_ALLOW_HTTP", global = true)]
    webhook_allow_http: Option<bool>,
    /// Allow receivers on loopback addresses.
    #[arg(long, env = "LATCHKEY_WEBHOOK_ALLOW_LOOPBACK", global = true)]
    webhook_allow_loopback: Option<bool>,
    /// Allow receivers on private, link-local and CGNAT addresses.
    #[arg(long, env = "LATCHKEY_WEBHOOK_ALLOW_PRIVATE", global = true)]
    webhook_allow_private: Option<bool>,
}

impl WebhookArgs {
    fn config(
        &self,
        database_url: String,
        base: UrlPolicy,
    ) -> anyhow::Result<latchkey_webhooks::Config> {
        let retry_schedule = match &self.webhook_retry_schedule {
            Some(text) => latchkey_webhooks::parse_schedule(text)
                .map_err(|e| anyhow::anyhow!("LATCHKEY_WEBHOOK_RETRY_SCHEDULE: {e}"))?,
            None => latchkey_webhooks::default_schedule(),
        };
        Ok(latchkey_webhooks::Config {
            database_url,
            retry_schedule,
            url_policy: UrlPolicy {
                allow_http: self.webhook_allow_http.unwrap_or(base.allow_http),
                allow_loopback: self.webhook_allow_loopback.unwrap_or(base.allow_loopback),
                allow_private: self.webhook_allow_private.unwrap_or(base.allow_private),
            },
        })
    }
}

/// Rate limits (70 §7).
#[derive(clap::Args)]
struct LimitArgs {
    /// Redis shared by the gateways for rate limits (`redis://host:6379`). Unset: counted in
    /// each gateway process.
    #[arg(
        long,
        env = "LATCHKEY_REDIS_URL",
        hide_env_values = true,
        global = true
    )]
    redis_url: Option<String>,
    /// Prefix of every Redis key the gateway writes.
    #[arg(
        long,
        env = "LATCHKEY_REDIS_KEY_PREFIX",
        default_value = "latchkey:",
        global = true
    )]
    redis_key_prefix: String,
    /// Proxies whose `X-Forwarded-For` is believed: addresses or CIDR ranges, comma-separated.
    #[arg(long, env = "LATCHKEY_TRUSTED_PROXIES", global = true)]
    trusted_proxies: Option<String>,
    /// `off` disables rate limiting (for a deployment that limits in front of the gateway).
    #[arg(long, env = "LATCHKEY_RATE_LIMITS", default_value = "on", value_parser = ["on", "off"], global = true)]
    rate_limits: String,
}

impl LimitArgs {
    fn config(&self, shared: bool) -> anyhow::Result<RateLimitConfig> {
        let trusted_proxies = match &self.trusted_proxies {
            Some(text) => latchkey_gateway::limits::client_ip::parse_trusted(text)
                .map_err(|e| anyhow::anyhow!("LATCHKEY_TRUSTED_PROXIES: {e}"))?,
            None => Vec::new(),
        };
        Ok(RateLimitConfig {
            enabled: self.rate_limits == "on",
            redis_url: self.redis_url.clone().filter(|_| shared),
            key_prefix: self.redis_key_prefix.clone(),
            trusted_proxies,
        })
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run one component (production).
    Serve {
        component: Component,
        /// gRPC listen address of a service (default: 0.0.0.0 on the component's own port,
        /// 50051 auth, 50052 teams, 50053 contacts, 50054 webhooks).
        #[arg(long, env = "LATCHKEY_GRPC_ADDR")]
        grpc_addr: Option<String>,
        /// Where a service serves `GET /metrics` (the gateway serves it on its HTTP address);
        /// default: 0.0.0.0 on 9464 auth, 9465 teams, 9466 contacts, 9467 webhooks.
        #[arg(long, env = "LATCHKEY_METRICS_ADDR")]
        metrics_addr: Option<String>,
        /// Where the gateway finds each service.
        #[arg(long, env = "LATCHKEY_AUTH_ADDR", default_value = "127.0.0.1:50051")]
        auth_addr: String,
        #[arg(long, env = "LATCHKEY_TEAMS_ADDR", default_value = "127.0.0.1:50052")]
        teams_addr: String,
        #[arg(
            long,
            env = "LATCHKEY_CONTACTS_ADDR",
            default_value = "127.0.0.1:50053"
        )]
        contacts_addr: String,
        #[arg(
            long,
            env = "LATCHKEY_WEBHOOKS_ADDR",
            default_value = "127.0.0.1:50054"
        )]
        webhooks_addr: String,
    },
    /// Manage projects directly in the auth database.
    Projects {
        #[command(subcommand)]
        command: ProjectsCommand,
    },
    /// Apply every service's migrations and exit.
    Migrate,
    /// Stored secrets sealed under `LATCHKEY_SECRETS_KEY`.
    Secrets {
        #[command(subcommand)]
        command: SecretsCommand,
    },
}

#[derive(Subcommand)]
enum SecretsCommand {
    /// Seal every stored secret again under `LATCHKEY_SECRETS_KEY`, opening what the previous
    /// key sealed with `LATCHKEY_SECRETS_KEY_PREVIOUS`; prints how many values were rewritten.
    Rotate,
}

#[derive(Subcommand)]
enum ProjectsCommand {
    /// Create a project with default settings and one key set; prints its keys as JSON.
    Create {
        #[arg(long)]
        display_name: String,
    },
    /// List projects as JSON lines.
    List,
}

#[derive(Clone, Copy, ValueEnum)]
enum Component {
    Gateway,
    Auth,
    Teams,
    Contacts,
    Webhooks,
}

impl Component {
    /// Default gRPC and metrics ports: one pair per service, so services can share a host.
    fn default_ports(self) -> (u16, u16) {
        match self {
            Self::Auth | Self::Gateway => (50051, 9464),
            Self::Teams => (50052, 9465),
            Self::Contacts => (50053, 9466),
            Self::Webhooks => (50054, 9467),
        }
    }

    /// The settings `serve` refuses to start without, because the component would otherwise
    /// run but behave wrongly (issuers no gateway accepts, events that reach nobody, revocations
    /// a gateway never hears of), with what each one is for.
    fn required(self) -> &'static [(&'static str, &'static str)] {
        const TOKEN: (&str, &str) = (
            "LATCHKEY_INTERNAL_TOKEN",
            "the token components present to each other",
        );
        const AMQP: (&str, &str) = (
            "LATCHKEY_AMQP_URL",
            "RabbitMQ, which carries change events and revocations between components",
        );
        const SECRETS: (&str, &str) = ("LATCHKEY_SECRETS_KEY", "seals stored secrets");
        const PUBLIC: (&str, &str) = (
            "LATCHKEY_PUBLIC_URL",
            "the gateway's public base URL, which token issuers are built from",
        );
        const DATABASE: &str = "the service's database";
        match self {
            Self::Gateway => &[TOKEN, AMQP, PUBLIC],
            Self::Auth => &[
                TOKEN,
                AMQP,
                SECRETS,
                PUBLIC,
                ("LATCHKEY_AUTH_DATABASE_URL", DATABASE),
            ],
            Self::Teams => &[
                TOKEN,
                AMQP,
                SECRETS,
                ("LATCHKEY_TEAMS_DATABASE_URL", DATABASE),
            ],
            Self::Contacts => &[
                TOKEN,
                AMQP,
                SECRETS,
                ("LATCHKEY_CONTACTS_DATABASE_URL", DATABASE),
            ],
            Self::Webhooks => &[
                TOKEN,
                AMQP,
                SECRETS,
                ("LATCHKEY_WEBHOOKS_DATABASE_URL", DATABASE),
            ],
        }
    }
}

impl Cli {
    fn mail(&self) -> latchkey_contacts::MailConfig {
        latchkey_contacts::MailConfig {
            smtp_url: self.smtp_url.clone(),
            from: self.email_from.clone(),
        }
    }

    /// Whether the setting named `var` was given a value (see `Component::required`); an empty
    /// variable counts as missing.
    fn has(&self, var: &str) -> bool {
        use secrecy::ExposeSecret;
        let secret = |v: &Option<secrecy::SecretString>| {
            v.as_ref()
                .is_some_and(|s| !s.expose_secret().trim().is_empty())
        };
        let text = |v: &Option<String>| v.as_ref().is_some_and(|s| !s.trim().is_empty());
        let d = &self.databases;
        match var {
            "LATCHKEY_INTERNAL_TOKEN" => secret(&self.common.internal_token),
            "LATCHKEY_AMQP_URL" => secret(&self.common.amqp_url),
            "LATCHKEY_SECRETS_KEY" => secret(&self.common.secrets_key),
            "LATCHKEY_PUBLIC_URL" => text(&self.public_url),
            "LATCHKEY_AUTH_DATABASE_URL" => text(&d.auth_database_url),
            "LATCHKEY_TEAMS_DATABASE_URL" => text(&d.teams_database_url),
            "LATCHKEY_CONTACTS_DATABASE_URL" => text(&d.contacts_database_url),
            "LATCHKEY_WEBHOOKS_DATABASE_URL" => text(&d.webhooks_database_url),
            _ => true,
        }
    }

    /// Creates the data directory when one of `urls` keeps a SQLite file in it, and only then.
    fn data_dir_for(&self, urls: &[&str]) -> std::io::Result<()> {
        if urls.iter().any(|u| u.starts_with("sqlite:")) {
            std::fs::create_dir_all(&self.data_dir)?;
        }
        Ok(())
    }

    fn databases(&self) -> Databases {
        let local = Databases::sqlite_in(&self.data_dir);
        let d = &self.databases;
        Databases {
            auth: d.auth_database_url.clone().unwrap_or(local.auth),
            teams: d.teams_database_url.clone().unwrap_or(local.teams),
            contacts: d.contacts_database_url.clone().unwrap_or(local.contacts),
            webhooks: d.webhooks_database_url.clone().unwrap_or(local.webhooks),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let service = match &cli.command {
        None => "latchkey",
        Some(Command::Serve { component, .. }) => match component {
            Component::Gateway => "latchkey-gateway",
            Component::Auth => "latchkey-auth",
            Component::Teams => "latchkey-teams",
            Component::Contacts => "latchkey-contacts",
            Component::Webhooks => "latchkey-webhooks",
        },
        Some(_) => "latchkey-cli",
    };
    // Held to the end of `main`: dropping it flushes the spans not yet exported.
    let _export = latchkey_shared::telemetry::init_for(service)?;
    match &cli.command {
        None => embedded(&cli).await,
        Some(Command::Serve {
            component,
            grpc_addr,
            metrics_addr,
            auth_addr,
            teams_addr,
            contacts_addr,
            webhooks_addr,
        }) => {
            let missing: Vec<String> = component
                .required()
                .iter()
                .filter(|(var, _)| !cli.has(var))
                .map(|(var, why)| format!("{var} ({why})"))
                .collect();
            if !missing.is_empty() {
                let name = component
                    .to_possible_value()
                    .map(|v| v.get_name().to_owned())
                    .unwrap_or_default();
                // One plain line, without a backtrace: this is the operator's mistake, not ours.
                eprintln!("latchkey serve {name}: missing {}", missing.join("; "));
                std::process::exit(2);
            }
            let token = cli.common.internal_token.clone().unwrap_or_default();
            let (grpc_port, metrics_port) = component.default_ports();
            let grpc_addr = grpc_addr
                .clone()
                .unwrap_or_else(|| format!("0.0.0.0:{grpc_port}"));
            let metrics_addr = metrics_addr
                .clone()
                .unwrap_or_else(|| format!("0.0.0.0:{metrics_port}"));
            let dbs = cli.databases();
            if matches!(component, Component::Gateway) {
                let config = GatewayConfig {
                    auth_addr: auth_addr.clone(),
                    teams_addr: teams_addr.clone(),
                    contacts_addr: contacts_addr.clone(),
                    webhooks_addr: webhooks_addr.clone(),
                    internal_token: token,
                    public_url: cli.public_url.clone().unwrap_or_default(),
                    max_body_bytes: cli.max_body_bytes,
                    key_cache_ttl: Duration::from_secs(2),
                    rate_limits: cli.limits.config(true)?,
                    shutdown_delay: Duration::from_secs(cli.shutdown_delay_seconds),
                };
                let bus = match &cli.common.amqp_url {
                    Some(url) => Some(system::bus(Some(url)).await?),
                    None => None,
                };
                let state = AppState::new(config, bus)?;
                let stop = shutdown_signal();
                let listener = tokio::net::TcpListener::bind(&cli.http_addr).await?;
                tracing::info!(addr = %listener.local_addr()?, "gateway listening");
                return latchkey_gateway::serve(listener, state, stop).await;
            }
            let deps = Deps {
                calls: Default::default(),
                bus: system::bus(cli.common.amqp_url.as_ref()).await?,
                clock: latchkey_shared::clock::system(),
                internal_token: token,
                auth_addr: auth_addr.clone(),
                shutdown_delay: Duration::from_secs(cli.shutdown_delay_seconds),
                max_connection_age: Duration::from_secs(cli.grpc_max_connection_age_seconds),
                secrets: cli
                    .common
                    .secrets()?
                    .ok_or_else(|| anyhow::anyhow!("LATCHKEY_SECRETS_KEY is required for serve"))?,
            };
            let stop = shutdown_signal();
            let listener = tokio::net::TcpListener::bind(&grpc_addr).await?;
            tracing::info!(addr = %listener.local_addr()?, "service listening");
            let metrics = tokio::net::TcpListener::bind(&metrics_addr).await?;
            tracing::info!(addr = %metrics.local_addr()?, "metrics listening");
            // Scrapes continue through the drain; the process exit ends them.
            tokio::spawn(latchkey_shared::metrics::serve(
                metrics,
                std::future::pending::<()>(),
            ));
            match component {
                Component::Auth => {
                    latchkey_auth::serve(
                        latchkey_auth::Config {
                            database_url: dbs.auth,
                            contacts_addr: contacts_addr.clone(),
                            teams_addr: teams_addr.clone(),
                            public_url: cli.public_url.clone().unwrap_or_default(),
                        },
                        deps,
                        listener,
                        stop,
                    )
                    .await
                }
                Component::Teams => {
                    latchkey_teams::serve(
                        latchkey_teams::Config {
                            database_url: dbs.teams,
                            contacts_addr: contacts_addr.clone(),
                        },
                        deps,
                        listener,
                        stop,
                    )
                    .await
                }
                Component::Contacts => {
                    latchkey_contacts::serve(
                        latchkey_contacts::Config {
                            database_url: dbs.contacts,
                            mail: cli.mail(),
                        },
                        deps,
                        listener,
                        stop,
                    )
                    .await
                }
                Component::Webhooks => {
                    latchkey_webhooks::serve(
                        cli.webhooks.config(dbs.webhooks, UrlPolicy::STRICT)?,
                        deps,
                        listener,
                        stop,
                    )
                    .await
                }
                Component::Gateway => Ok(()),
            }
        }
        Some(Command::Projects { command }) => {
            let url = cli.databases().auth;
            cli.data_dir_for(&[&url])?;
            match command {
                ProjectsCommand::Create { display_name } => {
                    // The new signing keys are sealed: with the configured key, or for a SQLite
                    // database the one embedded mode keeps beside it.
                    let secrets = match cli.common.secrets()? {
                        Some(key) => key,
                        None if url.starts_with("sqlite:") => embedded_secrets_key(&cli.data_dir)?,
                        None => anyhow::bail!(
                            "LATCHKEY_SECRETS_KEY is required to create a project in PostgreSQL"
                        ),
                    };
                    let p = latchkey_auth::operator::create_project(
                        &url,
                        latchkey_shared::clock::system(),
                        &secrets,
                        display_name,
                    )
                    .await?;
                    println!("{}", credentials_json(&p));
                }
                ProjectsCommand::List => {
                    for p in latchkey_auth::operator::list_projects(&url).await? {
                        println!(
                            "{}",
                            json!({"id": p.id, "display_name": p.display_name, "created_at_millis": p.created_at_millis})
                        );
                    }
                }
            }
            Ok(())
        }
        Some(Command::Secrets {
            command: SecretsCommand::Rotate,
        }) => {
            let secrets = cli
                .common
                .secrets()?
                .ok_or_else(|| anyhow::anyhow!("LATCHKEY_SECRETS_KEY is required to rotate"))?;
            let dbs = cli.databases();
            cli.data_dir_for(&[&dbs.auth, &dbs.webhooks])?;
            let auth = latchkey_auth::operator::reseal(&dbs.auth, &secrets).await?;
            let webhooks = latchkey_webhooks::reseal(&dbs.webhooks, &secrets).await?;
            println!(
                "{}",
                json!({"resealed": {"auth": auth, "webhooks": webhooks}})
            );
            Ok(())
        }
        Some(Command::Migrate) => {
            let dbs = cli.databases();
            cli.data_dir_for(&[&dbs.auth, &dbs.teams, &dbs.contacts, &dbs.webhooks])?;
            latchkey_auth::operator::migrate(&dbs.auth).await?;
            latchkey_teams::migrate(&dbs.teams).await?;
            latchkey_contacts::migrate(&dbs.contacts).await?;
            latchkey_webhooks::migrate(&dbs.webhooks).await?;
            tracing::info!("migrations applied");
            Ok(())
        }
    }
}

fn credentials_json(p: &latchkey_proto::auth::v1::CreatedProject) -> serde_json::Value {
    json!({
        "project_id": p.project_id,
        "publishable_client_key": p.publishable_client_key,
        "secret_server_key": p.secret_server_key,
        "super_secret_admin_key": p.super_secret_admin_key,
    })
}

/// Embedded mode: everything in this process on SQLite; a default project on first start.
async fn embedded(cli: &Cli) -> anyhow::Result<()> {
    let stop = shutdown_signal();
    std::fs::create_dir_all(&cli.data_dir)?;
    let secrets = match cli.common.secrets()? {
        Some(key) => key,
        None => embedded_secrets_key(&cli.data_dir)?,
    };
    let running = system::start(SystemConfig {
        http_addr: cli.http_addr.clone(),
        public_url: cli.public_url.clone(),
        databases: cli.databases(),
        amqp_url: cli.common.amqp_url.clone(),
        mail: cli.mail(),
        max_body_bytes: cli.max_body_bytes,
        key_cache_ttl: Duration::from_secs(2),
        webhooks: cli.webhooks.config(String::new(), UrlPolicy::EMBEDDED)?,
        rate_limits: cli.limits.config(true)?,
        secrets,
    })
    .await?;
    let project_file = cli.data_dir.join("project.json");
    let credentials = if project_file.exists() {
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&project_file)?)?
    } else {
        let mut auth = running.auth_client()?;
        let created = auth
            .create_project(latchkey_proto::auth::v1::CreateProjectRequest {
                display_name: "Default project".into(),
            })
            .await?
            .into_inner();
        let credentials = credentials_json(&created);
        write_private(&project_file, &serde_json::to_string_pretty(&credentials)?)?;
        credentials
    };
    println!(
        "Latchkey is running at http://{}/api/v1/",
        running.http_addr
    );
    println!("Project credentials (also in {}):", project_file.display());
    println!("{}", serde_json::to_string_pretty(&credentials)?);
    let mut running = running;
    tokio::select! {
        _ = stop => {}
        name = running.any_stopped() => tracing::error!(component = name, "a component stopped unexpectedly"),
    }
    running.shutdown().await
}

/// The data directory's own sealing key, made on first start. It sits beside the databases, so
/// it protects copies of the database files, not the directory as a whole; production passes
/// `LATCHKEY_SECRETS_KEY` from a secret store instead.
fn embedded_secrets_key(dir: &std::path::Path) -> anyhow::Result<SecretsKey> {
    let path = dir.join("secrets.key");
    if !path.exists() {
        write_private(&path, &SecretsKey::generate_base64())?;
    }
    Ok(SecretsKey::from_base64(&std::fs::read_to_string(&path)?)?)
}

/// Writes a file readable by its owner only (it holds keys).
fn write_private(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    Ok(())
}

/// Resolves on SIGTERM or SIGINT. The handlers are registered when this is called, not when
/// the future is first polled, so a signal sent the moment the keys are printed (as a script
/// or a test may) ends the process gracefully instead of killing it.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    async move {
        match (term, interrupt) {
            (Ok(mut term), Ok(mut interrupt)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = interrupt.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        tracing::info!("shutting down");
    }
}
