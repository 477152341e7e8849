//! The least the distributed `GET /users/me` can cost on this machine, whatever the code: the
//! architecture fixes its parts — one HTTP request at the gateway, three gRPC calls between
//! processes (gateway to auth, auth to contacts, auth to teams) and, in each of the three
//! services that owns part of the answer (the user, their addresses, their selected team), at
//! least one PostgreSQL read, since a replica may serve nothing from memory that another
//! replica's write could have changed. Each part is measured here bare, at saturation over the
//! scenarios' number of connections, as CPU per call of caller and callee together: the bare
//! handler for HTTP, a health check against a gRPC server that does nothing else (one runtime
//! thread, as the manifests give contacts and teams), and a primary-key read of a small table
//! through sqlx.

use std::time::Duration;

use latchkey_shared::testing::Infra;

use crate::{cpu, drive};

/// The least reads and gRPC calls one distributed `GET /users/me` needs.
pub const READS: f64 = 3.0;
pub const GRPC_CALLS: f64 = 3.0;

/// CPU per bare part (µs, both sides).
pub struct Floor {
    pub grpc_call: f64,
    pub read: f64,
}

impl Floor {
    /// The floor of one distributed `/users/me` whose HTTP request alone costs `http` µs.
    pub fn users_me(&self, http: f64) -> f64 {
        http + GRPC_CALLS * self.grpc_call + READS * self.read
    }
}

pub async fn measure(connections: usize, duration: Duration) -> anyhow::Result<Floor> {
    Ok(Floor {
        grpc_call: grpc_call(connections, duration).await?,
        read: read(connections, duration).await?,
    })
}

/// A health check from this process to a bare gRPC server in its own, over one channel as the
/// components' clients use.
async fn grpc_call(connections: usize, duration: Duration) -> anyhow::Result<f64> {
    use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};

    let addr = crate::stack::free_port()?;
    let mut server = std::process::Command::new(std::env::current_exe()?)
        .arg("--bare-grpc")
        .arg(&addr)
        .env("TOKIO_WORKER_THREADS", "1")
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let channel = loop {
        match endpoint.connect().await {
            Ok(channel) => break channel,
            Err(e) if std::time::Instant::now() > deadline => {
                let _ = server.kill();
                return Err(e.into());
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    let client = HealthClient::new(channel);
    let meter = cpu::Meter::new(&[("bare gRPC server".into(), server.id())]);
    let from = meter.read();
    let stats = drive::run(connections, duration, move |_| {
        let mut client = client.clone();
        async move {
            client
                .check(HealthCheckRequest {
                    service: String::new(),
                })
                .await
                .is_ok()
        }
    })
    .await;
    let spent = meter.per_request(&from, &meter.read(), stats.per_second);
    let _ = server.kill();
    let _ = server.wait();
    anyhow::ensure!(stats.errors == 0, "bare gRPC calls failed");
    Ok(spent.of("bare gRPC server") + spent.of("load generator"))
}

/// A primary-key read of a 1,000-row table in a database made for it, from a pool of
/// `connections`.
async fn read(connections: usize, duration: Duration) -> anyhow::Result<f64> {
    let infra = Infra::new();
    let url = infra.postgres_database("bench_floor").await?;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(u32::try_from(connections)?)
        .connect(&url)
        .await?;
    sqlx::query("CREATE TABLE rows (id bigint PRIMARY KEY, value bigint NOT NULL)")
        .execute(&pool)
        .await?;
    sqlx::query("INSERT INTO rows SELECT i, i FROM generate_series(1, 1000) AS i")
        .execute(&pool)
        .await?;
    let meter = cpu::Meter::new(&[]);
    let from = meter.read();
    let reader = pool.clone();
    let stats = drive::run(connections, duration, move |i| {
        let pool = reader.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT value FROM rows WHERE id = $1")
                .bind(i64::try_from(i % 1000 + 1).unwrap_or(1))
                .fetch_one(&pool)
                .await
                .is_ok()
        }
    })
    .await;
    let spent = meter.per_request(&from, &meter.read(), stats.per_second);
    pool.close().await;
    anyhow::ensure!(stats.errors == 0, "bare reads failed");
    Ok(spent.of("PostgreSQL") + spent.of("load generator"))
}

/// Serves `grpc.health.v1` alone until killed (the `--bare-grpc ADDR` mode of this binary).
pub fn serve_bare_grpc(addr: &str) -> anyhow::Result<()> {
    tokio::runtime::Runtime::new()?.block_on(async {
        let (reporter, health) = tonic_health::server::health_reporter();
        reporter
            .set_service_status("", tonic_health::ServingStatus::Serving)
            .await;
        tonic::transport::Server::builder()
            .add_service(health)
            .serve(addr.parse()?)
            .await?;
        Ok(())
    })
}
