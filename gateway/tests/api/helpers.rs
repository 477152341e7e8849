use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use latchkey_gateway::system::{self, Databases, Running, SystemConfig};
use latchkey_shared::db::Database;
use latchkey_shared::testing::Infra;
use reqwest::{Method, RequestBuilder, Response};
use secrecy::SecretString;
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    Embedded,
    Distributed,
}

/// Runs a test body once per mode, as two `#[tokio::test]`s (`#[ignore]`d ones for the
/// hardening tier when the first token is `ignored`).
macro_rules! both_modes {
    ($name:ident, |$app:ident: &TestApp| async move $body:block) => {
        both_modes!(@modes $name, [], |$app| $body);
    };
    (ignored $name:ident, |$app:ident: &TestApp| async move $body:block) => {
        both_modes!(@modes $name, [#[ignore = "hardening tier: deploy/hardening.sh"]], |$app| $body);
    };
    (@modes $name:ident, [$(#[$attr:meta])*], |$app:ident| $body:block) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            $(#[$attr])*
            async fn embedded() {
                let owned = $crate::helpers::TestApp::spawn($crate::helpers::Mode::Embedded).await;
                {
                    let $app: &TestApp = &owned;
                    $body
                }
                owned.finish().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            $(#[$attr])*
            async fn distributed() {
                let owned =
                    $crate::helpers::TestApp::spawn($crate::helpers::Mode::Distributed).await;
                {
                    let $app: &TestApp = &owned;
                    $body
                }
                owned.finish().await;
            }
        }
    };
}
pub(crate) use both_modes;

/// The Redis the distributed stack shares (`LATCHKEY_TEST_REDIS_URL`).
pub fn redis_url() -> String {
    std::env::var("LATCHKEY_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// The test client is a trusted proxy, so tests can speak for other client addresses with
/// `X-Forwarded-For`.
pub const TRUSTED_PROXY: &str = "127.0.0.1";

/// Webhook retries in tests: seven short waits, eight attempts, as in production but fast.
pub const RETRY_SCHEDULE: &str = "0.2,0.2,0.2,0.2,0.2,0.2,0.2";

#[derive(Debug, Clone)]
pub struct Project {
    pub id: String,
    pub client_key: String,
    pub server_key: String,
    pub admin_key: String,
}

/// The system under test: in this process (embedded), or one OS process per component.
enum Stack {
    InProcess(Running),
    Processes(crate::processes::Processes),
}

pub struct TestApp {
    /// The system's event bus, for tests that inject events.
    pub bus: latchkey_shared::events::SharedBus,
    /// Receives every mail the system sends (real SMTP).
    pub mail: crate::smtp::SmtpSink,
    pub base: String,
    pub http: reqwest::Client,
    pub project: Project,
    pub auth_db_url: String,
    /// gRPC address of each service.
    pub grpc: Vec<(&'static str, String)>,
    pub internal_token: SecretString,
    /// The key the system seals stored secrets with.
    pub secrets: latchkey_shared::sealed::SecretsKey,
    stack: Option<Stack>,
    infra: Infra,
    /// Holds the data directory (SQLite files, process logs) until the app is dropped.
    _dir: tempfile::TempDir,
}

fn expect<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

impl TestApp {
    pub async fn spawn(mode: Mode) -> Self {
        Self::spawn_with(mode, false, &[], &[]).await
    }

    /// The distributed stack with each component behind a balancer, so that `roll` can
    /// replace one instance at a time.
    pub async fn spawn_balanced() -> Self {
        Self::spawn_with(Mode::Distributed, true, &[], &[]).await
    }

    /// The balanced distributed stack with extra settings for every process.
    pub async fn spawn_balanced_with(env: &[(&str, String)]) -> Self {
        Self::spawn_with(Mode::Distributed, true, env, &[]).await
    }

    /// The distributed stack with extra settings for every process.
    pub async fn spawn_distributed_with(env: &[(&str, String)]) -> Self {
        Self::spawn_with(Mode::Distributed, false, env, &[]).await
    }

    /// The distributed stack with some components run as several instances, each reached
    /// through one configured target (see `Replicated`).
    pub async fn spawn_replicated(
        env: &[(&str, String)],
        replicas: &[crate::processes::Replicated],
    ) -> Self {
        Self::spawn_with(Mode::Distributed, false, env, replicas).await
    }

    async fn spawn_with(
        mode: Mode,
        balanced: bool,
        extra_env: &[(&str, String)],
        replicas: &[crate::processes::Replicated],
    ) -> Self {
        latchkey_shared::telemetry::init();
        let dir = expect(tempfile::tempdir(), "tempdir");
        let infra = Infra::new();
        let mail = crate::smtp::SmtpSink::start().await;
        let (stack, base, grpc, internal_token, auth_db_url, bus, secrets) = match mode {
            Mode::Embedded => {
                let embedded_secrets = latchkey_shared::sealed::SecretsKey::generate();
                let databases = Databases::sqlite_in(dir.path());
                let auth_db_url = databases.auth.clone();
                let running = expect(
                    system::start(SystemConfig {
                        http_addr: "127.0.0.1:0".into(),
                        public_url: None,
                        databases,
                        amqp_url: None,
                        mail: latchkey_contacts::MailConfig {
                            smtp_url: Some(mail.url.clone()),
                            from: "Latchkey <auth@latchkey.test>".into(),
                        },
                        max_body_bytes: 64 * 1024,
                        key_cache_ttl: Duration::from_secs(2),
                        webhooks: latchkey_webhooks::Config {
                            database_url: String::new(),
                            retry_schedule: expect(
                                latchkey_webhooks::parse_schedule(RETRY_SCHEDULE),
                                "schedule",
                            ),
                            url_policy: latchkey_webhooks::UrlPolicy::EMBEDDED,
                        },
                        rate_limits: latchkey_gateway::limits::RateLimitConfig {
                            trusted_proxies: expect(
                                latchkey_gateway::limits::client_ip::parse_trusted(TRUSTED_PROXY),
                                "proxies",
                            ),
                            ..latchkey_gateway::limits::RateLimitConfig::local()
                        },
                        secrets: embedded_secrets.clone(),
                    })
                    .await,
                    "system start",
                );
                let grpc = running
                    .grpc_addrs
                    .iter()
                    .map(|(n, a)| (*n, a.to_string()))
                    .collect();
                let base = format!("http://{}", running.http_addr);
                let token = running.internal_token.clone();
                let bus = running.bus.clone();
                (
                    Stack::InProcess(running),
                    base,
                    grpc,
                    token,
                    auth_db_url,
                    bus,
                    embedded_secrets,
                )
            }
            Mode::Distributed => {
                let started = crate::processes::Processes::start(
                    &infra,
                    dir.path(),
                    &mail.url,
                    balanced,
                    extra_env,
                    replicas,
                )
                .await;
                // The last setting wins, as in the processes' environment.
                let key = started
                    .processes
                    .env
                    .iter()
                    .rev()
                    .find(|(k, _)| k == "LATCHKEY_SECRETS_KEY")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                let secrets = expect(
                    latchkey_shared::sealed::SecretsKey::from_base64(&key),
                    "secrets key",
                );
                (
                    Stack::Processes(started.processes),
                    started.base,
                    started.grpc,
                    started.token,
                    started.auth_db_url,
                    started.bus,
                    secrets,
                )
            }
        };
        let mut app = Self {
            bus,
            mail,
            base,
            http: reqwest::Client::new(),
            project: Project {
                id: String::new(),
                client_key: String::new(),
                server_key: String::new(),
                admin_key: String::new(),
            },
            auth_db_url,
            grpc,
            internal_token,
            secrets,
            stack: Some(stack),
            infra,
            _dir: dir,
        };
        app.project = app.create_project("Test project").await;
        app
    }

    /// A client of the auth service, admitted with the internal token.
    pub fn auth_client(&self) -> latchkey_shared::grpc::AuthClient {
        let channel = expect(
            latchkey_shared::grpc::lazy_channel(&self.grpc_addr("auth")),
            "channel",
        );
        let caller = expect(
            latchkey_shared::grpc::PresentCaller::new(&self.internal_token),
            "caller",
        );
        latchkey_proto::auth::v1::projects_client::ProjectsClient::with_interceptor(channel, caller)
    }

    pub fn grpc_addr(&self, service: &str) -> String {
        self.grpc
            .iter()
            .find(|(n, _)| *n == service)
            .map(|(_, a)| a.clone())
            .unwrap_or_default()
    }

    pub async fn create_project(&self, name: &str) -> Project {
        let request = latchkey_proto::auth::v1::CreateProjectRequest {
            display_name: name.into(),
        };
        let p = expect(
            self.auth_client().create_project(request).await,
            "create project",
        )
        .into_inner();
        Project {
            id: p.project_id,
            client_key: p.publishable_client_key,
            server_key: p.secret_server_key,
            admin_key: p.super_secret_admin_key,
        }
    }

    /// A second project in the same system.
    pub async fn other_project(&self) -> Project {
        self.create_project("Other").await
    }

    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, format!("{}{path}", self.base))
    }

    pub fn get(&self, path: &str) -> RequestBuilder {
        self.request(Method::GET, path)
    }

    /// A request with the given access type and the matching key of the test project.
    pub fn as_(&self, access: &str, method: Method, path: &str) -> RequestBuilder {
        let key = match access {
            "client" => ("x-service-publishable-client-key", &self.project.client_key),
            "server" => ("x-service-secret-server-key", &self.project.server_key),
            _ => ("x-service-super-secret-admin-key", &self.project.admin_key),
        };
        self.request(method, path)
            .header("x-service-access-type", access)
            .header("x-service-project-id", &self.project.id)
            .header(key.0, key.1)
    }

    /// Signs an access token with the project's stored key for `audience`, as the accounts
    /// issue's session endpoints will; `claims` override the defaults.
    pub async fn mint_token(&self, project_id: &str, audience: &str, claims: Value) -> String {
        let db = expect(Database::connect(&self.auth_db_url).await, "auth db");
        let project = expect(uuid::Uuid::parse_str(project_id), "project id");
        let sql =
            "SELECT kid, private_key FROM signing_keys WHERE project_id = $1 AND audience = $2";
        let (kid, der): (String, Vec<u8>) = match &db {
            Database::Postgres(pool) => expect(
                sqlx::query_as(sql)
                    .bind(project)
                    .bind(audience)
                    .fetch_one(pool)
                    .await,
                "key",
            ),
            Database::Sqlite(pool) => expect(
                sqlx::query_as(sql)
                    .bind(project)
                    .bind(audience)
                    .fetch_one(pool)
                    .await,
                "key",
            ),
        };
        db.close().await;
        // Stored sealed: the base64 of the DER, sealed as a signing key.
        let der = match std::str::from_utf8(&der) {
            Ok(text) if latchkey_shared::sealed::is_sealed(text) => {
                use base64::Engine;
                let encoded = expect(self.secrets.open("signing-key", text), "open the key");
                expect(
                    base64::engine::general_purpose::STANDARD.decode(encoded),
                    "key base64",
                )
            }
            _ => der,
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let restricted = audience == "restricted";
        let mut body = json!({
            "sub": uuid::Uuid::new_v4(),
            "iat": now,
            "exp": now + 600,
            "aud": if restricted { format!("{project_id}:restricted") } else { project_id.to_owned() },
            "iss": format!("{}/api/v1/{}/{project_id}", self.base, if restricted { "projects-restricted-users" } else { "projects" }),
            "project_id": project_id,
            "branch_id": "main",
            "refresh_token_id": uuid::Uuid::new_v4(),
            "role": "authenticated",
            "is_anonymous": false,
            "is_restricted": restricted,
        });
        if let (Value::Object(b), Value::Object(c)) = (&mut body, claims) {
            b.extend(c);
        }
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid);
        expect(
            jsonwebtoken::encode(&header, &body, &EncodingKey::from_ec_der(&der)),
            "sign",
        )
    }

    /// The Redis key prefix of a distributed stack; None in embedded mode.
    pub fn redis_prefix(&self) -> Option<String> {
        match &self.stack {
            Some(Stack::Processes(processes)) => processes
                .env
                .iter()
                .find(|(k, _)| k == "LATCHKEY_REDIS_KEY_PREFIX")
                .map(|(_, v)| v.clone()),
            _ => None,
        }
    }

    pub async fn finish(mut self) {
        match self.stack.take() {
            Some(Stack::InProcess(running)) => expect(running.shutdown().await, "clean shutdown"),
            Some(Stack::Processes(processes)) => {
                if let Some((_, prefix)) = processes
                    .env
                    .iter()
                    .find(|(k, _)| k == "LATCHKEY_REDIS_KEY_PREFIX")
                {
                    drop_redis_keys(prefix).await;
                }
                processes.stop().await;
            }
            None => {}
        }
        self.infra.cleanup().await;
    }
}

/// Status, body and the known-error header of a response.
pub async fn parts(res: Response) -> (u16, Value, Option<String>) {
    let status = res.status().as_u16();
    let known = res
        .headers()
        .get("x-service-known-error")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = res.json::<Value>().await.unwrap_or(Value::Null);
    (status, body, known)
}

/// Asserts an error envelope with `status` and `code`, and the known-error header under all
/// three prefixes.
pub async fn assert_error(res: Response, status: u16, code: &str) -> Value {
    let headers = res.headers().clone();
    let (actual, body, _) = parts(res).await;
    assert_eq!(
        (actual, body["code"].as_str()),
        (status, Some(code)),
        "body: {body}"
    );
    assert!(body["error"].is_string(), "no message: {body}");
    for prefix in ["x-service-", "x-stack-", "x-hexclave-"] {
        let h = headers
            .get(format!("{prefix}known-error"))
            .and_then(|v| v.to_str().ok());
        assert_eq!(h, Some(code), "{prefix}known-error");
    }
    body
}

/// Removes a test's rate-limit keys; they would expire anyway, but a run leaves nothing behind.
async fn drop_redis_keys(prefix: &str) {
    let dropped = latchkey_gateway::limits::delete_prefix(&redis_url(), prefix).await;
    expect(dropped, "drop redis keys");
}

impl TestApp {
    fn processes(&mut self) -> Option<&mut crate::processes::Processes> {
        match &mut self.stack {
            Some(Stack::Processes(p)) => Some(p),
            _ => None,
        }
    }

    /// Distributed mode: a second gateway process beside the first, sharing its services,
    /// broker and Redis; its base URL, once it is ready.
    pub async fn second_gateway(&mut self) -> String {
        let Some(processes) = self.processes() else {
            panic!("a second gateway needs the distributed stack");
        };
        processes.second_gateway().await
    }

    /// Balanced stack: one more instance of `component`, its balancer taking turns.
    pub async fn add_replica(&mut self, component: &'static str) {
        let Some(processes) = self.processes() else {
            panic!("replicas need the distributed stack");
        };
        processes.add_replica(component).await;
    }

    /// Distributed mode: one more instance of `component` listening on `listen`, once ready.
    pub async fn add_instance(&mut self, component: &'static str, listen: &str) {
        let Some(processes) = self.processes() else {
            panic!("instances need the distributed stack");
        };
        processes.add_instance(component, listen).await;
    }

    /// Distributed mode: ends the instance listening on `listen`, with SIGTERM (a clean exit
    /// is required) or SIGKILL.
    pub async fn end_instance(&mut self, listen: &str, kill: bool) {
        let Some(processes) = self.processes() else {
            panic!("instances need the distributed stack");
        };
        processes.end_instance(listen, kill).await;
    }

    /// Distributed mode: stops every instance of `component` (SIGKILL) until `resume`.
    pub fn halt(&mut self, component: &str) -> Vec<(String, &'static str, String)> {
        let Some(processes) = self.processes() else {
            panic!("halting needs the distributed stack");
        };
        processes.halt(component)
    }

    pub async fn resume(&mut self, halted: Vec<(String, &'static str, String)>) {
        let Some(processes) = self.processes() else {
            panic!("resuming needs the distributed stack");
        };
        processes.resume(halted).await;
    }

    /// Distributed mode: kills a component with SIGKILL (no clean shutdown) and starts it
    /// again on the same address; false in embedded mode.
    pub fn kill_and_restart(&mut self, component: &str) -> bool {
        self.processes()
            .is_some_and(|p| p.kill_and_restart(component))
    }

    /// Balanced stack: replaces `component` as a rolling update does (see `Processes::roll`).
    pub async fn roll(&mut self, component: &'static str) {
        let Some(processes) = self.processes() else {
            panic!("rolling needs the distributed stack");
        };
        processes.roll(component).await;
    }

    /// Distributed mode: the log of one component process.
    pub fn log(&self, name: &str) -> String {
        match &self.stack {
            Some(Stack::Processes(p)) => p.log(name),
            _ => String::new(),
        }
    }

    /// Distributed mode: the process id of the first running instance of `component`.
    pub fn pid(&self, component: &str) -> Option<u32> {
        match &self.stack {
            Some(Stack::Processes(p)) => p
                .children
                .iter()
                .find(|c| c.component == component)
                .map(|c| c.child.id()),
            _ => None,
        }
    }

    /// Distributed mode: whether every component process is still the one first started
    /// and still running.
    pub fn all_running(&mut self) -> bool {
        match &mut self.stack {
            Some(Stack::Processes(p)) => p
                .children
                .iter_mut()
                .all(|c| matches!(c.child.try_wait(), Ok(None))),
            _ => true,
        }
    }

    /// Distributed mode: every log line the component processes wrote so far.
    pub fn all_logs(&self) -> String {
        match &self.stack {
            Some(Stack::Processes(p)) => p.logs(),
            _ => String::new(),
        }
    }

    /// Distributed mode: the four services' Postgres database URLs.
    pub fn database_urls(&self) -> Vec<String> {
        match &self.stack {
            Some(Stack::Processes(p)) => p
                .env
                .iter()
                .filter(|(k, _)| k.ends_with("_DATABASE_URL"))
                .map(|(_, v)| v.clone())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Where the system keeps its files (embedded mode: the SQLite databases).
    pub fn data_dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    /// Distributed mode: where each running component process serves its metrics.
    /// Where the instance listening on `listen` serves `/metrics`.
    pub fn metrics_of(&self, listen: &str) -> Option<String> {
        match &self.stack {
            Some(Stack::Processes(p)) => p
                .children
                .iter()
                .find(|c| c.listen == listen)
                .map(|c| c.metrics.clone()),
            _ => None,
        }
    }

    pub fn metrics_addrs(&self) -> Vec<(&'static str, String)> {
        match &self.stack {
            Some(Stack::Processes(p)) => p
                .children
                .iter()
                .map(|c| {
                    let addr = if c.component == "gateway" {
                        c.listen.clone()
                    } else {
                        c.metrics.clone()
                    };
                    (c.component, addr)
                })
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Tokens of a signed-in user.
#[derive(Debug, Clone)]
pub struct Session {
    pub access: String,
    pub refresh: String,
    pub user_id: String,
}

impl Session {
    fn from(body: &Value) -> Self {
        let field = |k: &str| {
            body[k]
                .as_str()
                .unwrap_or_else(|| panic!("no {k} in {body}"))
                .to_owned()
        };
        Self {
            access: field("access_token"),
            refresh: field("refresh_token"),
            user_id: field("user_id"),
        }
    }
}

/// The wall clock in Unix milliseconds, as the services read it.
pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// Waits for the next minute when less than `needed` is left of this one. Rate limits count in
/// fixed windows aligned to the clock (a 60 s window ends on the minute), so a test that counts
/// up to a limit must not straddle a minute.
pub async fn in_one_minute(needed: Duration) {
    let into = u64::try_from(now_millis().rem_euclid(60_000)).unwrap_or_default();
    let left = Duration::from_millis(60_000 - into);
    if left < needed {
        tokio::time::sleep(left + Duration::from_millis(200)).await;
    }
}

/// An access token's claims, read without checking the signature.
pub fn claims(token: &str) -> Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).unwrap_or_default();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

/// A unique address for this test.
pub fn email(tag: &str) -> String {
    format!(
        "{tag}-{}@example.com",
        latchkey_shared::crypto::random_base32(8)
    )
}

impl TestApp {
    /// A client-access request, signed in with `token` when given.
    pub fn client(&self, method: Method, path: &str, token: Option<&str>) -> RequestBuilder {
        let req = self.as_("client", method, path);
        match token {
            Some(t) => req.header("x-service-access-token", t),
            None => req,
        }
    }

    pub async fn sign_up(&self, address: &str, password: &str) -> Session {
        let res = self
            .client(Method::POST, "/api/v1/auth/password/sign-up", None)
            .json(&json!({ "email": address, "password": password }))
            .send()
            .await;
        let (status, body, _) = parts(expect(res, "sign-up")).await;
        assert_eq!(status, 200, "sign-up: {body}");
        Session::from(&body)
    }

    pub async fn sign_in(&self, address: &str, password: &str) -> (u16, Value) {
        let res = self
            .client(Method::POST, "/api/v1/auth/password/sign-in", None)
            .json(&json!({ "email": address, "password": password }))
            .send()
            .await;
        let (status, body, _) = parts(expect(res, "sign-in")).await;
        (status, body)
    }

    pub async fn signed_in(&self, address: &str, password: &str) -> Session {
        let (status, body) = self.sign_in(address, password).await;
        assert_eq!(status, 200, "sign-in: {body}");
        Session::from(&body)
    }

    /// Changes project settings as admin.
    pub async fn settings(&self, patch: Value) {
        let res = self
            .as_("admin", Method::PATCH, "/api/v1/internal/project")
            .json(&patch)
            .send()
            .await;
        let (status, body, _) = parts(expect(res, "settings")).await;
        assert_eq!(status, 200, "settings: {body}");
    }

    /// Status of `GET /users/me` with `token`, polled until it equals `status` (at most `within`).
    pub async fn me_becomes(&self, token: &str, status: u16, within: Duration) -> Value {
        let started = std::time::Instant::now();
        loop {
            let res = self
                .client(Method::GET, "/api/v1/users/me", Some(token))
                .send()
                .await;
            let (got, body, _) = parts(expect(res, "users/me")).await;
            if got == status {
                return body;
            }
            assert!(
                started.elapsed() < within,
                "GET /users/me stayed {got} ({body}) for {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl TestApp {
    /// Event types auth has written to its outbox, oldest first.
    pub async fn auth_outbox(&self) -> Vec<String> {
        let db = expect(Database::connect(&self.auth_db_url).await, "auth db");
        let sql = "SELECT event_type FROM outbox ORDER BY seq";
        let types: Vec<String> = match &db {
            Database::Postgres(pool) => {
                expect(sqlx::query_scalar(sql).fetch_all(pool).await, "outbox")
            }
            Database::Sqlite(pool) => {
                expect(sqlx::query_scalar(sql).fetch_all(pool).await, "outbox")
            }
        };
        db.close().await;
        types
    }
}

impl TestApp {
    /// Id of the newest event of `event_type` in auth's outbox.
    pub async fn last_event_id(&self, event_type: &str) -> String {
        let db = expect(Database::connect(&self.auth_db_url).await, "auth db");
        let sql = "SELECT body FROM outbox WHERE event_type = $1 ORDER BY seq DESC LIMIT 1";
        let body: String = match &db {
            Database::Postgres(pool) => expect(
                sqlx::query_scalar(sql)
                    .bind(event_type)
                    .fetch_one(pool)
                    .await,
                "outbox",
            ),
            Database::Sqlite(pool) => expect(
                sqlx::query_scalar(sql)
                    .bind(event_type)
                    .fetch_one(pool)
                    .await,
                "outbox",
            ),
        };
        db.close().await;
        let event: Value = expect(serde_json::from_str(&body), "event");
        event["id"].as_str().unwrap_or_default().to_owned()
    }
}

/// The body of a response that must have `status`.
pub async fn ok(res: Response, status: u16) -> Value {
    let (got, body, _) = parts(res).await;
    assert_eq!(got, status, "{body}");
    body
}

/// Sends a request the test expects to reach the server.
pub async fn send(req: RequestBuilder) -> Response {
    req.send().await.unwrap_or_else(|e| panic!("{e}"))
}
