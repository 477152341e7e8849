//! Code every Latchkey component shares. Never depends on the gateway or a service.

/// Natural batching: what arrives while a batch is out leaves with the next.
pub mod batching;
/// `Clock` and its system and manual implementations.
pub mod clock;
/// One-time verification codes (70 §4).
pub mod codes;
/// Settings common to every component, read from `LATCHKEY_*` variables.
pub mod config;
/// Random secrets, storage hashes, constant-time comparison.
pub mod crypto;
/// Connect and migrate a service's own database (Postgres or SQLite).
pub mod db;
/// E-mail normalisation and validation.
pub mod email;
/// The error-code table and the one mapping to and from gRPC statuses.
pub mod error;
/// Change events: envelope, buses, outbox relay, consumer helper.
pub mod events;
/// Caller authentication, access context in metadata, health, reflection, channels.
pub mod grpc;
/// Access headers under all three prefixes.
pub mod headers;
/// Profile image values.
pub mod images;
pub mod limits;
/// Prometheus metrics of the process and a service's metrics endpoint.
pub mod metrics;
/// Password hashing (argon2id, bcrypt import) off the async runtime.
pub mod password;
/// OAuth provider types.
pub mod providers;
/// Rows remembered by the only writer of a database, forgotten by its writes.
pub mod remembered;
/// Sealing of stored secrets that must be read back (AES-256-GCM).
pub mod sealed;
/// A shutdown signal many tasks can wait on.
pub mod shutdown;
/// Structured logging set-up.
pub mod telemetry;
/// Per-run databases, vhosts and cleanup for tests against the real servers.
#[cfg(feature = "test-support")]
pub mod testing;
/// Trusted callback URLs (50 §7).
pub mod urls;
