//! E-mail validation and normalisation: never a panic, normalising twice changes nothing, and
//! the strict check never admits what the basic one refuses.
#![no_main]

use latchkey_shared::email::{is_strict, is_valid, normalize};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let normal = normalize(&text);
    assert_eq!(normalize(&normal), normal, "normalize is not idempotent");
    if is_strict(&text) {
        assert!(is_valid(&text), "strict but not valid: {text:?}");
    }
    if is_valid(&text) {
        assert!(normal.contains('@'));
        assert!(!normal.chars().any(char::is_control));
    }
});
