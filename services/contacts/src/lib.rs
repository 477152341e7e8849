//! The contacts service: owns and migrates its database, relays its outbox, answers gRPC health,
//! reflection and `Describe`.

use latchkey_proto::contacts::v1 as pb;
use latchkey_shared::db::{Database, Migrations};
use latchkey_shared::events::consume::consumed_count;
use latchkey_shared::grpc::{Context, Deps};
use tonic::{Request, Response, Status};

/// The gRPC service name health reports on.
pub const SERVICE_NAME: &str = "latchkey.contacts.v1.Contacts";

static MIGRATIONS: Migrations = Migrations {
    postgres: &sqlx::migrate!("migrations/postgres"),
    sqlite: &sqlx::migrate!("migrations/sqlite"),
};

#[derive(Debug, Clone)]
pub struct Config {
    /// `postgres://…` or `sqlite://…` for this service's own database.
    pub database_url: String,
}

struct Contacts {
    db: Database,
}

#[tonic::async_trait]
impl pb::contacts_server::Contacts for Contacts {
    async fn describe(
        &self,
        request: Request<pb::DescribeRequest>,
    ) -> Result<Response<pb::DescribeResponse>, Status> {
        let ctx = Context::read(request.metadata())?;
        let consumed_events = consumed_count(&self.db, ctx.project_id)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "contacts store failed");
                latchkey_shared::error::CodedError::internal().into_status()
            })?;
        Ok(Response::new(pb::DescribeResponse {
            service: "contacts".into(),
            consumed_events,
        }))
    }
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
    let routes = |db: Database| {
        latchkey_shared::grpc::authenticated(
            pb::contacts_server::ContactsServer::new(Contacts { db }),
            &deps,
        )
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
