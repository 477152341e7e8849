//! Secrets that must be read back, not just compared (TOTP seeds, webhook signing secrets,
//! private signing keys, OAuth provider tokens and client secrets, SMTP URLs), are stored
//! sealed: AES-256-GCM under a key the operator holds outside the database
//! (`LATCHKEY_SECRETS_KEY`), so a dump or a backup of the database alone reveals none of them.
//! During a rotation the previous key still opens what it sealed, until `latchkey secrets
//! rotate` has sealed everything again under the new one.
//! Secrets that are only compared (keys, refresh tokens, codes) are hashed instead (`crypto`).

use std::sync::Arc;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

/// Marks a sealed value; anything else in a sealed column is a value written before sealing
/// existed and is read as it is (it gets sealed when next written).
const PREFIX: &str = "sealed:v1:";

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("LATCHKEY_SECRETS_KEY must be 32 bytes in standard base64")]
    BadKey,
    #[error("a sealed secret could not be opened (wrong LATCHKEY_SECRETS_KEY or damaged data)")]
    Unopenable,
}

/// Whether a stored value is sealed (rather than a value from before sealing).
pub fn is_sealed(stored: &str) -> bool {
    stored.starts_with(PREFIX)
}

/// The key sealing stored secrets, and while a rotation is under way the one before it, which
/// still opens what it sealed. Cloning shares them.
#[derive(Clone)]
pub struct SecretsKey {
    key: Arc<LessSafeKey>,
    previous: Option<Arc<LessSafeKey>>,
}

impl std::fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretsKey(..)")
    }
}

impl SecretsKey {
    /// The key from its configured form: 32 random bytes in standard base64.
    pub fn from_base64(text: &str) -> Result<Self, SealError> {
        let raw = STANDARD
            .decode(text.trim())
            .map_err(|_| SealError::BadKey)?;
        let unbound = UnboundKey::new(&AES_256_GCM, &raw).map_err(|_| SealError::BadKey)?;
        Ok(Self {
            key: Arc::new(LessSafeKey::new(unbound)),
            previous: None,
        })
    }

    /// This key, also opening what `previous` (the key before a rotation, configured form)
    /// sealed; new values are sealed with this key only.
    pub fn with_previous(self, previous: &str) -> Result<Self, SealError> {
        let before = Self::from_base64(previous)?;
        Ok(Self {
            previous: Some(before.key),
            ..self
        })
    }

    /// A new random key in its configured form (embedded mode keeps it in its data directory).
    pub fn generate_base64() -> String {
        let mut raw = [0u8; 32];
        SystemRandom::new()
            .fill(&mut raw)
            .unwrap_or_else(|_| panic!("the OS random generator failed"));
        STANDARD.encode(raw)
    }

    /// A new random key held only in memory (tests, benches).
    pub fn generate() -> Self {
        Self::from_base64(&Self::generate_base64())
            .unwrap_or_else(|_| panic!("a generated key is well formed"))
    }

    /// Seals `plain` for one purpose: the purpose is authenticated, so a value sealed as a TOTP
    /// seed cannot be opened as a webhook secret.
    pub fn seal(&self, purpose: &str, plain: &str) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .unwrap_or_else(|_| panic!("the OS random generator failed"));
        let mut data = plain.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(purpose.as_bytes()),
                &mut data,
            )
            .unwrap_or_else(|_| panic!("AES-GCM sealing of a short secret cannot fail"));
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(out))
    }

    /// The plain secret of a stored value (values from before sealing pass through).
    pub fn open(&self, purpose: &str, stored: &str) -> Result<String, SealError> {
        let Some(encoded) = stored.strip_prefix(PREFIX) else {
            return Ok(stored.to_owned());
        };
        let mut raw = URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| SealError::Unopenable)?;
        if raw.len() < NONCE_LEN {
            return Err(SealError::Unopenable);
        }
        let sealed = raw.split_off(NONCE_LEN);
        for key in std::iter::once(&self.key).chain(&self.previous) {
            let nonce =
                Nonce::try_assume_unique_for_key(&raw).map_err(|_| SealError::Unopenable)?;
            let mut data = sealed.clone();
            if let Ok(plain) = key.open_in_place(nonce, Aad::from(purpose.as_bytes()), &mut data) {
                return String::from_utf8(plain.to_vec()).map_err(|_| SealError::Unopenable);
            }
        }
        Err(SealError::Unopenable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SecretsKey {
        SecretsKey::generate()
    }

    #[test]
    fn sealed_values_open_only_with_their_key_and_purpose() {
        let k = key();
        let sealed = k.seal("totp", "JBSWY3DPEHPK3PXP");
        assert!(sealed.starts_with(PREFIX));
        assert!(!sealed.contains("JBSWY3DPEHPK3PXP"));
        assert_ne!(sealed, k.seal("totp", "JBSWY3DPEHPK3PXP"), "nonces repeat");
        assert_eq!(
            k.open("totp", &sealed).ok().as_deref(),
            Some("JBSWY3DPEHPK3PXP")
        );
        assert!(k.open("webhook", &sealed).is_err());
        assert!(key().open("totp", &sealed).is_err());
        let mut tampered = sealed.clone();
        tampered.pop();
        tampered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(k.open("totp", &tampered).is_err());
        assert!(k.open("totp", "sealed:v1:").is_err());
    }

    #[test]
    fn a_rotated_key_still_opens_what_the_previous_one_sealed() {
        let old = SecretsKey::generate_base64();
        let new = SecretsKey::generate_base64();
        let before = SecretsKey::from_base64(&old).unwrap_or_else(|e| panic!("{e}"));
        let sealed = before.seal("totp", "JBSWY3DPEHPK3PXP");
        let rotating = SecretsKey::from_base64(&new)
            .and_then(|k| k.with_previous(&old))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            rotating.open("totp", &sealed).ok().as_deref(),
            Some("JBSWY3DPEHPK3PXP")
        );
        let resealed = rotating.seal("totp", "JBSWY3DPEHPK3PXP");
        let after = SecretsKey::from_base64(&new).unwrap_or_else(|e| panic!("{e}"));
        assert!(after.open("totp", &sealed).is_err(), "the old key is gone");
        assert_eq!(
            after.open("totp", &resealed).ok().as_deref(),
            Some("JBSWY3DPEHPK3PXP")
        );
        assert!(is_sealed(&resealed) && !is_sealed("whsec_abc"));
    }

    #[test]
    fn values_from_before_sealing_pass_through() {
        assert_eq!(
            key().open("totp", "whsec_abc").ok().as_deref(),
            Some("whsec_abc")
        );
    }

    #[test]
    fn keys_must_be_32_bytes_of_base64() {
        assert!(SecretsKey::from_base64("short").is_err());
        assert!(SecretsKey::from_base64(&STANDARD.encode([0u8; 16])).is_err());
        assert!(SecretsKey::from_base64(&STANDARD.encode([7u8; 32])).is_ok());
    }
}
