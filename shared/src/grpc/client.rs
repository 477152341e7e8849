//! Channels to other components, and the cached access check every caller of auth shares.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use latchkey_proto::auth::v1::projects_client::ProjectsClient;
use latchkey_proto::auth::v1::{AccessOutcome, AccessType as PbAccessType, CheckAccessRequest};
use tonic::service::interceptor::InterceptedService;

pub use super::retry::Channel;
use tonic::Status;
use uuid::Uuid;

use super::caller::{PresentCaller, ServerKeys};
use super::context::DEFAULT_DEADLINE;
use crate::crypto::hash_secret;
use crate::headers::AccessType;

pub type AuthClient = ProjectsClient<InterceptedService<Channel, PresentCaller>>;

/// A channel to every replica `addr` names (`host:port`, comma-separated, names resolved to all
/// their addresses), balancing per call. It connects on first use, reconnects by itself (so
/// components can start in any order) and resends calls that never reached the component.
pub fn lazy_channel(addr: &str) -> anyhow::Result<Channel> {
    Channel::balanced(addr)
}

/// Bound on cached entries; beyond it the cache is cleared rather than grown.
const MAX_ENTRIES: usize = 100_000;

/// (project, access type, SHA-256 of the key).
type CacheKey = (Uuid, AccessType, String);

/// Asks auth whether a project exists and a key is live, remembering answers for `ttl` so a
/// steady stream of requests costs one call per key per TTL. Revoked or expired keys stop
/// working within the TTL (80 §3: 5 s).
pub struct AccessChecker {
    auth: AuthClient,
    ttl: Duration,
    entries: Mutex<HashMap<CacheKey, (Instant, AccessOutcome)>>,
}

impl AccessChecker {
    pub fn new(auth: AuthClient, ttl: Duration) -> Self {
        Self {
            auth,
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Checks a project and key; an empty key checks the project only.
    pub async fn check(
        &self,
        project: Uuid,
        access: AccessType,
        key: &str,
    ) -> Result<AccessOutcome, Status> {
        self.check_hash(project, access, &hash_secret(key)).await
    }

    /// `check` for a key known by its SHA-256 (`hash_secret`) only.
    pub async fn check_hash(
        &self,
        project: Uuid,
        access: AccessType,
        key_sha256: &str,
    ) -> Result<AccessOutcome, Status> {
        // Keyed by the key's hash so plaintext keys are not kept in memory.
        let cache_key = (project, access, key_sha256.to_owned());
        if let Ok(entries) = self.entries.lock() {
            if let Some((at, outcome)) = entries.get(&cache_key) {
                if at.elapsed() < self.ttl {
                    return Ok(*outcome);
                }
            }
        }
        let access_type = match access {
            AccessType::Client => PbAccessType::Client,
            AccessType::Server => PbAccessType::Server,
            AccessType::Admin => PbAccessType::Admin,
        };
        let mut request = tonic::Request::new(CheckAccessRequest {
            project_id: project.to_string(),
            access_type: access_type.into(),
            key: String::new(),
            key_sha256: key_sha256.to_owned(),
        });
        request.set_timeout(DEFAULT_DEADLINE);
        let outcome = self
            .auth
            .clone()
            .check_access(request)
            .await?
            .into_inner()
            .outcome();
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
            entries.insert(cache_key, (Instant::now(), outcome));
        }
        Ok(outcome)
    }
}

#[async_trait::async_trait]
impl ServerKeys for AccessChecker {
    async fn is_server_key(&self, project: Uuid, key: &str) -> Result<bool, Status> {
        Ok(self.check(project, AccessType::Server, key).await? == AccessOutcome::Granted)
    }
}
