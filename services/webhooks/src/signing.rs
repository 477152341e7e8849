//! Standard Webhooks signing (60 §3.2): `whsec_` secrets, HMAC-SHA256 over
//! `{id}.{timestamp}.{body}`, sent as space-separated `v1,<base64>` entries.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

const PREFIX: &str = "whsec_";
const SECRET_BYTES: usize = 32;

/// A fresh endpoint secret.
pub fn new_secret() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    // The system generator failing leaves nothing safe to sign with; an all-zero key would
    // be worse than refusing to start the endpoint.
    SystemRandom::new()
        .fill(&mut bytes)
        .unwrap_or_else(|_| panic!("the system random generator failed"));
    format!("{PREFIX}{}", STANDARD.encode(bytes))
}

fn key_of(secret: &str) -> Option<hmac::Key> {
    let raw = STANDARD.decode(secret.strip_prefix(PREFIX)?).ok()?;
    Some(hmac::Key::new(hmac::HMAC_SHA256, &raw))
}

/// The `webhook-signature` value: one entry per secret (two during a rotation).
pub fn signature(secrets: &[&str], id: &str, timestamp: i64, body: &str) -> String {
    let content = format!("{id}.{timestamp}.{body}");
    secrets
        .iter()
        .filter_map(|s| key_of(s))
        .map(|key| {
            format!(
                "v1,{}",
                STANDARD.encode(hmac::sign(&key, content.as_bytes()))
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a `webhook-signature` value holds a `v1` entry `secret` made over this message: what
/// a receiver checks (the timestamp's freshness is the receiver's own policy). The comparison
/// is ring's constant-time HMAC verification.
pub fn verify(secret: &str, id: &str, timestamp: i64, body: &[u8], header: &str) -> bool {
    let Some(key) = key_of(secret) else {
        return false;
    };
    let mut content = format!("{id}.{timestamp}.").into_bytes();
    content.extend_from_slice(body);
    header
        .split(' ')
        .filter_map(|entry| entry.strip_prefix("v1,"))
        .filter_map(|tag| STANDARD.decode(tag).ok())
        .any(|tag| hmac::verify(&key, &content, &tag).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_standard_webhooks_reference_vector() {
        // The example of the Standard Webhooks specification's reference libraries.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&[secret], id, 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn signs_with_every_secret_given() {
        let (a, b) = (new_secret(), new_secret());
        assert!(a.starts_with("whsec_") && a != b);
        let both = signature(&[&a, &b], "msg_1", 1, "{}");
        assert_eq!(both.split(' ').count(), 2);
        assert!(both.starts_with(&signature(&[&a], "msg_1", 1, "{}")));
    }

    #[test]
    fn verifies_its_own_signatures_and_nothing_else() {
        let (a, b) = (new_secret(), new_secret());
        let both = signature(&[&a, &b], "msg_1", 7, "{}");
        assert!(verify(&a, "msg_1", 7, b"{}", &both));
        assert!(verify(&b, "msg_1", 7, b"{}", &both));
        assert!(!verify(&new_secret(), "msg_1", 7, b"{}", &both));
        assert!(!verify(&a, "msg_2", 7, b"{}", &both));
        assert!(!verify(&a, "msg_1", 8, b"{}", &both));
        assert!(!verify(&a, "msg_1", 7, b"{ }", &both));
        assert!(!verify(&a, "msg_1", 7, b"{}", &both.replace("v1,", "v2,")));
        assert!(!verify("not a secret", "msg_1", 7, b"{}", &both));
    }
}
