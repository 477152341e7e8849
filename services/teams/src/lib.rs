//! The teams service: teams, memberships and team permissions. Auth drops a deleted user's
//! memberships in the request path (`RemoveUser`); consuming `user.deleted` finishes a deletion
//! that a failure interrupted.

mod domain;
mod error;
mod grpc;
mod store;

use std::sync::Arc;

use latchkey_proto::teams::v1::teams_server::TeamsServer;
use latchkey_shared::db::{Database, Migrations};
use latchkey_shared::events::consume::{self, Dedupe, Handler};
use latchkey_shared::events::Event;
use latchkey_shared::grpc::Deps;

/// The gRPC service name health reports on.
pub const SERVICE_NAME: &str = "latchkey.teams.v1.Teams";
/// The durable queue this service consumes.
const QUEUE: &str = "latchkey.teams";

static MIGRATIONS: Migrations = Migrations {
    postgres: &sqlx::migrate!("migrations/postgres"),
    sqlite: &sqlx::migrate!("migrations/sqlite"),
};

#[derive(Debug, Clone)]
pub struct Config {
    /// `postgres://…` or `sqlite://…` for this service's own database.
    pub database_url: String,
    /// Where the contacts service answers (invitation mail, verified addresses).
    pub contacts_addr: String,
}

pub async fn migrate(database_url: &str) -> anyhow::Result<()> {
    Database::connect_and_migrate(database_url, MIGRATIONS)
        .await?
        .close()
        .await;
    Ok(())
}

/// Drops a deleted user's memberships (and grants); auth already announced them.
struct UserDeleted(store::Store);

#[async_trait::async_trait]
impl Handler for UserDeleted {
    async fn handle(&self, event: &Event) -> anyhow::Result<()> {
        let user = event
            .data
            .get("id")
            .and_then(|v| v.as_str())
            .and_then(|s| uuid::Uuid::parse_str(s).ok());
        let Some(user) = user else {
            anyhow::bail!("user.deleted without a user id");
        };
        let removed = self.0.remove_user(event.project_id, user).await?;
        tracing::info!(%user, removed, "removed the memberships of a deleted user");
        Ok(())
    }
}

/// Migrates the database, then serves gRPC on `listener` and consumes events until `shutdown`.
pub async fn serve(
    cfg: Config,
    deps: Deps,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let routes = |db: Database, stop: latchkey_shared::shutdown::Shutdown| {
        let store = store::Store::new(db.clone());
        let handler: Arc<dyn Handler> = Arc::new(UserDeleted(store.clone()));
        let dedupe = Dedupe::new(db.clone(), QUEUE, deps.clock.clone());
        let bus = deps.bus.clone();
        tokio::spawn(async move {
            if let Err(e) =
                consume::run(bus, QUEUE, &["user.deleted"], dedupe, handler, stop.wait()).await
            {
                tracing::error!(error = %e, "teams consumer stopped");
            }
        });
        let caller = latchkey_shared::grpc::PresentCaller::new(&deps.internal_token)?;
        let contacts =
            latchkey_proto::contacts::v1::contacts_client::ContactsClient::with_interceptor(
                latchkey_shared::grpc::lazy_channel(&cfg.contacts_addr)?,
                caller.clone(),
            );
        let teams = domain::teams::Teams {
            contacts,
            codes: latchkey_shared::codes::Codes::new(db.clone(), deps.clock.clone()),
            store,
            auth: latchkey_shared::grpc::auth::Auth::connect(&deps.auth_addr, caller)?,
            clock: deps.clock.clone(),
        };
        let keys = deps.remote_server_keys()?;
        let routes = latchkey_shared::grpc::guarded(
            TeamsServer::new(grpc::Service(Arc::new(teams))),
            &deps,
            keys.clone(),
        );
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
