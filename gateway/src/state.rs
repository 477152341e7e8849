//! What handlers share: service clients, caches and settings.

use std::sync::Arc;
use std::time::Duration;

use latchkey_proto::auth::v1::projects_client::ProjectsClient;
use latchkey_shared::grpc::{lazy_channel, AccessChecker, PresentCaller};
use secrecy::SecretString;
use tonic::transport::Channel;

use crate::access::token::TokenVerifier;
use crate::metrics::Metrics;

pub use latchkey_shared::grpc::AuthClient;

/// Where the services are and how to reach them.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub auth_addr: String,
    pub teams_addr: String,
    pub contacts_addr: String,
    pub webhooks_addr: String,
    pub internal_token: SecretString,
    /// Public base URL (scheme, host, port) used in token issuers, e.g. `https://auth.example.com`.
    pub public_url: String,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// How long a key check result is reused; revocation takes effect within this time.
    pub key_cache_ttl: Duration,
}

#[derive(Clone)]
pub struct AppState(pub Arc<Inner>);

pub struct Inner {
    pub config: GatewayConfig,
    pub auth: AuthClient,
    /// Channels for readiness checks, one per service.
    pub health: Vec<(&'static str, Channel)>,
    pub access: AccessChecker,
    pub tokens: TokenVerifier,
    pub metrics: Metrics,
}

impl AppState {
    pub fn new(config: GatewayConfig) -> anyhow::Result<Self> {
        let caller = PresentCaller::new(&config.internal_token)?;
        let auth_channel = lazy_channel(&config.auth_addr)?;
        let auth = ProjectsClient::with_interceptor(auth_channel.clone(), caller);
        let health = vec![
            ("auth", auth_channel),
            ("teams", lazy_channel(&config.teams_addr)?),
            ("contacts", lazy_channel(&config.contacts_addr)?),
            ("webhooks", lazy_channel(&config.webhooks_addr)?),
        ];
        Ok(Self(Arc::new(Inner {
            access: AccessChecker::new(auth.clone(), config.key_cache_ttl),
            tokens: TokenVerifier::new(auth.clone(), config.public_url.clone()),
            metrics: Metrics::default(),
            auth,
            health,
            config,
        })))
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}
