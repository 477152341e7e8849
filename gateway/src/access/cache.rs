//! Short-lived cache of key checks, so a steady stream of requests costs one gRPC call per key
//! per TTL. Revoked or expired keys stop working within the TTL (80 §3: 5 s).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use latchkey_proto::auth::v1::{AccessOutcome, AccessType as PbAccessType, CheckAccessRequest};
use latchkey_shared::crypto::hash_secret;
use latchkey_shared::headers::AccessType;
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::AuthClient;

/// Bound on cached entries; beyond it the cache is cleared rather than grown.
const MAX_ENTRIES: usize = 100_000;

/// (project, access type, SHA-256 of the key).
type CacheKey = (Uuid, AccessType, String);

pub struct AccessCache {
    auth: AuthClient,
    ttl: Duration,
    entries: Mutex<HashMap<CacheKey, (Instant, AccessOutcome)>>,
}

impl AccessCache {
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
    ) -> Result<AccessOutcome, ApiError> {
        // Keyed by the key's hash so plaintext keys are not kept in memory longer than needed.
        let cache_key = (project, access, hash_secret(key));
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
            key: key.to_owned(),
        });
        request.set_timeout(latchkey_shared::grpc::DEFAULT_DEADLINE);
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
