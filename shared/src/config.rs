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
        // An empty value (a Secret's key kept but blank between rotations) means none.
        let previous = self
            .secrets_key_previous
            .as_ref()
            .filter(|p| !p.expose_secret().trim().is_empty());
        Ok(Some(match previous {
            Some(previous) => key
                .with_previous(previous.expose_secret())
                .map_err(|e| anyhow::anyhow!("LATCHKEY_SECRETS_KEY_PREVIOUS: {e}"))?,
            None => key,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn common(key: Option<String>, previous: Option<&str>) -> Common {
        Common {
            amqp_url: None,
            internal_token: None,
            secrets_key: key.map(SecretString::from),
            secrets_key_previous: previous.map(SecretString::from),
        }
    }

    #[test]
    fn a_blank_previous_key_is_none_and_a_bad_one_is_named() {
        let key = crate::sealed::SecretsKey::generate_base64();
        assert!(common(None, None).secrets().ok().flatten().is_none());
        assert!(common(Some(key.clone()), Some(" "))
            .secrets()
            .is_ok_and(|k| k.is_some()));
        let err = common(Some(key), Some("short")).secrets().err();
        assert!(err.is_some_and(|e| e.to_string().contains("LATCHKEY_SECRETS_KEY_PREVIOUS")));
    }
}
