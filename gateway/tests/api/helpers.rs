use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use latchkey_gateway::system::{self, Databases, Running, SystemConfig};
use latchkey_shared::db::Database;
use latchkey_shared::testing::Infra;
use reqwest::{Method, RequestBuilder, Response};
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    Embedded,
    Distributed,
}

/// Runs a test body once per mode, as two `#[tokio::test]`s.
macro_rules! both_modes {
    ($name:ident, |$app:ident: &TestApp| async move $body:block) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn embedded() {
                let owned = $crate::helpers::TestApp::spawn($crate::helpers::Mode::Embedded).await;
                {
                    let $app: &TestApp = &owned;
                    $body
                }
                owned.finish().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

#[derive(Debug, Clone)]
pub struct Project {
    pub id: String,
    pub client_key: String,
    pub server_key: String,
    pub admin_key: String,
}

pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    pub project: Project,
    pub auth_db_url: String,
    running: Option<Running>,
    infra: Infra,
    _dir: tempfile::TempDir,
}

fn expect<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

impl TestApp {
    pub async fn spawn(mode: Mode) -> Self {
        latchkey_shared::telemetry::init();
        let dir = expect(tempfile::tempdir(), "tempdir");
        let infra = Infra::new();
        let (databases, amqp_url) = match mode {
            Mode::Embedded => (Databases::sqlite_in(dir.path()), None),
            Mode::Distributed => {
                let db = |name: &'static str| {
                    let infra = &infra;
                    async move { expect(infra.postgres_database(name).await, "postgres database") }
                };
                let databases = Databases {
                    auth: db("auth").await,
                    teams: db("teams").await,
                    contacts: db("contacts").await,
                    webhooks: db("webhooks").await,
                };
                let vhost = expect(infra.amqp_vhost().await, "rabbitmq vhost");
                (databases, Some(secrecy::SecretString::from(vhost)))
            }
        };
        let auth_db_url = databases.auth.clone();
        let running = expect(
            system::start(SystemConfig {
                http_addr: "127.0.0.1:0".into(),
                public_url: None,
                databases,
                amqp_url,
                max_body_bytes: 64 * 1024,
                key_cache_ttl: Duration::from_secs(2),
            })
            .await,
            "system start",
        );
        let mut auth = expect(running.auth_client(), "auth client");
        let created = expect(
            auth.create_project(latchkey_proto::auth::v1::CreateProjectRequest {
                display_name: "Test project".into(),
            })
            .await,
            "create project",
        )
        .into_inner();
        Self {
            base: format!("http://{}", running.http_addr),
            http: reqwest::Client::new(),
            project: Project {
                id: created.project_id,
                client_key: created.publishable_client_key,
                server_key: created.secret_server_key,
                admin_key: created.super_secret_admin_key,
            },
            auth_db_url,
            running: Some(running),
            infra,
            _dir: dir,
        }
    }

    /// A second project in the same system.
    pub async fn other_project(&self) -> Project {
        let running = self
            .running
            .as_ref()
            .unwrap_or_else(|| panic!("not running"));
        let mut auth = expect(running.auth_client(), "auth client");
        let p = expect(
            auth.create_project(latchkey_proto::auth::v1::CreateProjectRequest {
                display_name: "Other".into(),
            })
            .await,
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

    pub async fn finish(mut self) {
        if let Some(running) = self.running.take() {
            expect(running.shutdown().await, "clean shutdown");
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
