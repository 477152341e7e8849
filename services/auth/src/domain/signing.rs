//! ES256 signing keys (70 §1.3): one key pair per project and audience, generated with ring and
//! kept in the database so every replica signs and verifies alike.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use uuid::Uuid;

use crate::store::SigningKey;

pub const AUDIENCE_NORMAL: &str = "normal";
pub const AUDIENCE_RESTRICTED: &str = "restricted";
pub const AUDIENCE_ANONYMOUS: &str = "anonymous";
/// Every audience a project signs for; each has its own key.
pub const AUDIENCES: [&str; 3] = [AUDIENCE_NORMAL, AUDIENCE_RESTRICTED, AUDIENCE_ANONYMOUS];

#[derive(Debug, thiserror::Error)]
#[error("could not generate a signing key")]
pub struct KeyGenError;

#[derive(Debug, thiserror::Error)]
#[error("could not sign with key {0}")]
pub struct SignError(String);

/// Key pairs ready to sign, by key id. Reading a PKCS#8 key checks it with a scalar
/// multiplication, as costly as the signature itself, so each key is read once; key ids are
/// random and never reused, so a remembered pair is never stale.
#[derive(Default)]
pub struct KeyPairs(
    std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<EcdsaKeyPair>>>,
);

/// Keys remembered at most; beyond it the map starts over (retired keys stop being asked for).
const MAX_KEY_PAIRS: usize = 10_000;

impl KeyPairs {
    /// The ES256 signature (JWS form: r || s) of `message` with `key`.
    pub fn sign(&self, key: &SigningKey, message: &[u8]) -> Result<Vec<u8>, SignError> {
        let failed = || SignError(key.kid.clone());
        let known = self.0.lock().ok().and_then(|m| m.get(&key.kid).cloned());
        let pair = match known {
            Some(pair) => pair,
            None => {
                let pair = std::sync::Arc::new(
                    EcdsaKeyPair::from_pkcs8(
                        &ECDSA_P256_SHA256_FIXED_SIGNING,
                        &key.private_key,
                        &SystemRandom::new(),
                    )
                    .map_err(|_| failed())?,
                );
                if let Ok(mut map) = self.0.lock() {
                    if map.len() >= MAX_KEY_PAIRS {
                        map.clear();
                    }
                    map.insert(key.kid.clone(), pair.clone());
                }
                pair
            }
        };
        let signature = pair
            .sign(&SystemRandom::new(), message)
            .map_err(|_| failed())?;
        Ok(signature.as_ref().to_vec())
    }
}

/// A new key pair for `audience`, with a random 12-character base64url key id.
pub fn generate(project_id: Uuid, audience: &str, now: i64) -> Result<SigningKey, KeyGenError> {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .map_err(|_| KeyGenError)?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .map_err(|_| KeyGenError)?;
    // Uncompressed SEC1 point: 0x04 || x (32 bytes) || y (32 bytes).
    let point = pair.public_key().as_ref();
    let (x, y) = match point {
        [0x04, rest @ ..] if rest.len() == 64 => rest.split_at(32),
        _ => return Err(KeyGenError),
    };
    let mut kid = [0u8; 9];
    rng.fill(&mut kid).map_err(|_| KeyGenError)?;
    Ok(SigningKey {
        project_id,
        kid: URL_SAFE_NO_PAD.encode(kid),
        audience: audience.to_owned(),
        private_key: pkcs8.as_ref().to_vec(),
        public_x: URL_SAFE_NO_PAD.encode(x),
        public_y: URL_SAFE_NO_PAD.encode(y),
        created_at_millis: now,
    })
}

/// How long a replaced key stays published: every token it signed expires within the access
/// token lifetime of its replacement's creation; a minute more covers clock skew.
pub const RETIRED_AFTER_MILLIS: i64 = (super::tokens::ACCESS_TOKEN_SECONDS + 60) * 1000;

/// The keys to publish at `now`, from all of a project's keys newest first: per audience the
/// newest, and each older one until `RETIRED_AFTER_MILLIS` after the key that replaced it.
pub fn published(keys: Vec<SigningKey>, now: i64) -> Vec<SigningKey> {
    let mut replaced_at: std::collections::HashMap<String, i64> = Default::default();
    keys.into_iter()
        .filter(|k| {
            let keep = replaced_at
                .get(&k.audience)
                .is_none_or(|at| now - at < RETIRED_AFTER_MILLIS);
            replaced_at.insert(k.audience.clone(), k.created_at_millis);
            keep
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaced_keys_stay_published_for_a_token_lifetime() {
        let key = |audience: &str, at: i64| {
            generate(Uuid::nil(), audience, at).unwrap_or_else(|e| panic!("{e}"))
        };
        // Newest first: normal keys made at 3,000,000 and 1,000,000 and 0; one restricted.
        let keys = vec![
            key(AUDIENCE_NORMAL, 3_000_000),
            key(AUDIENCE_NORMAL, 1_000_000),
            key(AUDIENCE_RESTRICTED, 500),
            key(AUDIENCE_NORMAL, 0),
        ];
        let kids = |now| -> Vec<String> {
            published(keys.clone(), now)
                .into_iter()
                .map(|k| k.kid)
                .collect()
        };
        // The key made at 0 was replaced at 1,000,000 and is retired 660 s later.
        assert_eq!(kids(1_000_000 + RETIRED_AFTER_MILLIS - 1).len(), 4);
        assert_eq!(
            kids(1_000_000 + RETIRED_AFTER_MILLIS),
            vec![
                keys[0].kid.clone(),
                keys[1].kid.clone(),
                keys[2].kid.clone()
            ]
        );
        // Long after the last rotation only the newest per audience is left.
        assert_eq!(
            kids(10_000_000),
            vec![keys[0].kid.clone(), keys[2].kid.clone()]
        );
    }

    #[test]
    fn keys_have_spec_shape() {
        let key = generate(Uuid::nil(), AUDIENCE_NORMAL, 1).map_err(|e| e.to_string());
        let key = key.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(key.kid.len(), 12);
        assert_eq!(
            URL_SAFE_NO_PAD.decode(&key.public_x).map(|b| b.len()).ok(),
            Some(32)
        );
        assert_eq!(
            URL_SAFE_NO_PAD.decode(&key.public_y).map(|b| b.len()).ok(),
            Some(32)
        );
    }
}
