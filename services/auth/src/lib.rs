//! The auth service. This part: projects, their settings, key sets and signing keys.
//! Public surface: `Config`, `serve`, and the operator functions the CLI uses.

mod app;
mod domain;
mod error;
mod grpc;
mod store;

use std::sync::Arc;

use latchkey_proto::auth::v1::projects_server::ProjectsServer;
use latchkey_proto::auth::v1::users_server::UsersServer;
use latchkey_proto::contacts::v1::contacts_client::ContactsClient;
use latchkey_shared::clock::SharedClock;
use latchkey_shared::db::{Database, Migrations};
use latchkey_shared::grpc::Deps;
use latchkey_shared::grpc::PresentCaller;
use latchkey_shared::password::Passwords;

use crate::store::{PostgresStore, ProjectStore, SqliteStore};

/// The gRPC service name health reports on.
pub const SERVICE_NAME: &str = "latchkey.auth.v1.Projects";

static MIGRATIONS: Migrations = Migrations {
    postgres: &sqlx::migrate!("migrations/postgres"),
    sqlite: &sqlx::migrate!("migrations/sqlite"),
};

#[derive(Debug, Clone)]
pub struct Config {
    /// `postgres://…` or `sqlite://…` for this service's own database.
    pub database_url: String,
    /// Where the contacts service answers.
    pub contacts_addr: String,
    /// Where the teams service answers.
    pub teams_addr: String,
    /// Public base URL of the gateway, for token issuers.
    pub public_url: String,
}

fn plain_store_for(db: &Database) -> Arc<dyn ProjectStore> {
    match db {
        Database::Postgres(pool) => Arc::new(PostgresStore::new(pool.clone())),
        Database::Sqlite(pool) => Arc::new(SqliteStore::new(pool.clone())),
    }
}

/// The project store over `db`, sealing the project secrets it keeps (see `store::sealed`).
fn store_for(
    db: &Database,
    secrets: &latchkey_shared::sealed::SecretsKey,
) -> Arc<dyn ProjectStore> {
    Arc::new(store::sealed::SealedProjects::new(
        plain_store_for(db),
        secrets.clone(),
    ))
}

