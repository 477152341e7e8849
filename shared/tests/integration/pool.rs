//! The connection pool against real PostgreSQL: what sqlx's pings were for still holds without
//! them. A transaction dropped uncommitted, or a statement cancelled half-way, never leaves a
//! lock or a half-read answer to the next caller; a connection the server ended is replaced.

use std::time::Duration;

use latchkey_shared::db::{Database, Migrations};
use latchkey_shared::testing::Infra;

static NONE: sqlx::migrate::Migrator = sqlx::migrate::Migrator::DEFAULT;

/// The pool under test, and a connection of its own to the same database to look from outside.
async fn pool(infra: &Infra) -> (latchkey_shared::db::Pool<sqlx::Postgres>, sqlx::PgPool) {
    let url = infra
        .postgres_database("pool")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let outside = sqlx::PgPool::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let migrations = Migrations {
        postgres: &NONE,
        sqlite: &NONE,
    };
    let db = Database::connect_and_migrate(&url, migrations)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let Database::Postgres(pool) = db else {
        panic!("expected postgres")
    };
    sqlx::query("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    sqlx::query("INSERT INTO t VALUES (1, 0)")
        .execute(&pool)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (pool, outside)
}

/// Sets the row from outside within 3 s, or says it could not (a lock still held).
async fn update_quickly(pool: &sqlx::PgPool, v: i32) -> bool {
    let update = sqlx::query("UPDATE t SET v = $1 WHERE id = 1")
        .bind(v)
        .execute(pool);
    matches!(
        tokio::time::timeout(Duration::from_secs(3), update).await,
        Ok(Ok(_))
    )
}

/// The committed value, read from outside or through the pool.
async fn value<'e>(pool: impl sqlx::Executor<'e, Database = sqlx::Postgres>) -> i32 {
    sqlx::query_scalar("SELECT v FROM t WHERE id = 1")
        .fetch_one(pool)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_transactions_and_cancelled_statements_leave_nothing_behind() {
    let infra = Infra::new();
    let (pool, outside) = pool(&infra).await;

    // A transaction that locked the row and was dropped without a commit: rolled back, so the
    // next writer is not blocked and the change is gone.
    {
        let mut tx = pool.begin().await.unwrap_or_else(|e| panic!("{e}"));
        sqlx::query("UPDATE t SET v = 7 WHERE id = 1")
            .execute(&mut *tx)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(
        update_quickly(&outside, 1).await,
        "the dropped transaction still holds its lock"
    );
    assert_eq!(value(&outside).await, 1);
    assert_eq!(value(&pool).await, 1);

    // A transaction cancelled in the middle of a statement (its caller's deadline passed): the
    // server finishes the statement (nothing cancels it there), then the rollback follows.
    let cancelled = tokio::time::timeout(Duration::from_millis(200), async {
        let mut tx = pool.begin().await?;
        sqlx::query("UPDATE t SET v = 8 WHERE id = 1")
            .execute(&mut *tx)
            .await?;
        sqlx::query("SELECT pg_sleep(1)").execute(&mut *tx).await?;
        tx.commit().await
    })
    .await;
    assert!(cancelled.is_err(), "the deadline should have passed");
    assert!(
        update_quickly(&outside, 2).await,
        "the cancelled transaction still holds its lock"
    );
    assert_eq!(value(&outside).await, 2);
    assert_eq!(value(&pool).await, 2);

    // A plain statement cancelled half-way: the answer it would have read never reaches the
    // next caller of that connection.
    for _ in 0..20 {
        let _ = tokio::time::timeout(
            Duration::from_millis(5),
            sqlx::query_scalar::<_, i32>("SELECT 42 FROM pg_sleep(0.01)").fetch_one(&pool),
        )
        .await;
        assert_eq!(value(&pool).await, 2);
    }

    // A committed transaction commits.
    let mut tx = pool.begin().await.unwrap_or_else(|e| panic!("{e}"));
    sqlx::query("UPDATE t SET v = 3 WHERE id = 1")
        .execute(&mut *tx)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tx.commit().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(value(&outside).await, 3);
    pool.close().await;
    outside.close().await;
    infra.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_the_server_ended_are_replaced() {
    let infra = Infra::new();
    let (pool, outside) = pool(&infra).await;
    outside.close().await;
    let own_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // End every connection of the pool from the server side, as a restart would.
    let admin = sqlx::PgPool::connect(&latchkey_shared::testing::postgres_admin_url())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let ended: Vec<bool> =
        sqlx::query_scalar("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1")
            .bind(own_pid)
            .fetch_all(&admin)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ended, vec![true]);
    admin.close().await;
    // Idle past the check age: the ping finds the ended connection and a new one serves.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(value(&pool).await, 0);
    let new_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(new_pid, own_pid);
    pool.close().await;
    infra.cleanup().await;
}
