//! Access-token decoding and verification from arbitrary text: never a panic, and nothing but
//! the one genuinely signed token is ever accepted.
#![no_main]

use std::sync::OnceLock;

use latchkey_gateway::access::token::{check, named};
use latchkey_proto::auth::v1::Jwk;
use libfuzzer_sys::fuzz_target;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use uuid::Uuid;

const PROJECT: &str = "5b0c0a1e-8d0f-4b5e-9f3a-2a6f1c9d7e41";
const URL: &str = "https://auth.example.com";
const NOW: i64 = 1_800_000_000;

struct Fixture {
    jwk: Jwk,
    valid: String,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("key generation");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .expect("key pair");
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let point = pair.public_key().as_ref();
        let jwk = Jwk {
            kid: "fuzz-kid".into(),
            x: b64.encode(&point[1..33]),
            y: b64.encode(&point[33..65]),
            audience: "normal".into(),
            ..Default::default()
        };
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(jwk.kid.clone());
        let claims = serde_json::json!({
            "sub": Uuid::new_v4(), "aud": PROJECT, "iss": format!("{URL}/api/v1/projects/{PROJECT}"),
            "project_id": PROJECT, "exp": NOW + 600, "iat": NOW,
        });
        let valid = jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_ec_der(pkcs8.as_ref()),
        )
        .expect("signing");
        Fixture { jwk, valid }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let project = Uuid::parse_str(PROJECT).expect("uuid");
    assert!(check(&f.valid, &f.jwk, URL, project, NOW).is_ok());
    // Arbitrary text, and the valid token with the input spliced into it.
    let text = String::from_utf8_lossy(data);
    let at = data.first().map_or(0, |b| usize::from(*b)) % f.valid.len();
    let spliced = format!("{}{}{}", &f.valid[..at], text, &f.valid[at..]);
    for token in [text.as_ref(), spliced.as_str()] {
        let _ = named(token);
        if check(token, &f.jwk, URL, project, NOW).is_ok() {
            assert_eq!(token, f.valid, "a token that was never signed was accepted");
        }
    }
});