/// Migrates the database, then serves gRPC on `listener` and relays the outbox until
/// `shutdown` resolves.
pub async fn serve(
    cfg: Config,
    deps: Deps,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let clock = deps.clock.clone();
    let routes = |db: Database, stop: latchkey_shared::shutdown::Shutdown| {
        // One store for the API and the consumer: what one writes, the other must not remember.
        let accounts = store::accounts::Accounts::new(db.clone());
        let owned_keys = store::owned_keys::OwnedKeys::new(db.clone());
        follow_teams(
            &deps,
            &db,
            accounts.clone(),
            owned_keys.clone(),
            stop.clone(),
        );
        // Postgres is shared by every auth replica; a SQLite file belongs to one process.
        let freshness = match &db {
            Database::Postgres(_) => store::cached::Freshness::CheckVersion,
            Database::Sqlite(_) => store::cached::Freshness::OnlyWriter,
        };
        let store: Arc<dyn ProjectStore> = Arc::new(store::cached::CachedProjects::new(
            store_for(&db, &deps.secrets),
            freshness,
        ));
        let keys: Arc<dyn latchkey_shared::grpc::ServerKeys> = Arc::new(
            domain::keys::LocalServerKeys::new(store.clone(), clock.clone()),
        );
        let contacts = ContactsClient::with_interceptor(
            latchkey_shared::grpc::lazy_channel(&cfg.contacts_addr)?,
            PresentCaller::new(&deps.internal_token)?,
        );
        let teams = latchkey_proto::teams::v1::teams_client::TeamsClient::with_interceptor(
            latchkey_shared::grpc::lazy_channel(&cfg.teams_addr)?,
            PresentCaller::new(&deps.internal_token)?,
        );
        let passkeys = store::passkeys::Passkeys::new(db.clone(), accounts.remembered());
        let app = Arc::new(app::App {
            teams,
            projects: store.clone(),
            accounts,
            cli_logins: store::cli_logins::CliLogins::new(db.clone()),
            owned_keys: owned_keys.clone(),
            passkeys,
            codes: latchkey_shared::codes::Codes::new(db.clone(), clock.clone()),
            passwords: Passwords::default(),
            contacts,
            clock: clock.clone(),
            secrets: deps.secrets.clone(),
            public_url: cfg.public_url.trim_end_matches('/').to_owned(),
            oauth: store::oauth::OAuthAccounts::new(db.clone(), deps.secrets.clone()),
            http: oauth_http()?,
            discovery: Default::default(),
            key_pairs: Default::default(),
            settings: Default::default(),
        });
        tokio::spawn(domain::anonymous::sweep(app.clone(), stop.wait()));
        let projects = grpc::Projects::new(store, clock);
        let routes =
            latchkey_shared::grpc::guarded(ProjectsServer::new(projects), &deps, keys.clone());
        let users = UsersServer::new(grpc::Users::new(app.clone()));
        let routes = latchkey_shared::grpc::also_guarded(routes, users, &deps, keys.clone());
        let owned_keys = latchkey_proto::auth::v1::owned_api_keys_server::OwnedApiKeysServer::new(
            grpc::OwnedApiKeys::new(app.clone()),
        );
        let routes = latchkey_shared::grpc::also_guarded(routes, owned_keys, &deps, keys.clone());
        let passkeys = latchkey_proto::auth::v1::passkeys_server::PasskeysServer::new(
            grpc::Passkeys::new(app.clone()),
        );
        let routes = latchkey_shared::grpc::also_guarded(routes, passkeys, &deps, keys.clone());
        let oauth =
            latchkey_proto::auth::v1::o_auth_server::OAuthServer::new(grpc::OAuth::new(app));
        let routes = latchkey_shared::grpc::also_guarded(routes, oauth, &deps, keys.clone());
        Ok(latchkey_shared::grpc::with_describe(
            routes,
            SERVICE_NAME,
            db,
            &deps,
            keys,
        ))
    };
    latchkey_shared::grpc::run_service(
        SERVICE_NAME,
        MIGRATIONS,
        &cfg.database_url,
        &deps,
        listener,
        shutdown,
        routes,
    )
    .await
}

/// The durable queue auth consumes.
const QUEUE: &str = "latchkey.auth";

/// Clears selected teams that no longer hold their users (30 §1.5, §2 rule 2). Teams already
/// asked for this before committing; the event finishes what a failure interrupted. A deleted
/// team's API keys are deleted here (reads refuse them from the deletion on).
struct TeamGone(store::accounts::Accounts, store::owned_keys::OwnedKeys);

#[async_trait::async_trait]
impl latchkey_shared::events::consume::Handler for TeamGone {
    async fn handle(&self, event: &latchkey_shared::events::Event) -> anyhow::Result<()> {
        let id = |key: &str| {
            event
                .data
                .get(key)
                .and_then(|v| v.as_str())
                .and_then(|s| uuid::Uuid::parse_str(s).ok())
        };
        let (team, user) = match event.event_type.as_str() {
            "team.deleted" => (id("id"), None),
            _ => (id("team_id"), id("user_id")),
        };
        let Some(team) = team else {
            anyhow::bail!("{} without a team id", event.event_type);
        };
        if event.event_type == "team.deleted" {
            self.1.delete_team_keys(event.project_id, team).await?;
        }
        self.0
            .clear_selected_team(event.project_id, team, user)
            .await?;
        Ok(())
    }
}

