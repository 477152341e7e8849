//! Forged access tokens: every way of making the gateway trust a token it did not issue is
//! refused, on the embedded and the distributed stack.

use base64::Engine;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

const B64: base64::engine::general_purpose::GeneralPurpose =
    base64::engine::general_purpose::URL_SAFE_NO_PAD;

fn sign_hs256(header: &Value, claims: &str, secret: &[u8]) -> String {
    let signing_input = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims));
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let tag = ring::hmac::sign(&key, signing_input.as_bytes());
    format!("{signing_input}.{}", B64.encode(tag.as_ref()))
}

/// An ES256 token signed by a key the project never had.
fn foreign_es256(kid: &str, claims: &str) -> String {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        &rng,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    let claims: Value = serde_json::from_str(claims).unwrap_or_else(|e| panic!("{e}"));
    jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_ec_der(pkcs8.as_ref()),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn refused(app: &TestApp, what: &str, token: &str, code: &str) {
    for path in ["/api/v1/users/me", "/api/v1/"] {
        let res = send(
            app.as_("client", Method::GET, path)
                .header("x-service-access-token", token),
        )
        .await;
        let (status, body, _) = parts(res).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (401, Some(code)),
            "{what} on {path}: {body}"
        );
    }
}

both_modes!(ignored every_forgery_is_refused, |app: &TestApp| async move {
    let p = &app.project;
    let user = app
        .sign_up(&email("forged"), "correct horse battery staple")
        .await;
    let good = user.access.clone();
    let ok_me = send(
        app.as_("client", Method::GET, "/api/v1/users/me")
            .header("x-service-access-token", &good),
    )
    .await;
    assert_eq!(ok_me.status(), 200, "the genuine token works");

    let segments: Vec<&str> = good.split('.').collect();
    let header: Value = serde_json::from_slice(&B64.decode(segments[0]).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}"));
    let kid = header["kid"].as_str().unwrap_or_default().to_owned();
    let claims = String::from_utf8(B64.decode(segments[1]).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}"));

    // The public key as an attacker would find it: the JWKS entry, in every encoding an HMAC
    // confusion could use.
    let jwks = ok(
        send(app.get(&format!(
            "/api/v1/projects/{}/.well-known/jwks.json",
            p.id
        )))
        .await,
        200,
    )
    .await;
    let jwk = jwks["keys"]
        .as_array()
        .and_then(|keys| keys.iter().find(|k| k["kid"] == kid.as_str()))
        .unwrap_or_else(|| panic!("kid {kid} not in {jwks}"))
        .clone();
    let coordinate = |name: &str| B64.decode(jwk[name].as_str().unwrap_or_default()).unwrap_or_default();
    let mut point = vec![4u8];
    point.extend(coordinate("x"));
    point.extend(coordinate("y"));
    let mut spki = hex_bytes("3059301306072a8648ce3d020106082a8648ce3d030107034200");
    spki.extend(&point);
    let pem = format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(&spki)
    );
    let hs_header = json!({ "alg": "HS256", "typ": "JWT", "kid": kid });
    let mut forgeries: Vec<(String, String, &str)> = Vec::new();
    for (encoding, secret) in [
        ("PEM", pem.into_bytes()),
        ("SPKI DER", spki.clone()),
        ("SEC1 point", point.clone()),
        ("JWK JSON", jwk.to_string().into_bytes()),
    ] {
        forgeries.push((
            format!("HS256 keyed with the public key ({encoding})"),
            sign_hs256(&hs_header, &claims, &secret),
            "UNPARSABLE_ACCESS_TOKEN",
        ));
    }
    for alg in ["none", "None", "NONE"] {
        let none = json!({ "alg": alg, "typ": "JWT", "kid": kid });
        forgeries.push((
            format!("alg {alg}"),
            format!("{}.{}.", B64.encode(none.to_string()), segments[1]),
            "UNPARSABLE_ACCESS_TOKEN",
        ));
    }
    forgeries.push((
        "unknown kid".into(),
        foreign_es256("kid-the-project-never-had", &claims),
        "UNPARSABLE_ACCESS_TOKEN",
    ));
    forgeries.push((
        "the project's kid, another key".into(),
        foreign_es256(&kid, &claims),
        "UNPARSABLE_ACCESS_TOKEN",
    ));
    let other_user = uuid::Uuid::new_v4().to_string();
    forgeries.push((
        "tampered payload (sub)".into(),
        format!(
            "{}.{}.{}",
            segments[0],
            B64.encode(claims.replace(&user.user_id, &other_user)),
            segments[2]
        ),
        "UNPARSABLE_ACCESS_TOKEN",
    ));
    forgeries.push((
        "tampered payload (exp pushed out)".into(),
        format!(
            "{}.{}.{}",
            segments[0],
            B64.encode(claims.replace("\"exp\":", "\"exp\":9999999999,\"was\":")),
            segments[2]
        ),
        "UNPARSABLE_ACCESS_TOKEN",
    ));
    forgeries.push((
        "signature of another token".into(),
        format!(
            "{}.{}.{}",
            segments[0],
            segments[1],
            app.mint_token(&p.id, "normal", json!({})).await.split('.').nth(2).unwrap_or_default()
        ),
        "UNPARSABLE_ACCESS_TOKEN",
    ));
    forgeries.push((
        "wrong audience".into(),
        app.mint_token(&p.id, "normal", json!({ "sub": user.user_id, "aud": "another-project" }))
            .await,
        "UNPARSABLE_ACCESS_TOKEN",
    ));
    forgeries.push((
        "restricted audience key for a normal token".into(),
        app.mint_token(&p.id, "restricted", json!({ "sub": user.user_id, "aud": p.id, "is_restricted": false }))
            .await,
        "UNPARSABLE_ACCESS_TOKEN",
    ));
    forgeries.push((
        "expired".into(),
        app.mint_token(&p.id, "normal", json!({ "sub": user.user_id, "exp": 1_000_000, "iat": 999_000 }))
            .await,
        "ACCESS_TOKEN_EXPIRED",
    ));
    forgeries.push((
        "truncated".into(),
        good[..good.len() - 10].to_owned(),
        "UNPARSABLE_ACCESS_TOKEN",
    ));
    for (what, token, code) in &forgeries {
        refused(app, what, token, code).await;
    }
    crate::hardening::report(format!("forgeries: {} kinds refused", forgeries.len()));
});

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0))
        .collect()
}
