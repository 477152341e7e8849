//! What handlers share: service clients, caches and settings.

use std::sync::Arc;
use std::time::Duration;

use latchkey_proto::auth::v1::projects_client::ProjectsClient;
use latchkey_shared::grpc::Channel;
use latchkey_shared::grpc::{lazy_channel, AccessChecker, PresentCaller};
use secrecy::SecretString;

use crate::access::token::TokenVerifier;
use crate::metrics::Metrics;

pub use latchkey_shared::grpc::AuthClient;
pub type UsersClient = latchkey_proto::auth::v1::users_client::UsersClient<
    tonic::service::interceptor::InterceptedService<Channel, PresentCaller>,
>;
pub type OAuthClient = latchkey_proto::auth::v1::o_auth_client::OAuthClient<
    tonic::service::interceptor::InterceptedService<Channel, PresentCaller>,
>;
pub type OwnedKeysClient = latchkey_proto::auth::v1::owned_api_keys_client::OwnedApiKeysClient<
    tonic::service::interceptor::InterceptedService<Channel, PresentCaller>,
>;
pub type PasskeysClient = latchkey_proto::auth::v1::passkeys_client::PasskeysClient<
    tonic::service::interceptor::InterceptedService<Channel, PresentCaller>,
>;
pub type WebhooksClient = latchkey_proto::webhooks::v1::webhooks_client::WebhooksClient<
    tonic::service::interceptor::InterceptedService<Channel, PresentCaller>,
>;
pub type TeamsClient = latchkey_proto::teams::v1::teams_client::TeamsClient<
    tonic::service::interceptor::InterceptedService<Channel, PresentCaller>,
>;
pub type ContactsClient = latchkey_proto::contacts::v1::contacts_client::ContactsClient<
    tonic::service::interceptor::InterceptedService<Channel, PresentCaller>,
>;

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
    pub rate_limits: crate::limits::RateLimitConfig,
    /// After the shutdown signal, how long to keep serving while `/health/ready` answers 503,
    /// so the load balancer stops sending requests before the listener closes.
    pub shutdown_delay: Duration,
}

#[derive(Clone)]
pub struct AppState(pub Arc<Inner>);

pub struct Inner {
    pub config: GatewayConfig,
    pub auth: AuthClient,
    pub users: UsersClient,
    pub oauth: OAuthClient,
    pub owned_keys: OwnedKeysClient,
    pub passkeys: PasskeysClient,
    pub contacts: ContactsClient,
    pub teams: TeamsClient,
    pub webhooks: WebhooksClient,
    pub revocations: crate::access::revocations::Revocations,
    /// Channels for readiness checks, one per service.
    pub health: Vec<(&'static str, Channel)>,
    pub access: AccessChecker,
    pub tokens: TokenVerifier,
    pub metrics: Metrics,
    pub limits: crate::limits::RateLimits,
    /// Admin console sessions (README "Admin console").
    pub console: Box<dyn crate::console::store::SessionStore>,
    /// Set when shutdown begins: readiness fails from then on.
    pub draining: std::sync::atomic::AtomicBool,
}

impl AppState {
    /// `bus` carries session revocations to this gateway; without it (a gateway run alone,
    /// with no broker configured) revoked sessions' access tokens live until they expire.
    pub fn new(
        config: GatewayConfig,
        bus: Option<latchkey_shared::events::SharedBus>,
    ) -> anyhow::Result<Self> {
        let caller = PresentCaller::new(&config.internal_token)?;
        let auth_channel = lazy_channel(&config.auth_addr)?;
        let auth = ProjectsClient::with_interceptor(auth_channel.clone(), caller.clone());
        let users = latchkey_proto::auth::v1::users_client::UsersClient::with_interceptor(
            auth_channel.clone(),
            caller.clone(),
        );
        let oauth = latchkey_proto::auth::v1::o_auth_client::OAuthClient::with_interceptor(
            auth_channel.clone(),
            caller.clone(),
        );
        let owned_keys =
            latchkey_proto::auth::v1::owned_api_keys_client::OwnedApiKeysClient::with_interceptor(
                auth_channel.clone(),
                caller.clone(),
            );
        let passkeys = latchkey_proto::auth::v1::passkeys_client::PasskeysClient::with_interceptor(
            auth_channel.clone(),
            caller.clone(),
        );
        let contacts_channel = lazy_channel(&config.contacts_addr)?;
        let contacts =
            latchkey_proto::contacts::v1::contacts_client::ContactsClient::with_interceptor(
                contacts_channel.clone(),
                caller,
            );
        let teams_channel = lazy_channel(&config.teams_addr)?;
        let teams = latchkey_proto::teams::v1::teams_client::TeamsClient::with_interceptor(
            teams_channel.clone(),
            PresentCaller::new(&config.internal_token)?,
        );
        let revocations = crate::access::revocations::Revocations::default();
        match bus {
            Some(bus) => revocations.follow(bus),
            None => tracing::warn!(
                "no event bus: ended sessions' access tokens stay valid until they expire"
            ),
        }
        let webhooks_channel = lazy_channel(&config.webhooks_addr)?;
        let health = vec![
            ("auth", auth_channel),
            ("teams", teams_channel),
            ("contacts", contacts_channel),
            ("webhooks", webhooks_channel.clone()),
        ];
        let webhooks =
            latchkey_proto::webhooks::v1::webhooks_client::WebhooksClient::with_interceptor(
                webhooks_channel,
                PresentCaller::new(&config.internal_token)?,
            );
        Ok(Self(Arc::new(Inner {
            access: AccessChecker::new(auth.clone(), config.key_cache_ttl),
            tokens: TokenVerifier::new(auth.clone(), config.public_url.clone()),
            metrics: Metrics::default(),
            limits: crate::limits::RateLimits::new(config.rate_limits.clone())?,
            console: match &config.rate_limits.redis_url {
                Some(url) => Box::new(crate::console::store::InRedis::new(
                    url,
                    &config.rate_limits.key_prefix,
                )?),
                None => Box::<crate::console::store::InMemory>::default(),
            },
            draining: std::sync::atomic::AtomicBool::new(false),
            auth,
            users,
            oauth,
            owned_keys,
            passkeys,
            contacts,
            teams,
            webhooks,
            revocations,
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
