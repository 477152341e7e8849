//! The outbox relay against real PostgreSQL and RabbitMQ: 1,000 committed events survive a
//! broker restart in the middle of relaying (duplicates allowed, losses not).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use latchkey_shared::clock;
use latchkey_shared::db::{Database, Migrations};
use latchkey_shared::events::amqp::AmqpBus;
use latchkey_shared::events::outbox::{enqueue_postgres, Relay};
use latchkey_shared::events::{Event, Subscriber};
use latchkey_shared::testing::Infra;

// The shared event tables only; services append them to their own migrations.
static NO_SERVICE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate::Migrator::DEFAULT;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_delivers_every_event_across_a_broker_restart() {
    let infra = Infra::new();
    let url = infra
        .postgres_database("outbox")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let amqp = infra.amqp_vhost().await.unwrap_or_else(|e| panic!("{e}"));
    let migrations = Migrations {
        postgres: &NO_SERVICE_MIGRATIONS,
        sqlite: &NO_SERVICE_MIGRATIONS,
    };
    let db = Database::connect_and_migrate(&url, migrations)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let Database::Postgres(pool) = &db else {
        panic!("expected postgres")
    };

    let bus = Arc::new(AmqpBus::new(amqp.clone()));
    let mut deliveries = bus
        .subscribe("test.consumer", &["#"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let project = uuid::Uuid::new_v4();
    let mut tx = pool.begin().await.unwrap_or_else(|e| panic!("{e}"));
    let mut expected = HashSet::new();
    for i in 0..1000 {
        let event = Event::new("user.created", project, i, serde_json::json!({ "n": i }));
        expected.insert(event.id);
        enqueue_postgres(&mut tx, &event)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    tx.commit().await.unwrap_or_else(|e| panic!("{e}"));

    let relay = Relay::new(db.clone(), bus.clone(), clock::system());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let relay_task = tokio::spawn(relay.clone().run(async {
        let _ = stopped.await;
    }));

    let mut received = HashSet::new();
    let mut restarted = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while received.len() < expected.len() {
        // Restart the broker once some events are through and the rest are still in flight.
        if !restarted && received.len() >= 100 {
            latchkey_shared::testing::rabbitmqctl("stop_app");
            tokio::time::sleep(Duration::from_millis(500)).await;
            latchkey_shared::testing::rabbitmqctl("start_app");
            restarted = true;
        }
        let next = tokio::time::timeout_at(deadline, deliveries.recv()).await;
        let Ok(Some(delivery)) = next else {
            panic!(
                "only {} of {} events arrived",
                received.len(),
                expected.len()
            );
        };
        assert_eq!(delivery.event.project_id, project);
        received.insert(delivery.event.id);
        delivery.settle.ack().await;
    }
    assert!(restarted, "the broker was never restarted");
    assert_eq!(received, expected);
    // Rows are stamped after the broker confirmed their batch, so stamping may trail delivery.
    for _ in 0..300 {
        if relay.pending().await.ok() == Some(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(relay.pending().await.ok(), Some(0));

    let _ = stop.send(());
    let _ = relay_task.await;
    db.close().await;
    infra.cleanup().await;
}

#[tokio::test]
async fn in_process_bus_routes_by_topic_and_shares_a_queue() {
    use latchkey_shared::events::in_process::InProcessBus;
    use latchkey_shared::events::Publisher;
    let bus = InProcessBus::new();
    let mut users = bus
        .subscribe("users", &["user.*"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut all = bus
        .subscribe("all", &["#"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let project = uuid::Uuid::new_v4();
    let team = Event::new("team.created", project, 1, serde_json::json!({}));
    let user = Event::new("user.created", project, 2, serde_json::json!({}));
    bus.publish(&team).await.unwrap_or_else(|e| panic!("{e}"));
    bus.publish(&user).await.unwrap_or_else(|e| panic!("{e}"));
    let got = |r: Option<latchkey_shared::events::Delivery>| r.map(|d| d.event.id);
    assert_eq!(got(users.recv().await), Some(user.id));
    assert_eq!(got(all.recv().await), Some(team.id));
    assert_eq!(got(all.recv().await), Some(user.id));
}
