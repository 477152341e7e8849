//! The webhooks service: consumes every public change event from its own durable queue, fans
//! each out to the project's interested endpoints, and delivers them signed (Standard Webhooks),
//! retried on a schedule and recorded (60 §3, 80 §7). Serves the endpoint admin API over gRPC.

mod delivery;
mod endpoints;
mod error;
mod fanout;
mod grpc;
pub mod signing;
mod store;
pub mod url_policy;

use std::sync::Arc;
use std::time::Duration;

use latchkey_proto::webhooks::v1::webhooks_server::WebhooksServer;
use latchkey_shared::db::{Database, Migrations};
use latchkey_shared::events::consume::{self, Dedupe, Handler};
use latchkey_shared::events::PUBLIC_TYPES;
use latchkey_shared::grpc::Deps;
use tokio::sync::Notify;

pub use delivery::{default_schedule, parse_schedule};
pub use url_policy::UrlPolicy;

/// The gRPC service name health reports on.
pub const SERVICE_NAME: &str = "latchkey.webhooks.v1.Webhooks";
/// The durable queue this service consumes.
const QUEUE: &str = "latchkey.webhooks";

static MIGRATIONS: Migrations = Migrations {
    postgres: &sqlx::migrate!("migrations/postgres"),
    sqlite: &sqlx::migrate!("migrations/sqlite"),
};

#[derive(Debug, Clone)]
pub struct Config {
    /// `postgres://…` or `sqlite://…` for this service's own database.
    pub database_url: String,
    /// Waits between attempts (`LATCHKEY_WEBHOOK_RETRY_SCHEDULE`).
    pub retry_schedule: Vec<Duration>,
    /// Which receiver URLs may be registered and called.
    pub url_policy: UrlPolicy,
}

pub async fn migrate(database_url: &str) -> anyhow::Result<()> {
    Database::connect_and_migrate(database_url, MIGRATIONS)
        .await?
        .close()
        .await;
    Ok(())
}

/// Seals every endpoint signing secret again under the current secrets key (after a rotation);
/// returns how many values were rewritten.
pub async fn reseal(
    database_url: &str,
    secrets: &latchkey_shared::sealed::SecretsKey,
) -> anyhow::Result<u64> {
    let db = Database::connect_and_migrate(database_url, MIGRATIONS).await?;
    let mut rewritten = 0;
    for column in ["secret", "previous_secret"] {
        rewritten +=
            latchkey_shared::db::reseal_column(&db, "endpoints", column, store::SEALED_AS, secrets)
                .await?;
    }
    db.close().await;
    Ok(rewritten)
}

/// Migrates the database, then serves gRPC, consumes events and delivers them until `shutdown`.
pub async fn serve(
    cfg: Config,
    deps: Deps,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let routes = |db: Database, stop: latchkey_shared::shutdown::Shutdown| {
        let store = store::Store::new(db.clone(), deps.secrets.clone());
        let wake = Arc::new(Notify::new());
        let fanout: Arc<dyn Handler> = Arc::new(fanout::Fanout {
            store: store.clone(),
            clock: deps.clock.clone(),
            wake: wake.clone(),
        });
        let dedupe = Dedupe::new(db.clone(), QUEUE, deps.clock.clone());
        let bus = deps.bus.clone();
        let consumer_stop = stop.clone();
        tokio::spawn(async move {
            if let Err(e) = consume::run(
                bus,
                QUEUE,
                &PUBLIC_TYPES,
                dedupe,
                fanout,
                consumer_stop.wait(),
            )
            .await
            {
                tracing::error!(error = %e, "webhooks consumer stopped");
            }
        });
        let worker = Arc::new(delivery::Worker::new(
            store.clone(),
            cfg.url_policy,
            cfg.retry_schedule.clone(),
            deps.clock.clone(),
            wake.clone(),
        )?);
        tokio::spawn(worker.run(stop.wait()));
        let endpoints = endpoints::Endpoints {
            store,
            policy: cfg.url_policy,
            clock: deps.clock.clone(),
            wake,
        };
        let keys = deps.remote_server_keys()?;
        let routes = latchkey_shared::grpc::guarded(
            WebhooksServer::new(grpc::Service(Arc::new(endpoints))),
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
