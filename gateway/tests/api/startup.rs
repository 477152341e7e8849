//! Starting the distributed stack from the README alone (issue 18 §3): each component gets only
//! the settings the configuration table marks it as reading — nothing from the test's own
//! environment — and the stack works: tokens auth issues verify at the gateways, a session
//! ended through one gateway is refused by another (the revocation travels over RabbitMQ), a
//! normal start logs no ERROR line, and the operator commands leave no data directory behind
//! when every database is PostgreSQL. Each setting a component requires, left out, makes it
//! refuse to start with one line naming it.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use latchkey_shared::testing::Infra;
use serde_json::{json, Value};

use crate::deployment::{used_by, UsedBy, SERVED};
use crate::processes::free_port;

/// The binary with nothing in its environment but `env`.
fn latchkey(dir: &Path, env: &HashMap<String, String>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    cmd.env_clear().envs(env).current_dir(dir);
    cmd
}

/// The settings of `component` (or of the CLI) that `values` has a value for.
fn marked_for(
    table: &[(String, UsedBy)],
    values: &HashMap<String, String>,
    keep: impl Fn(&UsedBy) -> bool,
) -> HashMap<String, String> {
    table
        .iter()
        .filter(|(_, u)| keep(u))
        .filter_map(|(name, _)| Some((name.clone(), values.get(name)?.clone())))
        .collect()
}

