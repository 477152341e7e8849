//! The machine's own limits, measured in the same run as the scenarios: argon2id verifications
//! per second at the configured parameters (one task per core, through the same bounded pool
//! the auth service uses), and the time of one ES256 verification.

use std::time::{Duration, Instant};

use latchkey_shared::password::Passwords;

use crate::seed::PASSWORD;
use crate::{cpu, drive};

pub struct Machine {
    pub lanes: usize,
    pub argon2_per_second: f64,
    pub es256_micros: f64,
}

pub async fn measure(duration: Duration) -> anyhow::Result<Machine> {
    Ok(Machine {
        lanes: std::thread::available_parallelism().map_or(1, |n| n.get()),
        argon2_per_second: argon2_per_second(duration).await?.0,
        es256_micros: es256_micros()?,
    })
}

/// Raw argon2id verifications per second on every core, through the same bounded pool the auth
/// service uses, and the machine's CPU per verification meanwhile (this process's lanes are
/// the `raw argon2id: hashing lanes` part).
pub async fn argon2_per_second(duration: Duration) -> anyhow::Result<(f64, cpu::PerRequest)> {
    let lanes = std::thread::available_parallelism().map_or(1, |n| n.get());
    let passwords = Passwords::default();
    let hash = passwords.hash(PASSWORD).await?;
    // Read while the lanes live: an ended thread's time leaves its own line in `/proc`.
    let alive = passwords.clone();
    let meter = cpu::Meter::new(&[("raw argon2id".into(), std::process::id())]);
    let from = meter.read();
    // More callers than lanes, so the pool never waits for the next verification to arrive.
    let argon2 = drive::run(lanes * 4, duration, move |_| {
        let (p, h) = (passwords.clone(), hash.clone());
        async move { p.verify(PASSWORD, Some(&h)).await.unwrap_or(false) }
    })
    .await;
    let spent = meter.per_request(&from, &meter.read(), argon2.per_second);
    drop(alive);
    Ok((argon2.per_second, spent))
}

/// Mean time of one ES256 signature check of a token shaped like Latchkey's access tokens.
fn es256_micros() -> anyhow::Result<f64> {
    use base64::Engine;
    use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
    use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .map_err(|_| anyhow::anyhow!("key generation failed"))?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .map_err(|_| anyhow::anyhow!("key parsing failed"))?;
    let point = pair.public_key().as_ref();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let decoding =
        DecodingKey::from_ec_components(&b64.encode(&point[1..33]), &b64.encode(&point[33..65]))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let claims = serde_json::json!({
        "sub": "01a2020f-c991-7621-aa94-3bbf5388d4c8", "iss": "http://127.0.0.1/api/v1/projects/x",
        "aud": "x", "iat": now, "exp": now + 600, "project_id": "x", "branch_id": "main",
        "refresh_token_id": "y", "role": "authenticated", "name": null, "email": "a@b.c",
        "email_verified": true, "selected_team_id": null, "is_anonymous": false,
    });
    let token = jsonwebtoken::encode(
        &Header::new(Algorithm::ES256),
        &claims,
        &EncodingKey::from_ec_der(pkcs8.as_ref()),
    )?;
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_audience(&["x"]);
    const N: u32 = 2_000;
    let started = Instant::now();
    for _ in 0..N {
        jsonwebtoken::decode::<serde_json::Value>(&token, &decoding, &validation)?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e6 / f64::from(N))
}
