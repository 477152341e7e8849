//! Secrets: generation, hashing for storage and constant-time comparison.

use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Crockford base32, lower case (70 §2, §3, §4).
const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// `len` characters of lower-case Crockford base32 from the OS generator (5 bits each, so 45
/// characters carry 225 bits).
pub fn random_base32(len: usize) -> String {
    let mut bytes = vec![0u8; len];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(b & 31)]))
        .collect()
}

/// A new API key: prefix plus 45 base32 characters.
pub fn new_key(prefix: &str) -> String {
    format!("{prefix}{}", random_base32(45))
}

/// SHA-256 of a secret, hex encoded: what gets stored instead of the secret. Enough for secrets
/// of 128+ random bits; passwords use argon2 instead.
pub fn hash_secret(secret: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(secret.as_bytes());
    // Every request with a key hashes it: one allocation, no formatting machinery.
    let mut hex = String::with_capacity(2 * digest.len());
    for b in digest {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 15)]));
    }
    hex
}

/// Compares two secrets (or their hashes) without leaking where they differ.
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_the_spec_shape() {
        let key = new_key("pck_");
        assert_eq!(key.len(), 49);
        assert!(key[4..].bytes().all(|c| ALPHABET.contains(&c)));
        assert_ne!(new_key("pck_"), key);
    }

    #[test]
    fn hashes_are_stable_and_comparisons_exact() {
        assert_eq!(hash_secret("abc"), hash_secret("abc"));
        // Stored hashes are looked up by this exact text: lower-case hex of SHA-256.
        assert_eq!(
            hash_secret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(constant_time_eq("abc", "abc"));
        assert!(!constant_time_eq("abc", "abd"));
        assert!(!constant_time_eq("abc", "abcd"));
    }
}
