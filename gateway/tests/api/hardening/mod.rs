//! The hardening tier: generated bad input, dependency faults, and the security properties an
//! auth service is trusted for. Every test here is `#[ignore]`d so the everyday suite stays
//! fast; `deploy/hardening.sh` runs them alone and one at a time (faults stop shared servers,
//! timings need a quiet machine). `LATCHKEY_HARDENING_SCALE=N` multiplies the counts.

mod bad_input;
mod contract;
mod enumeration;
mod faults;
mod forgeries;
mod isolation;
mod secrets_at_rest;

/// How many times the default counts to run (`LATCHKEY_HARDENING_SCALE`, at least 1).
pub fn scale() -> usize {
    std::env::var("LATCHKEY_HARDENING_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// Prints one figure of the tier and, when `LATCHKEY_HARDENING_REPORT` names a file
/// (`deploy/hardening.sh` sets it), appends it there, so a run ends with every figure in one
/// place even though passing tests' output is captured.
pub fn report(line: String) {
    eprintln!("{line}");
    if let Ok(path) = std::env::var("LATCHKEY_HARDENING_REPORT") {
        use std::io::Write;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        if let Ok(mut file) = file {
            let _ = writeln!(file, "{line}");
        }
    }
}
