//! The webhooks service: owns and migrates its database, relays its outbox, answers gRPC health,
//! reflection and `latchkey.common.v1.Service`. Its own API arrives with its issue.

use latchkey_shared::db::{Database, Migrations};
use latchkey_shared::grpc::Deps;

/// The name health reports on.
pub const SERVICE_NAME: &str = "latchkey.webhooks.v1";

static MIGRATIONS: Migrations = Migrations {
    postgres: &sqlx::migrate!("migrations/postgres"),
    sqlite: &sqlx::migrate!("migrations/sqlite"),
};

#[derive(Debug, Clone)]
pub struct Config {
    /// `postgres://…` or `sqlite://…` for this service's own database.
    pub database_url: String,
}

pub async fn migrate(database_url: &str) -> anyhow::Result<()> {
    Database::connect_and_migrate(database_url, MIGRATIONS)
        .await?
        .close()
        .await;
    Ok(())
}

/// Migrates the database, then serves gRPC on `listener` until `shutdown` resolves.
pub async fn serve(
    cfg: Config,
    deps: Deps,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let url = &cfg.database_url;
    latchkey_shared::grpc::run_describe_only(
        SERVICE_NAME,
        MIGRATIONS,
        url,
        &deps,
        listener,
        shutdown,
    )
    .await
}
