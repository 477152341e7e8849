//! The contacts service: contact channels (the auth e-mail among them), e-mail verification
//! codes and outgoing mail. Auth removes a deleted user's channels in the request path
//! (`RemoveUser`); consuming `user.deleted` finishes a deletion that a failure interrupted.

mod domain;
mod error;
mod grpc;
mod mail;
mod store;

use std::sync::Arc;

use latchkey_proto::contacts::v1::contacts_server::ContactsServer;
use latchkey_shared::codes::Codes;
use latchkey_shared::db::{Database, Migrations};
use latchkey_shared::events::consume::{self, Dedupe, Handler};
use latchkey_shared::events::Event;
use latchkey_shared::grpc::Deps;

pub use mail::MailConfig;

/// The gRPC service name health reports on.
pub const SERVICE_NAME: &str = "latchkey.contacts.v1.Contacts";
/// The durable queue this service consumes.
const QUEUE: &str = "latchkey.contacts";

static MIGRATIONS: Migrations = Migrations {
    postgres: &sqlx::migrate!("migrations/postgres"),
    sqlite: &sqlx::migrate!("migrations/sqlite"),
};

#[derive(Debug, Clone)]
pub struct Config {
    /// `postgres://…` or `sqlite://…` for this service's own database.
    pub database_url: String,
    pub mail: MailConfig,
}

pub async fn migrate(database_url: &str) -> anyhow::Result<()> {
    Database::connect_and_migrate(database_url, MIGRATIONS)
        .await?
        .close()
        .await;
    Ok(())
}

/// Removes a deleted user's channels; normally auth already did, and deleting nothing is fine.
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
        let removed = self.0.delete_user(event.project_id, user).await?;
        tracing::info!(%user, removed, "removed the channels of a deleted user");
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
                tracing::error!(error = %e, "contacts consumer stopped");
            }
        });
        let caller = latchkey_shared::grpc::PresentCaller::new(&deps.internal_token)?;
        let service = grpc::Contacts {
            auth: latchkey_shared::grpc::auth::Auth::connect(&deps.auth_addr, caller)?,
            mailer: Arc::new(mail::Mailer::new(cfg.mail.clone(), store.clone())),
            codes: Codes::new(db.clone(), deps.clock.clone()),
            store,
            clock: deps.clock.clone(),
        };
        let keys = deps.remote_server_keys()?;
        let routes =
            latchkey_shared::grpc::guarded(ContactsServer::new(service), &deps, keys.clone());
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
