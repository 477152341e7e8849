//! Logging set-up: JSON lines in production (`LATCHKEY_LOG_FORMAT=json`), compact text
//! otherwise; level from `RUST_LOG` (default `info`).

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber once; later calls are no-ops (tests call it per test).
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let json = std::env::var("LATCHKEY_LOG_FORMAT").is_ok_and(|v| v == "json");
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = if json {
        builder.json().with_current_span(true).try_init()
    } else {
        builder.compact().try_init()
    };
}
