//! Test support against the real servers: every run makes its own Postgres databases and
//! RabbitMQ vhost, named with a random suffix, and drops them when the guard goes away (also
//! when a test panics). Addresses come from `LATCHKEY_TEST_POSTGRES_URL` (an admin connection
//! that may create databases), `LATCHKEY_TEST_AMQP_URL` and `LATCHKEY_TEST_RABBITMQ_API`, with
//! the defaults `deploy/local-services.sh` sets up.

use std::sync::Mutex;

use sqlx::postgres::PgPoolOptions;

/// Runs `rabbitmqctl <arg>` (tests that stop and start the broker), failing the test if it fails.
pub fn rabbitmqctl(arg: &str) {
    let status = std::process::Command::new("rabbitmqctl")
        .arg(arg)
        .stdout(std::process::Stdio::null())
        .status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "rabbitmqctl {arg} failed"
    );
}

/// Stops the local PostgreSQL cluster (fast: open sessions are ended) or starts it again and
/// waits until it accepts connections; for tests of a database outage.
pub fn postgres_cluster(action: &str) {
    let version = std::fs::read_dir("/etc/postgresql")
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .max_by_key(|v| v.parse::<u32>().unwrap_or(0))
        .unwrap_or_else(|| panic!("no PostgreSQL cluster under /etc/postgresql"));
    let mut cmd = std::process::Command::new("pg_ctlcluster");
    cmd.args([version.as_str(), "main", action]);
    if action == "stop" {
        cmd.args(["-m", "fast"]);
    }
    let status = cmd.stdout(std::process::Stdio::null()).status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "pg_ctlcluster {version} main {action} failed"
    );
    if action == "start" {
        for _ in 0..100 {
            let ready = std::process::Command::new("pg_isready")
                .args(["-q", "-h", "127.0.0.1", "-p", "5432"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("PostgreSQL did not come back");
    }
}

pub fn postgres_admin_url() -> String {
    std::env::var("LATCHKEY_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://latchkey:latchkey@127.0.0.1:5432/postgres".into())
}

fn amqp_base() -> String {
    std::env::var("LATCHKEY_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672".into())
}

fn rabbitmq_api() -> String {
    std::env::var("LATCHKEY_TEST_RABBITMQ_API")
        .unwrap_or_else(|_| "http://guest:guest@127.0.0.1:15672/api".into())
}

/// A short random name part, safe in database and vhost names.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", crate::crypto::random_base32(12))
}

/// Databases and vhosts made for one test, dropped on drop.
#[derive(Default)]
pub struct Infra {
    databases: Mutex<Vec<String>>,
    vhosts: Mutex<Vec<String>>,
}

impl Infra {
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates an empty Postgres database and returns its URL.
    pub async fn postgres_database(&self, prefix: &str) -> anyhow::Result<String> {
        let name = unique(&format!("lk_test_{prefix}"));
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&postgres_admin_url())
            .await?;
        sqlx::query(&format!("CREATE DATABASE \"{name}\""))
            .execute(&admin)
            .await?;
        admin.close().await;
        if let Ok(mut dbs) = self.databases.lock() {
            dbs.push(name.clone());
        }
        let mut url = url::Url::parse(&postgres_admin_url())?;
        url.set_path(&name);
        Ok(url.to_string())
    }

    /// Creates a RabbitMQ vhost the default user may use and returns its AMQP URL. Retries a
    /// few times: the management API can be slow to answer while the broker is busy.
    pub async fn amqp_vhost(&self) -> anyhow::Result<String> {
        let mut last = None;
        for attempt in 0..5u64 {
            match self.try_amqp_vhost().await {
                Ok(url) => return Ok(url),
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(std::time::Duration::from_millis(500 * (attempt + 1))).await;
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no attempt made")))
    }

    async fn try_amqp_vhost(&self) -> anyhow::Result<String> {
        let name = unique("lk_test");
        let http = reqwest::Client::new();
        let api = url::Url::parse(&rabbitmq_api())?;
        let user = api.username().to_owned();
        let pass = api.password().unwrap_or_default().to_owned();
        let base = format!(
            "{}://{}:{}{}",
            api.scheme(),
            api.host_str().unwrap_or("127.0.0.1"),
            api.port().unwrap_or(15672),
            api.path()
        );
        http.put(format!("{base}/vhosts/{name}"))
            .basic_auth(&user, Some(&pass))
            .send()
            .await?
            .error_for_status()?;
        http.put(format!("{base}/permissions/{name}/{user}"))
            .basic_auth(&user, Some(&pass))
            .json(&serde_json::json!({"configure": ".*", "write": ".*", "read": ".*"}))
            .send()
            .await?
            .error_for_status()?;
        if let Ok(mut v) = self.vhosts.lock() {
            v.push(name.clone());
        }
        Ok(format!("{}/{name}", amqp_base()))
    }

    /// Drops everything this guard created.
    pub async fn cleanup(&self) {
        let dbs: Vec<String> = self
            .databases
            .lock()
            .map(|mut d| d.drain(..).collect())
            .unwrap_or_default();
        if !dbs.is_empty() {
            if let Ok(admin) = PgPoolOptions::new()
                .max_connections(1)
                .connect(&postgres_admin_url())
                .await
            {
                for name in dbs {
                    let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                    if let Err(e) = sqlx::query(&sql).execute(&admin).await {
                        eprintln!("could not drop test database {name}: {e}");
                    }
                }
                admin.close().await;
            }
        }
        let vhosts: Vec<String> = self
            .vhosts
            .lock()
            .map(|mut v| v.drain(..).collect())
            .unwrap_or_default();
        if let Ok(api) = url::Url::parse(&rabbitmq_api()) {
            let http = reqwest::Client::new();
            for name in vhosts {
                let mut url = api.clone();
                url.set_path(&format!("{}/vhosts/{name}", api.path()));
                let _ = url.set_username("");
                let _ = url.set_password(None);
                let _ = http
                    .delete(url)
                    .basic_auth(api.username(), api.password())
                    .send()
                    .await;
            }
        }
    }
}

impl Drop for Infra {
    fn drop(&mut self) {
        let nothing_left = self.databases.lock().map(|d| d.is_empty()).unwrap_or(true)
            && self.vhosts.lock().map(|v| v.is_empty()).unwrap_or(true);
        if nothing_left {
            return;
        }
        // Drop cannot await; a thread with its own runtime finishes the cleanup.
        let this = Infra {
            databases: Mutex::new(
                self.databases
                    .lock()
                    .map(|mut d| d.drain(..).collect())
                    .unwrap_or_default(),
            ),
            vhosts: Mutex::new(
                self.vhosts
                    .lock()
                    .map(|mut v| v.drain(..).collect())
                    .unwrap_or_default(),
            ),
        };
        let _ = std::thread::spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                rt.block_on(this.cleanup());
            }
        })
        .join();
    }
}
