//! A software WebAuthn authenticator for the passkey tests: ES256 keys (ring), "none"
//! attestation, discoverable credentials with a signature counter. It answers the options the
//! gateway hands out with the JSON a browser's `@simplewebauthn/browser` would send back, so the
//! server's verification (webauthn-rs) runs on real signatures.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Flags of authenticator data: user present, user verified, attested credential data.
const UP: u8 = 0x01;
const UV: u8 = 0x04;
const AT: u8 = 0x40;

pub struct Credential {
    pub id: Vec<u8>,
    pub rp_id: String,
    pub user_handle: Vec<u8>,
    key: EcdsaKeyPair,
    pub counter: u32,
}

#[derive(Default)]
pub struct Authenticator {
    pub credentials: Vec<Credential>,
    /// Cleared: answers without user verification, as a bare security key would.
    pub skip_verification: bool,
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn unb64(text: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD
        .decode(text)
        .unwrap_or_else(|e| panic!("base64url {text}: {e}"))
}

/// A string the options must carry.
fn text<'a>(options: &'a Value, pointer: &str) -> &'a str {
    options
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("options without {pointer}: {options}"))
}

/// CBOR major type `major` with argument `n` (RFC 8949 §3).
fn cbor_head(out: &mut Vec<u8>, major: u8, n: usize) {
    let major = major << 5;
    match n {
        0..=23 => out.push(major | n as u8),
        24..=0xff => out.extend([major | 24, n as u8]),
        _ => {
            out.push(major | 25);
            out.extend((n as u16).to_be_bytes());
        }
    }
}

fn cbor_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    cbor_head(out, 2, bytes.len());
    out.extend(bytes);
}

fn cbor_text(out: &mut Vec<u8>, text: &str) {
    cbor_head(out, 3, text.len());
    out.extend(text.as_bytes());
}

/// The credential's public key as a COSE_Key: EC2, ES256, P-256, x, y.
fn cose_key(public: &[u8]) -> Vec<u8> {
    let (x, y) = (&public[1..33], &public[33..65]);
    let mut out = vec![0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21];
    cbor_bytes(&mut out, x);
    out.push(0x22);
    cbor_bytes(&mut out, y);
    out
}

fn client_data(kind: &str, challenge: &str, origin: &str) -> Vec<u8> {
    json!({ "type": kind, "challenge": challenge, "origin": origin, "crossOrigin": false })
        .to_string()
        .into_bytes()
}

impl Authenticator {
    fn flags(&self) -> u8 {
        if self.skip_verification {
            UP
        } else {
            UP | UV
        }
    }

    /// `navigator.credentials.create` for `options` (the page has set `rp.id`) from `origin`.
    pub fn register(&mut self, options: &Value, origin: &str) -> Value {
        let rng = SystemRandom::new();
        let alg = &ECDSA_P256_SHA256_ASN1_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap_or_else(|e| panic!("key: {e}"));
        let key = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng)
            .unwrap_or_else(|e| panic!("key: {e}"));
        let id: Vec<u8> = (0..16).map(|_| rand::random::<u8>()).collect();
        let rp_id = text(options, "/rp/id").to_owned();
        let mut auth_data = Sha256::digest(rp_id.as_bytes()).to_vec();
        auth_data.push(self.flags() | AT);
        auth_data.extend(0u32.to_be_bytes());
        auth_data.extend([0u8; 16]);
        auth_data.extend((id.len() as u16).to_be_bytes());
        auth_data.extend(&id);
        auth_data.extend(cose_key(key.public_key().as_ref()));
        let mut attestation = vec![0xa3];
        cbor_text(&mut attestation, "fmt");
        cbor_text(&mut attestation, "none");
        cbor_text(&mut attestation, "attStmt");
        attestation.push(0xa0);
        cbor_text(&mut attestation, "authData");
        cbor_bytes(&mut attestation, &auth_data);
        let challenge = text(options, "/challenge");
        let client_data = client_data("webauthn.create", challenge, origin);
        self.credentials.push(Credential {
            id: id.clone(),
            rp_id,
            user_handle: unb64(text(options, "/user/id")),
            key,
            counter: 0,
        });
        json!({
            "id": b64(&id),
            "rawId": b64(&id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64(&client_data),
                "attestationObject": b64(&attestation),
                "transports": ["internal"],
            },
            "clientExtensionResults": { "credProps": { "rk": true } },
            "authenticatorAttachment": "platform",
        })
    }

    /// `navigator.credentials.get` with credential `index` for `options` (the page has set
    /// `rpId`) from `origin`; each use advances the credential's counter.
    pub fn sign(&mut self, index: usize, options: &Value, origin: &str) -> Value {
        let flags = self.flags();
        let credential = &mut self.credentials[index];
        credential.counter += 1;
        let rp_id = options["rpId"].as_str().unwrap_or(&credential.rp_id);
        let mut auth_data = Sha256::digest(rp_id.as_bytes()).to_vec();
        auth_data.push(flags);
        auth_data.extend(credential.counter.to_be_bytes());
        let challenge = text(options, "/challenge");
        let client_data = client_data("webauthn.get", challenge, origin);
        let mut signed = auth_data.clone();
        signed.extend(Sha256::digest(&client_data));
        let signature = credential
            .key
            .sign(&SystemRandom::new(), &signed)
            .unwrap_or_else(|e| panic!("signing: {e}"));
        json!({
            "id": b64(&credential.id),
            "rawId": b64(&credential.id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64(&client_data),
                "authenticatorData": b64(&auth_data),
                "signature": b64(signature.as_ref()),
                "userHandle": b64(&credential.user_handle),
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        })
    }
}