fn follow_teams(
    deps: &Deps,
    db: &Database,
    accounts: store::accounts::Accounts,
    owned_keys: store::owned_keys::OwnedKeys,
    stop: latchkey_shared::shutdown::Shutdown,
) {
    use latchkey_shared::events::consume::{self, Dedupe, Handler};
    let handler: Arc<dyn Handler> = Arc::new(TeamGone(accounts, owned_keys));
    let dedupe = Dedupe::new(db.clone(), QUEUE, deps.clock.clone());
    let bus = deps.bus.clone();
    tokio::spawn(async move {
        let bindings = ["team.deleted", "team_membership.deleted"];
        if let Err(e) = consume::run(bus, QUEUE, &bindings, dedupe, handler, stop.wait()).await {
            tracing::error!(error = %e, "auth consumer stopped");
        }
    });
}

/// The client for OAuth providers: a provider that hangs cannot hold a sign-in for long, and
/// redirects are not followed (a token endpoint has no business redirecting).
fn oauth_http() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()?)
}

/// Operator functions for the `latchkey` CLI (80 §1), straight against the database.
pub mod operator {
    use super::*;
    use latchkey_proto::auth::v1::{CreatedProject, ProjectSummary};

    pub async fn migrate(database_url: &str) -> anyhow::Result<()> {
        Database::connect_and_migrate(database_url, MIGRATIONS)
            .await?
            .close()
            .await;
        Ok(())
    }

    pub async fn create_project(
        database_url: &str,
        clock: SharedClock,
        secrets: &latchkey_shared::sealed::SecretsKey,
        display_name: &str,
    ) -> anyhow::Result<CreatedProject> {
        let db = Database::connect_and_migrate(database_url, MIGRATIONS).await?;
        let created = domain::projects::create(&*store_for(&db, secrets), &*clock, display_name)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        db.close().await;
        Ok(grpc::created_project_to_pb(created))
    }

    /// Seals every stored secret of auth again under the current secrets key (after a
    /// rotation): TOTP seeds, provider tokens, the secrets in project settings and the signing
    /// keys. Returns how many values were rewritten.
    pub async fn reseal(
        database_url: &str,
        secrets: &latchkey_shared::sealed::SecretsKey,
    ) -> anyhow::Result<u64> {
        use latchkey_shared::db::reseal_column;
        let db = Database::connect_and_migrate(database_url, MIGRATIONS).await?;
        let mut rewritten = 0;
        for (table, column, purpose) in [
            ("users", "totp_secret", domain::mfa::TOTP_SEALED_AS),
            ("oauth_accounts", "access_token", store::oauth::ACCESS_TOKEN),
            (
                "oauth_accounts",
                "refresh_token",
                store::oauth::REFRESH_TOKEN,
            ),
        ] {
            rewritten += reseal_column(&db, table, column, purpose, secrets).await?;
        }
        let plain = plain_store_for(&db);
        let sealed = store::sealed::SealedProjects::new(plain.clone(), secrets.clone());
        for raw in plain.projects().await? {
            let opened = sealed
                .project(raw.id)
                .await?
                .ok_or_else(|| anyhow::anyhow!("project {} vanished", raw.id))?;
            // A document without secrets reads back unchanged and needs no new version.
            if opened.settings != raw.settings {
                let saved = sealed
                    .save_settings(
                        raw.id,
                        raw.settings_version,
                        &raw.display_name,
                        &opened.settings,
                    )
                    .await?;
                anyhow::ensure!(saved, "project {} changed meanwhile; run again", raw.id);
                rewritten += 1;
            }
            for key in sealed.signing_keys(raw.id).await? {
                sealed.replace_signing_key(&key).await?;
                rewritten += 1;
            }
        }
        db.close().await;
        Ok(rewritten)
    }

    pub async fn list_projects(database_url: &str) -> anyhow::Result<Vec<ProjectSummary>> {
        let db = Database::connect_and_migrate(database_url, MIGRATIONS).await?;
        // Names only: nothing sealed is read, so no secrets key is needed.
        let projects = plain_store_for(&db).projects().await?;
        db.close().await;
        Ok(projects
            .into_iter()
            .map(|p| ProjectSummary {
                id: p.id.to_string(),
                display_name: p.display_name,
                created_at_millis: p.created_at_millis,
            })
            .collect())
    }
}
