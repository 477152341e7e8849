//! RFC 6238 time-based one-time passwords (70 §5): HMAC-SHA-1 over 30-second steps, six
//! digits, accepting the previous and next step for clock skew.

use latchkey_shared::crypto::constant_time_eq;
use ring::hmac;

const STEP_MILLIS: i64 = 30_000;
const DIGITS_MODULUS: u32 = 1_000_000;

/// RFC 4226 HOTP value for `counter`, before formatting.
fn hotp(secret: &[u8], counter: u64) -> u32 {
    let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret);
    let tag = hmac::sign(&key, &counter.to_be_bytes());
    let d = tag.as_ref();
    let offset = usize::from(d[d.len() - 1] & 0x0f);
    let binary = u32::from_be_bytes([
        d[offset] & 0x7f,
        d[offset + 1],
        d[offset + 2],
        d[offset + 3],
    ]);
    binary % DIGITS_MODULUS
}

/// The six-digit code of time step `step`.
pub fn code_at(secret: &[u8], step: i64) -> String {
    format!("{:06}", hotp(secret, step.max(0) as u64))
}

/// The step a submitted code belongs to, among the previous, current and next one; `None` when
/// it matches none. Every candidate is compared, so timing does not say which one matched.
pub fn matching_step(secret: &[u8], code: &str, now_millis: i64) -> Option<i64> {
    if code.len() != 6 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let current = now_millis.div_euclid(STEP_MILLIS);
    let mut found = None;
    for step in [current - 1, current, current + 1] {
        if constant_time_eq(&code_at(secret, step), code) && found.is_none() {
            found = Some(step);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const RFC_SECRET: &[u8] = b"12345678901234567890";

    #[test]
    fn matches_the_rfc_6238_sha1_vectors() {
        // The RFC lists eight digits; six-digit codes are their last six.
        for (seconds, expected) in [
            (59_i64, "287082"),
            (1_111_111_109, "081804"),
            (1_111_111_111, "050471"),
            (1_234_567_890, "005924"),
            (2_000_000_000, "279037"),
        ] {
            assert_eq!(code_at(RFC_SECRET, seconds / 30), expected, "at {seconds}");
        }
    }

    #[test]
    fn accepts_one_step_of_skew_either_way_and_no_more() {
        let now = 1_111_111_109_000;
        let step = now / STEP_MILLIS;
        for delta in [-1, 0, 1] {
            let code = code_at(RFC_SECRET, step + delta);
            assert_eq!(matching_step(RFC_SECRET, &code, now), Some(step + delta));
        }
        for delta in [-2, 2] {
            let code = code_at(RFC_SECRET, step + delta);
            assert_eq!(matching_step(RFC_SECRET, &code, now), None);
        }
        assert_eq!(matching_step(RFC_SECRET, "12345", now), None);
        assert_eq!(matching_step(RFC_SECRET, "abcdef", now), None);
    }
}
