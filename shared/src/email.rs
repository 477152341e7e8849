//! E-mail addresses (00 §1, 10 §1.2): normalisation and the two validation strengths.

/// Stored form: trimmed and lower-cased.
pub fn normalize(email: &str) -> String {
    email.trim().to_lowercase()
}

/// Standard format: one `@`, non-empty local part and domain, no spaces or control characters.
pub fn is_valid(email: &str) -> bool {
    let email = email.trim();
    let Some((local, domain)) = email.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && email.len() <= 320
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
        && !domain.contains('@')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
}

/// Strict format (sign-up, OTP): ≤ 256 characters, no leading, trailing or double dots in the
/// local part, and a domain with a dot and a top-level domain of at least two letters.
pub fn is_strict(email: &str) -> bool {
    let email = email.trim();
    if email.chars().count() > 256 || !is_valid(email) {
        return false;
    }
    let Some((local, domain)) = email.rsplit_once('@') else {
        return false;
    };
    let local_ok = !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && !local.contains('@');
    let labels: Vec<&str> = domain.split('.').collect();
    let tld = labels.last().copied().unwrap_or("");
    let domain_ok = labels.len() >= 2
        && labels
            .iter()
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_alphanumeric() || c == '-'))
        && tld.chars().count() >= 2
        && tld.chars().all(char::is_alphabetic);
    local_ok && domain_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strictness_follows_the_spec() {
        assert!(is_strict("Ada@Example.com"));
        for bad in [
            "a@localhost",
            "a@gmail",
            ".a@x.com",
            "a.@x.com",
            "a..b@x.com",
            "a@x.c",
            "a b@x.com",
            "a@x.c0m",
        ] {
            assert!(!is_strict(bad), "{bad}");
        }
        assert!(is_valid("a@localhost"));
        assert!(!is_valid("no-at-sign"));
        assert_eq!(normalize("  Ada@Example.COM "), "ada@example.com");
    }
}
