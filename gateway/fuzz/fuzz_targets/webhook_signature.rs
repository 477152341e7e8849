//! Webhook signatures: what Latchkey signs always verifies, with any secret, id, timestamp and
//! body; and an arbitrary signature header verifies only if it carries the right entry.
#![no_main]

use latchkey_webhooks::signing::{signature, verify};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 40 {
        return;
    }
    use base64::Engine as _;
    let secret = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(&data[..32])
    );
    let timestamp = i64::from_le_bytes(data[32..40].try_into().expect("8 bytes"));
    let rest = String::from_utf8_lossy(&data[40..]);
    let (id, body) = rest.split_once('\n').unwrap_or((&rest, ""));
    let signed = signature(&[&secret], id, timestamp, body);
    assert!(verify(&secret, id, timestamp, body.as_bytes(), &signed));
    // The input as a header: accepted only when it holds the genuine entry.
    if verify(&secret, id, timestamp, body.as_bytes(), &rest) {
        assert!(rest.split(' ').any(|entry| entry == signed));
    }
    let mut tampered = body.as_bytes().to_vec();
    tampered.push(b'x');
    assert!(!verify(&secret, id, timestamp, &tampered, &signed));
});
