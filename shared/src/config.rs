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

    /// Key sealing stored secrets that must be read back (TOTP seeds, webhook secrets, signing
    /// keys, OAuth tokens and client secrets, SMTP URLs): 32
    /// random bytes in base64 (`openssl rand -base64 32`). Required for `serve`; embedded mode
    /// keeps one in its data directory.
    #[arg(long, env = "LATCHKEY_SECRETS_KEY", hide_env_values = true)]
    pub secrets_key: Option<SecretString>,

    /// The secrets key before a rotation: values it sealed still open until
    /// `latchkey secrets rotate` has sealed them again under `LATCHKEY_SECRETS_KEY`.
    #[arg(long, env = "LATCHKEY_SECRETS_KEY_PREVIOUS", hide_env_values = true)]
    pub secrets_key_previous: Option<SecretString>,
}

impl Common {
    /// The configured secrets key with its predecessor, when one is set.
    pub fn secrets(&self) -> anyhow::Result<Option<crate::sealed::SecretsKey>> {
        use secrecy::ExposeSecret;
        let Some(key) = &self.secrets_key else {
            return Ok(None);
        };
        let key = crate::sealed::SecretsKey::from_base64(key.expose_secret())
            .map_err(|e| anyhow::anyhow!("LATCHKEY_SECRETS_KEY: {e}"))?;
        Ok(Some(match &self.secrets_key_previous {
            Some(previous) => key
                .with_previous(previous.expose_secret())
                .map_err(|e| anyhow::anyhow!("LATCHKEY_SECRETS_KEY_PREVIOUS: {e}"))?,
            None => key,
        }))
    }
}
