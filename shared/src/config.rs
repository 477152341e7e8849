//! Settings every component reads, from flags or `LATCHKEY_*` environment variables.

use secrecy::SecretString;

/// Connection to the event bus and the credential between components.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// RabbitMQ URL (`amqp://user:pass@host:5672/vhost`). Absent: the in-process bus, which only
    /// works when every component runs in one process (embedded mode).
    #[arg(long, env = "LATCHKEY_AMQP_URL", hide_env_values = true)]
    pub amqp_url: Option<SecretString>,

    /// Token the components present to each other's gRPC APIs. Required in production; embedded
    /// mode makes a random one per start.
    #[arg(long, env = "LATCHKEY_INTERNAL_TOKEN", hide_env_values = true)]
    pub internal_token: Option<SecretString>,

    /// Key sealing stored secrets that must be read back (TOTP seeds, webhook secrets): 32
    /// random bytes in base64 (`openssl rand -base64 32`). Required for `serve`; embedded mode
    /// keeps one in its data directory.
    #[arg(long, env = "LATCHKEY_SECRETS_KEY", hide_env_values = true)]
    pub secrets_key: Option<SecretString>,
}
