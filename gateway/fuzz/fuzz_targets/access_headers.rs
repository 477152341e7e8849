//! Access headers (00 §3.1 steps 1–4) from arbitrary header lines: never a panic, and what is
//! read back is what was sent.
#![no_main]

use http::{HeaderMap, HeaderName, HeaderValue};
use latchkey_gateway::access::presented;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut headers = HeaderMap::new();
    for line in data.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        // Short names are expanded to the real ones so the fuzzer reaches them quickly.
        let name: Vec<u8> = match name {
            b"t" => b"x-stack-access-type".to_vec(),
            b"p" => b"x-service-project-id".to_vec(),
            b"k" => b"x-hexclave-secret-server-key".to_vec(),
            b"c" => b"x-stack-publishable-client-key".to_vec(),
            b"a" => b"x-service-access-token".to_vec(),
            other => other.to_vec(),
        };
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&name),
            HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    let first = presented(&headers);
    // Reading is deterministic and everything read back was sent.
    assert_eq!(format!("{first:?}"), format!("{:?}", presented(&headers)));
    if let Ok(Some(p)) = first {
        assert!(matches!(
            p.access_type.as_str(),
            "client" | "server" | "admin"
        ));
        assert!(!p.project_text.is_empty());
        assert!(sent(data, p.project_text));
        for text in [p.key, p.token.ok().flatten()].into_iter().flatten() {
            assert!(text.is_empty() || sent(data, text));
        }
    }
});

fn sent(data: &[u8], text: &str) -> bool {
    data.windows(text.len()).any(|w| w == text.as_bytes())
}