fn text_of(path: &Path) -> String {
    let raw = std::fs::read_to_string(path).unwrap_or_default();
    // Drop colour escapes so log levels read plainly.
    let mut out = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

struct Running {
    children: Vec<(String, Child)>,
    dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Running {
    fn log(&self, name: &str) -> String {
        text_of(&self.dir.path().join(format!("{name}.log")))
    }

    fn start(&mut self, name: &str, component: &str, env: &HashMap<String, String>) {
        let log = std::fs::File::create(self.dir.path().join(format!("{name}.log")))
            .unwrap_or_else(|e| panic!("{e}"));
        let child = latchkey(self.dir.path(), env)
            .args(["serve", component])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        self.children.push((name.to_owned(), child));
    }
}

async fn ready(http: &reqwest::Client, base: &str, running: &Running) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ok = http
            .get(format!("{base}/health/ready"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        if ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{base} never became ready; logs:\n{}",
            running
                .children
                .iter()
                .map(|(n, _)| format!("--- {n}\n{}", running.log(n)))
                .collect::<String>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_component_starts_from_the_readme_table_alone() {
    let table = used_by();
    let infra = Infra::new();
    let mut values: HashMap<String, String> = HashMap::new();
    for service in &SERVED[1..] {
        let url = infra
            .postgres_database(&format!("startup_{service}"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        values.insert(
            format!("LATCHKEY_{}_DATABASE_URL", service.to_uppercase()),
            url,
        );
    }
    let amqp = infra.amqp_vhost().await.unwrap_or_else(|e| panic!("{e}"));
    values.insert("LATCHKEY_AMQP_URL".into(), amqp);
    values.insert(
        "LATCHKEY_INTERNAL_TOKEN".into(),
        latchkey_shared::crypto::random_base32(45),
    );
    values.insert(
        "LATCHKEY_SECRETS_KEY".into(),
        latchkey_shared::sealed::SecretsKey::generate_base64(),
    );
    let gateway = free_port();
    values.insert("LATCHKEY_PUBLIC_URL".into(), format!("http://{gateway}"));
    let mut listen = HashMap::new();
    for service in &SERVED[1..] {
        let addr = free_port();
        values.insert(
            format!("LATCHKEY_{}_ADDR", service.to_uppercase()),
            addr.clone(),
        );
        listen.insert(*service, addr);
    }
    values.insert("RUST_LOG".into(), "info".into());

    let mut running = Running {
        children: Vec::new(),
        dir: tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")),
    };
    let dir = running.dir.path().to_owned();

    // The operator commands, with what the table marks for the CLI: every database is
    // PostgreSQL, so no data directory appears.
    let cli = marked_for(&table, &values, |u| u.cli);
    let migrated = latchkey(&dir, &cli)
        .arg("migrate")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(migrated.status.success(), "{migrated:?}");
    let created = latchkey(&dir, &cli)
        .args(["projects", "create", "--display-name", "Startup"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(created.status.success(), "{created:?}");
    let project: Value = serde_json::from_slice(&created.stdout).unwrap_or_default();
    assert!(
        !dir.join("latchkey-data").exists(),
        "the CLI made a data directory with every database on PostgreSQL"
    );

    // Each service with its own settings and listen addresses, then two gateways.
    for service in &SERVED[1..] {
        let mut env = marked_for(&table, &values, |u| u.reads(service));
        env.insert("LATCHKEY_GRPC_ADDR".into(), listen[service].clone());
        env.insert("LATCHKEY_METRICS_ADDR".into(), free_port());
        assert!(
            table
                .iter()
                .any(|(n, u)| n == "LATCHKEY_GRPC_ADDR" && u.reads(service)),
            "the table does not say {service} reads LATCHKEY_GRPC_ADDR"
        );
        running.start(service, service, &env);
    }
    let second = free_port();
    for (name, addr) in [("gateway", &gateway), ("gateway-2", &second)] {
        let mut env = marked_for(&table, &values, |u| u.reads("gateway"));
        env.insert("LATCHKEY_HTTP_ADDR".into(), addr.clone());
        running.start(name, "gateway", &env);
    }
    let http = reqwest::Client::new();
    let bases = [format!("http://{gateway}"), format!("http://{second}")];
    for base in &bases {
        ready(&http, base, &running).await;
    }

    let client = |base: &str, method: reqwest::Method, path: &str| {
        http.request(method, format!("{base}/api/v1{path}"))
            .header("x-service-access-type", "client")
            .header(
                "x-service-project-id",
                project["project_id"].as_str().unwrap_or_default(),
            )
            .header(
                "x-service-publishable-client-key",
                project["publishable_client_key"]
                    .as_str()
                    .unwrap_or_default(),
            )
    };
    let signed_up = client(&bases[0], reqwest::Method::POST, "/auth/password/sign-up")
        .json(&json!({"email": "startup@example.com", "password": "cedar-lattice-beacon-58"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(signed_up.status(), 200, "{:?}", signed_up.text().await);
    let session: Value = signed_up.json().await.unwrap_or_default();
    let access = session["access_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let refresh = session["refresh_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let me = |base: &str| {
        client(base, reqwest::Method::GET, "/users/me").header("x-service-access-token", &access)
    };
    for base in &bases {
        let res = me(base).send().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(res.status(), 200, "{base}: {:?}", res.text().await);
        let user: Value = res.json().await.unwrap_or_default();
        assert_eq!(user["primary_email"], "startup@example.com");
    }
    let ended = client(&bases[0], reqwest::Method::DELETE, "/auth/sessions/current")
        .header("x-service-access-token", &access)
        .header("x-service-refresh-token", &refresh)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ended.status(), 200);
    let started = Instant::now();
    while me(&bases[1]).send().await.map(|r| r.status().as_u16()).ok() != Some(401) {
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the other gateway never heard of the revocation"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    for (name, _) in &running.children {
        let log = running.log(name);
        let errors: Vec<&str> = log.lines().filter(|l| l.contains(" ERROR ")).collect();
        assert!(
            errors.is_empty(),
            "{name} logged errors at a normal start: {errors:?}"
        );
    }
    drop(running);
    infra.cleanup().await;
}

#[test]
fn a_component_missing_a_required_setting_refuses_to_start_naming_it() {
    let table = used_by();
    let values: HashMap<String, String> = table
        .iter()
        .map(|(name, _)| {
            let value = match name.as_str() {
                "LATCHKEY_SECRETS_KEY" => latchkey_shared::sealed::SecretsKey::generate_base64(),
                // Nothing listens there: a component that started anyway would fail later.
                n if n.ends_with("_URL") => "postgres://127.0.0.1:1/none".to_owned(),
                n if n.ends_with("_ADDR") => free_port(),
                _ => "x".repeat(32),
            };
            (name.clone(), value)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut checked = 0;
    for component in SERVED {
        for (missing, _) in table.iter().filter(|(_, u)| u.requires(component)) {
            // Left out, and set but empty: both count as missing.
            for blank in [false, true] {
                let mut env: HashMap<String, String> = table
                    .iter()
                    .filter(|(n, u)| u.requires(component) && n != missing)
                    .map(|(n, _)| (n.clone(), values[n].clone()))
                    .collect();
                if blank {
                    env.insert(missing.clone(), String::new());
                }
                env.insert("RUST_LOG".into(), "off".into());
                let mut child = latchkey(dir.path(), &env)
                    .args(["serve", component])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap_or_else(|e| panic!("{e}"));
                let started = Instant::now();
                let status = loop {
                    if let Ok(Some(status)) = child.try_wait() {
                        break status;
                    }
                    if started.elapsed() > Duration::from_secs(10) {
                        let _ = child.kill();
                        panic!("{component} started without {missing}");
                    }
                    std::thread::sleep(Duration::from_millis(20));
                };
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                }
                assert_eq!(
                    status.code(),
                    Some(2),
                    "{component} without {missing}: {stderr}"
                );
                // Exactly the one left out is named: the table marks every setting the code needs.
                let named: Vec<&str> = table
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .filter(|n| stderr.contains(&format!("{n} (")))
                    .collect();
                assert!(
                    stderr.lines().count() == 1 && named == [missing.as_str()],
                    "{component} without {missing} said: {stderr}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "only {checked} required settings checked");
}
