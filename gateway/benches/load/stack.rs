//! The systems under load: the embedded system in this process, or the distributed stack (one
//! `latchkey serve` process per component on loopback, PostgreSQL databases and a RabbitMQ
//! vhost made for this run and dropped after it).

use std::time::Duration;

use latchkey_gateway::limits::RateLimitConfig;
use latchkey_gateway::system::{self, Databases, SystemConfig};
use latchkey_shared::testing::Infra;
use reqwest::{Method, RequestBuilder};

pub const COMPONENTS: [&str; 5] = ["auth", "teams", "contacts", "webhooks", "gateway"];

pub struct Keys {
    pub project_id: String,
    pub client_key: String,
    pub server_key: String,
    pub admin_key: String,
}

enum Kind {
    Embedded(system::Running),
    Distributed {
        children: Vec<(&'static str, std::process::Child)>,
        infra: Infra,
        auth_db_url: String,
    },
}

pub struct Stack {
    pub mode: &'static str,
    /// `http://host:port` of the gateway.
    pub base: String,
    pub keys: Keys,
    pub http: reqwest::Client,
    kind: Kind,
    _dir: tempfile::TempDir,
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .unwrap_or_default()
}

fn free_port() -> anyhow::Result<String> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .to_string())
}

impl Stack {
    /// The embedded system (SQLite, in-process events) in this process, rate limits off.
    pub async fn embedded() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let running = system::start(SystemConfig {
            http_addr: "127.0.0.1:0".into(),
            public_url: None,
            databases: Databases::sqlite_in(dir.path()),
            amqp_url: None,
            mail: Default::default(),
            max_body_bytes: 1 << 20,
            key_cache_ttl: Duration::from_secs(2),
            webhooks: latchkey_webhooks::Config {
                database_url: String::new(),
                retry_schedule: latchkey_webhooks::default_schedule(),
                url_policy: latchkey_webhooks::UrlPolicy::EMBEDDED,
            },
            rate_limits: RateLimitConfig {
                enabled: false,
                ..RateLimitConfig::local()
            },
            secrets: latchkey_shared::sealed::SecretsKey::generate(),
        })
        .await?;
        let created = running
            .auth_client()?
            .create_project(latchkey_proto::auth::v1::CreateProjectRequest {
                display_name: "Bench".into(),
            })
            .await?
            .into_inner();
        Ok(Self {
            mode: "embedded",
            base: format!("http://{}", running.http_addr),
            keys: keys(created),
            http: client(),
            kind: Kind::Embedded(running),
            _dir: dir,
        })
    }

    /// The distributed stack, rate limits off (the load comes from one address).
    pub async fn distributed() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let infra = Infra::new();
        let mut env: Vec<(String, String)> = Vec::new();
        for name in ["auth", "teams", "contacts", "webhooks"] {
            let url = infra.postgres_database(&format!("bench_{name}")).await?;
            env.push((
                format!("LATCHKEY_{}_DATABASE_URL", name.to_uppercase()),
                url,
            ));
        }
        let auth_db_url = env[0].1.clone();
        env.push(("LATCHKEY_AMQP_URL".into(), infra.amqp_vhost().await?));
        let token = latchkey_shared::crypto::random_base32(45);
        env.push(("LATCHKEY_INTERNAL_TOKEN".into(), token.clone()));
        env.push((
            "LATCHKEY_SECRETS_KEY".into(),
            latchkey_shared::sealed::SecretsKey::generate_base64(),
        ));
        let mut listen = Vec::new();
        for name in COMPONENTS {
            let addr = free_port()?;
            let var = if name == "gateway" {
                "LATCHKEY_HTTP_ADDR".to_owned()
            } else {
                format!("LATCHKEY_{}_ADDR", name.to_uppercase())
            };
            env.push((var, addr.clone()));
            listen.push((name, addr));
        }
        let http_addr = listen[4].1.clone();
        env.push(("LATCHKEY_PUBLIC_URL".into(), format!("http://{http_addr}")));
        env.push(("LATCHKEY_RATE_LIMITS".into(), "off".into()));
        env.push(("LATCHKEY_WEBHOOK_ALLOW_HTTP".into(), "true".into()));
        env.push(("LATCHKEY_WEBHOOK_ALLOW_LOOPBACK".into(), "true".into()));
        env.push(("RUST_LOG".into(), "warn".into()));
        let mut children = Vec::new();
        for (name, addr) in &listen {
            let log = std::fs::File::create(dir.path().join(format!("{name}.log")))?;
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_latchkey"));
            cmd.arg("serve")
                .arg(name)
                .envs(env.iter().map(|(k, v)| (k, v)))
                .env("LATCHKEY_DATA_DIR", dir.path())
                .env("LATCHKEY_METRICS_ADDR", free_port()?)
                .stdout(std::process::Stdio::null())
                .stderr(log);
            if *name != "gateway" {
                cmd.env("LATCHKEY_GRPC_ADDR", addr);
            }
            children.push((*name, cmd.spawn()?));
        }
        let base = format!("http://{http_addr}");
        let http = client();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !http
            .get(format!("{base}/health/ready"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "distributed stack not ready; logs in {}",
                dir.path().display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let caller = latchkey_shared::grpc::PresentCaller::new(&token.into())?;
        let mut auth = latchkey_proto::auth::v1::projects_client::ProjectsClient::with_interceptor(
            latchkey_shared::grpc::lazy_channel(&listen[0].1)?,
            caller,
        );
        let created = auth
            .create_project(latchkey_proto::auth::v1::CreateProjectRequest {
                display_name: "Bench".into(),
            })
            .await?
            .into_inner();
        Ok(Self {
            mode: "distributed",
            base,
            keys: keys(created),
            http,
            kind: Kind::Distributed {
                children,
                infra,
                auth_db_url,
            },
            _dir: dir,
        })
    }

    /// A request to `/api/v1<path>` as `access` (client, server or admin).
    pub fn req(&self, access: &str, method: Method, path: &str) -> RequestBuilder {
        let k = &self.keys;
        let (header, key) = match access {
            "client" => ("x-service-publishable-client-key", &k.client_key),
            "server" => ("x-service-secret-server-key", &k.server_key),
            _ => ("x-service-super-secret-admin-key", &k.admin_key),
        };
        self.http
            .request(method, format!("{}/api/v1{path}", self.base))
            .header("x-service-access-type", access)
            .header("x-service-project-id", &k.project_id)
            .header(header, key)
    }

    /// The auth database (distributed mode), for bulk seeding.
    pub fn auth_db_url(&self) -> Option<&str> {
        match &self.kind {
            Kind::Distributed { auth_db_url, .. } => Some(auth_db_url),
            Kind::Embedded(_) => None,
        }
    }

    /// Resident memory of each component process in MiB (embedded: this whole process,
    /// load generator included).
    pub fn rss(&self) -> Vec<(String, f64)> {
        match &self.kind {
            Kind::Embedded(_) => vec![(
                "embedded (bench process)".into(),
                rss_mib(std::process::id()),
            )],
            Kind::Distributed { children, .. } => children
                .iter()
                .map(|(name, child)| ((*name).to_owned(), rss_mib(child.id())))
                .collect(),
        }
    }

    pub async fn stop(self) -> anyhow::Result<()> {
        match self.kind {
            Kind::Embedded(running) => running.shutdown().await,
            Kind::Distributed {
                mut children,
                infra,
                ..
            } => {
                for (_, child) in &children {
                    let _ = std::process::Command::new("kill")
                        .arg("-TERM")
                        .arg(child.id().to_string())
                        .status();
                }
                for (_, child) in &mut children {
                    let _ = child.wait();
                }
                infra.cleanup().await;
                Ok(())
            }
        }
    }
}

fn keys(created: latchkey_proto::auth::v1::CreatedProject) -> Keys {
    Keys {
        project_id: created.project_id,
        client_key: created.publishable_client_key,
        server_key: created.secret_server_key,
        admin_key: created.super_secret_admin_key,
    }
}

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}
