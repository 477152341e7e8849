//! Trusted callback and redirect URLs (50 §7).

/// A trusted domain entry: `https://app.example.com`, `https://*.example.com`, with or without
/// a port.
pub fn is_trusted(candidate: &str, allow_localhost: bool, domains: &[String]) -> bool {
    if candidate.contains(char::is_whitespace) {
        return false;
    }
    let Ok(url) = url::Url::parse(candidate) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    if allow_localhost
        && (host == "localhost" || host.ends_with(".localhost") || is_loopback_v4(host))
    {
        return true;
    }
    domains.iter().any(|d| matches_domain(&url, host, d))
}

fn is_loopback_v4(host: &str) -> bool {
    host.parse::<std::net::Ipv4Addr>()
        .is_ok_and(|ip| ip.octets()[0] == 127)
}

fn matches_domain(url: &url::Url, host: &str, domain: &str) -> bool {
    let Some((scheme, rest)) = domain.split_once("://") else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case(url.scheme()) {
        return false;
    }
    let rest = rest.trim_end_matches('/');
    let rest = rest.split('/').next().unwrap_or(rest);
    let (pattern_host, pattern_port) = match rest.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => (h, p.parse::<u16>().ok()),
        _ => (rest, None),
    };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "https" => 443,
        "http" => 80,
        _ => 0,
    };
    let port = url.port_or_known_default().unwrap_or(0);
    if port != pattern_port.unwrap_or(default_port) {
        return false;
    }
    wildcard_match(
        &pattern_host.to_ascii_lowercase(),
        &host.to_ascii_lowercase(),
    )
}

/// `*` matches any run of characters within the host.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            text.starts_with(head)
                && (0..=text.len() - head.len()).any(|i| {
                    text.is_char_boundary(head.len() + i)
                        && wildcard_match(tail, &text[head.len() + i..])
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_rules() {
        let domains = vec![
            "https://app.example.com".to_owned(),
            "https://*.corp.example:8443".to_owned(),
        ];
        assert!(is_trusted(
            "https://app.example.com/cb?x=1",
            false,
            &domains
        ));
        assert!(is_trusted(
            "https://app.example.com:443/cb",
            false,
            &domains
        ));
        assert!(!is_trusted("http://app.example.com/cb", false, &domains));
        assert!(!is_trusted(
            "https://app.example.com:444/cb",
            false,
            &domains
        ));
        assert!(is_trusted("https://a.corp.example:8443/", false, &domains));
        assert!(!is_trusted("https://a.corp.example/", false, &domains));
        assert!(!is_trusted("http://localhost:3000/cb", false, &domains));
        assert!(is_trusted("http://localhost:3000/cb", true, &domains));
        assert!(is_trusted("http://127.0.0.9/cb", true, &domains));
        assert!(!is_trusted("not a url", true, &domains));
        assert!(!is_trusted(
            "https://evil.com/?https://app.example.com",
            false,
            &domains
        ));
    }
}
