//! The systems under load, each in processes of their own so that the load generator (this
//! process) is measured apart from them: the embedded system (`latchkey`, as `cargo run`
//! starts it, on SQLite files made for this run), the distributed stack (one `latchkey serve`
//! process per component on loopback, PostgreSQL databases and a RabbitMQ vhost made for this
//! run and dropped after it), and a bare axum JSON handler (this benchmark's binary started
//! again with `--bare-handler`), the yardstick of what one HTTP answer costs here.

use std::time::Duration;

use latchkey_shared::testing::Infra;
use reqwest::{Method, RequestBuilder};

pub const COMPONENTS: [&str; 5] = ["auth", "teams", "contacts", "webhooks", "gateway"];

/// The cores a distributed component's async runtime runs on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Cpus {
    /// As deployed: its container's CPU limit in `k8s/base`, rounded up (what tokio and the
    /// hashing lanes read from the cgroup), at most the machine's cores.
    Manifests,
    /// Every core of the machine, for every component.
    Machine,
}

/// The CPU limit of `component`'s container in its base manifest, in whole cores (rounded up).
fn manifest_cores(component: &str) -> anyhow::Result<usize> {
    let path = format!(
        "{}/../k8s/base/{component}.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path)?;
    let limit = text
        .lines()
        .map(str::trim)
        .skip_while(|line| *line != "limits:")
        .find_map(|line| line.strip_prefix("cpu:"))
        .map(|v| v.trim().trim_matches('"'))
        .ok_or_else(|| anyhow::anyhow!("{path}: no CPU limit"))?;
    let millicores: usize = match limit.strip_suffix('m') {
        Some(m) => m.parse()?,
        None => limit.parse::<usize>()? * 1000,
    };
    Ok(millicores.div_ceil(1000).max(1))
}

pub struct Keys {
    pub project_id: String,
    pub client_key: String,
    pub server_key: String,
    pub admin_key: String,
}

enum Kind {
    Embedded(std::process::Child),
    Distributed {
        children: Vec<(&'static str, std::process::Child)>,
        infra: Infra,
        /// Each service's database URL.
        database_urls: Vec<(String, String)>,
        /// Each component's metrics address.
        metrics: Vec<(&'static str, String)>,
    },
}

pub struct Stack {
    pub mode: &'static str,
    /// `http://host:port` of the gateway.
    pub base: String,
    /// The gateway's address, for the lean load generator.
    pub addr: std::net::SocketAddr,
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

pub fn free_port() -> anyhow::Result<String> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .to_string())
}

impl Stack {
    /// The embedded system as `cargo run --release` starts it (SQLite, in-process events), in
    /// a process of its own, rate limits off (the load comes from one address).
    pub async fn embedded() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let http_addr = free_port()?;
        let log = std::fs::File::create(dir.path().join("embedded.log"))?;
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_latchkey"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("LATCHKEY_DATA_DIR", dir.path().join("data"))
            .env("LATCHKEY_HTTP_ADDR", &http_addr)
            .env("LATCHKEY_RATE_LIMITS", "off")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()?;
        let base = format!("http://{http_addr}");
        let http = client();
        wait_ready(&http, &base, dir.path()).await?;
        let project: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
            dir.path().join("data").join("project.json"),
        )?)?;
        let text = |k: &str| project[k].as_str().unwrap_or_default().to_owned();
        Ok(Self {
            mode: "embedded",
            base,
            addr: http_addr.parse()?,
            keys: Keys {
                project_id: text("project_id"),
                client_key: text("publishable_client_key"),
                server_key: text("secret_server_key"),
                admin_key: text("super_secret_admin_key"),
            },
            http,
            kind: Kind::Embedded(child),
            _dir: dir,
        })
    }

    /// The distributed stack, rate limits off (the load comes from one address).
    pub async fn distributed(cpus: Cpus) -> anyhow::Result<Self> {
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
        let database_urls: Vec<(String, String)> = ["auth", "teams", "contacts", "webhooks"]
            .iter()
            .zip(&env)
            .map(|(name, (_, url))| ((*name).to_owned(), url.clone()))
            .collect();
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
        let machine = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cores = COMPONENTS
            .iter()
            .map(|name| match cpus {
                Cpus::Manifests => Ok(manifest_cores(name)?.min(machine)),
                Cpus::Machine => Ok(machine),
            })
            .collect::<anyhow::Result<Vec<usize>>>()?;
        let shown: Vec<String> = COMPONENTS
            .iter()
            .zip(&cores)
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        println!(
            "  distributed  cores per component: {} ({})",
            shown.join(", "),
            match cpus {
                Cpus::Manifests => "their manifests' CPU limits",
                Cpus::Machine => "every core",
            }
        );
        let mut children = Vec::new();
        let mut metrics = Vec::new();
        for ((name, addr), cores) in listen.iter().zip(&cores) {
            let log = std::fs::File::create(dir.path().join(format!("{name}.log")))?;
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_latchkey"));
            cmd.arg("serve")
                .arg(name)
                .envs(env.iter().map(|(k, v)| (k, v)))
                .env("LATCHKEY_DATA_DIR", dir.path())
                .env("LATCHKEY_METRICS_ADDR", {
                    let at = free_port()?;
                    metrics.push((*name, at.clone()));
                    at
                })
                .stdout(std::process::Stdio::null())
                .stderr(log);
            if *name != "gateway" {
                cmd.env("LATCHKEY_GRPC_ADDR", addr);
            }
            // Tokio sizes its runtime from this as it would from a container's CPU quota.
            cmd.env("TOKIO_WORKER_THREADS", cores.to_string());
            children.push((*name, cmd.spawn()?));
        }
        let base = format!("http://{http_addr}");
        let http = client();
        wait_ready(&http, &base, dir.path()).await?;
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
            addr: http_addr.parse()?,
            base,
            keys: keys(created),
            http,
            kind: Kind::Distributed {
                children,
                infra,
                database_urls,
                metrics,
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

    /// Where a service keeps its data, for bulk seeding: a PostgreSQL URL, or the SQLite file
    /// of the embedded system.
    pub fn database_url(&self, service: &str) -> String {
        match &self.kind {
            Kind::Distributed { database_urls, .. } => database_urls
                .iter()
                .find(|(name, _)| name == service)
                .map(|(_, url)| url.clone())
                .unwrap_or_default(),
            Kind::Embedded(_) => format!(
                "sqlite://{}",
                self._dir
                    .path()
                    .join("data")
                    .join(format!("{service}.db"))
                    .display()
            ),
        }
    }

    /// A component's `/metrics` (embedded: the gateway's, which holds the services' series).
    pub async fn metrics(&self, component: &str) -> String {
        let url = match &self.kind {
            Kind::Embedded(_) => format!("{}/metrics", self.base),
            Kind::Distributed { metrics, .. } => metrics
                .iter()
                .find(|(name, _)| *name == component)
                .map(|(_, addr)| format!("http://{addr}/metrics"))
                .unwrap_or_default(),
        };
        match self.http.get(url).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Each process of the system (name, pid).
    pub fn processes(&self) -> Vec<(String, u32)> {
        match &self.kind {
            Kind::Embedded(child) => vec![("embedded (all components)".into(), child.id())],
            Kind::Distributed { children, .. } => children
                .iter()
                .map(|(name, child)| ((*name).to_owned(), child.id()))
                .collect(),
        }
    }

    /// Resident memory of each component process in MiB (embedded: the one process).
    pub fn rss(&self) -> Vec<(String, f64)> {
        self.processes()
            .into_iter()
            .map(|(name, pid)| (name, rss_mib(pid)))
            .collect()
    }

    pub async fn stop(self) -> anyhow::Result<()> {
        match self.kind {
            Kind::Embedded(mut child) => {
                terminate(&child);
                child.wait()?;
                Ok(())
            }
            Kind::Distributed {
                mut children,
                infra,
                ..
            } => {
                for (_, child) in &children {
                    terminate(child);
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

fn terminate(child: &std::process::Child) {
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
}

async fn wait_ready(
    http: &reqwest::Client,
    base: &str,
    logs: &std::path::Path,
) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !http
        .get(format!("{base}/health/ready"))
        .send()
        .await
        .is_ok_and(|r| r.status() == 200)
    {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "system not ready in 60 s; its logs end:\n{}",
            log_tails(logs)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// The last lines of every log in `dir`: the directory is removed when the stack is dropped,
/// so a failure must carry what the logs said.
fn log_tails(dir: &std::path::Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "log") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("== {}\n", path.display()));
            for line in &lines[lines.len().saturating_sub(20)..] {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// A bare axum JSON handler in a process of its own.
pub struct Bare {
    pub addr: std::net::SocketAddr,
    child: std::process::Child,
}

impl Bare {
    pub async fn start() -> anyhow::Result<Self> {
        let addr = free_port()?;
        let child = std::process::Command::new(std::env::current_exe()?)
            .arg("--bare-handler")
            .arg(&addr)
            .stdout(std::process::Stdio::null())
            .spawn()?;
        let http = client();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while http.get(format!("http://{addr}/")).send().await.is_err() {
            anyhow::ensure!(std::time::Instant::now() < deadline, "bare handler not up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Self {
            addr: addr.parse()?,
            child,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stop(mut self) {
        terminate(&self.child);
        let _ = self.child.wait();
    }
}

/// Serves the bare handler until killed (the `--bare-handler ADDR` mode of this binary): one
/// route answering a small JSON document, on tokio's default runtime, as a plain axum app would.
pub fn serve_bare(addr: &str) -> anyhow::Result<()> {
    tokio::runtime::Runtime::new()?.block_on(async {
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(|| async { axum::Json(serde_json::json!({ "status": "ok" })) }),
        );
        let listener = tokio::net::TcpListener::bind(addr).await?;
        axum::serve(listener, app).await?;
        Ok(())
    })
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
