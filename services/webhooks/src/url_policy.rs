//! Which webhook URLs may be called (80 §7): https (plain http only where the deployment allows
//! it), and never hosts that resolve to loopback, private, link-local, CGNAT or multicast
//! addresses unless the deployment allows those ranges. Checked at registration and again at
//! connect time, through a resolver that drops refused addresses, so a name that later points
//! inside the network still cannot be reached.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlPolicy {
    pub allow_http: bool,
    pub allow_loopback: bool,
    pub allow_private: bool,
}

impl UrlPolicy {
    /// Production default: https to public addresses only.
    pub const STRICT: Self = Self {
        allow_http: false,
        allow_loopback: false,
        allow_private: false,
    };
    /// The embedded default: local receivers work, the rest of the private network does not.
    pub const EMBEDDED: Self = Self {
        allow_http: true,
        allow_loopback: true,
        allow_private: false,
    };
}

/// Why an address is special, if it is.
fn range_of(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => range_of_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => range_of_v4(v4),
            None => range_of_v6(v6),
        },
    }
}

/// The IPv4 address an IPv6 address stands for: mapped (`::ffff:a.b.c.d`), compatible
/// (`::a.b.c.d`), NAT64 (`64:ff9b::/96`) and 6to4 (`2002:AABB:CCDD::/48`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(low),
        [0, 0, 0, 0, 0, 0, _, _] if !ip.is_loopback() && !ip.is_unspecified() => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        [0x2002, a, b, ..] => Some(Ipv4Addr::new(
            (a >> 8) as u8,
            a as u8,
            (b >> 8) as u8,
            b as u8,
        )),
        _ => None,
    }
}

fn range_of_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(match () {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_private() => "private",
        _ if ip.is_link_local() => "link-local",
        _ if a == 100 && (64..128).contains(&b) => "CGNAT",
        _ if ip.is_multicast() => "multicast",
        _ if ip.is_unspecified() || a == 0 => "unspecified",
        _ if ip.is_broadcast() || a >= 240 => "reserved",
        _ => return None,
    })
}

fn range_of_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    Some(match () {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() => "unspecified",
        _ if first & 0xfe00 == 0xfc00 => "private",
        _ if first & 0xffc0 == 0xfe80 => "link-local",
        _ if first & 0xffc0 == 0xfec0 => "private",
        _ if ip.is_multicast() => "multicast",
        _ => return None,
    })
}

impl UrlPolicy {
    /// Whether the deployment lets webhooks reach `ip`; the reason when not.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), String> {
        match range_of(ip) {
            None => Ok(()),
            Some("loopback") if self.allow_loopback => Ok(()),
            Some("private" | "CGNAT" | "link-local") if self.allow_private => Ok(()),
            Some(range) => Err(format!("{ip} is a {range} address")),
        }
    }

    /// Scheme and shape, without resolving.
    pub fn check_syntax(&self, text: &str) -> Result<url::Url, String> {
        let url = url::Url::parse(text).map_err(|e| format!("not a URL: {e}"))?;
        match url.scheme() {
            "https" => {}
            "http" if self.allow_http => {}
            "http" => return Err("https is required".into()),
            other => return Err(format!("the {other} scheme is not allowed")),
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err("the URL has no host".into());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("credentials in the URL are not allowed".into());
        }
        Ok(url)
    }

    /// The full check at registration: every address the host resolves to must be allowed.
    pub async fn check(&self, text: &str) -> Result<(), String> {
        let url = self.check_syntax(text)?;
        let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']);
        let port = url.port_or_known_default().unwrap_or(443);
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("{host} does not resolve: {e}"))?
            .collect();
        if addrs.is_empty() {
            return Err(format!("{host} does not resolve"));
        }
        addrs.iter().try_for_each(|a| self.check_ip(a.ip()))
    }
}

/// A resolver for the delivery client that only yields allowed addresses.
pub struct SafeResolver(pub UrlPolicy);

impl reqwest::dns::Resolve for SafeResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| policy.check_ip(a.ip()).is_ok())
                .collect();
            if found.is_empty() {
                return Err(format!("{host} resolves to no allowed address").into());
            }
            let addrs: reqwest::dns::Addrs = Box::new(found.into_iter());
            Ok(addrs)
        })
    }
}

pub fn resolver(policy: UrlPolicy) -> Arc<SafeResolver> {
    Arc::new(SafeResolver(policy))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|_| panic!("{s}"))
    }

    #[test]
    fn names_the_refused_ranges() {
        for (addr, range) in [
            ("127.0.0.1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("100.64.0.1", "CGNAT"),
            ("224.0.0.1", "multicast"),
            ("0.0.0.0", "unspecified"),
            ("::1", "loopback"),
            ("fd00::1", "private"),
            ("fe80::1", "link-local"),
            ("ff02::1", "multicast"),
            ("::ffff:10.0.0.1", "private"),
            ("::10.0.0.1", "private"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("2002:7f00:1::1", "loopback"),
            ("fec0::1", "private"),
        ] {
            assert_eq!(range_of(ip(addr)), Some(range), "{addr}");
        }
        assert_eq!(range_of(ip("93.184.216.34")), None);
        assert_eq!(range_of(ip("2606:2800:220:1::1")), None);
    }

    #[test]
    fn the_policy_decides_per_range() {
        assert!(UrlPolicy::STRICT.check_ip(ip("127.0.0.1")).is_err());
        assert!(UrlPolicy::EMBEDDED.check_ip(ip("127.0.0.1")).is_ok());
        assert!(UrlPolicy::EMBEDDED.check_ip(ip("10.0.0.1")).is_err());
        assert!(UrlPolicy::STRICT
            .check_syntax("http://example.com/")
            .is_err());
        assert!(UrlPolicy::EMBEDDED
            .check_syntax("http://example.com/")
            .is_ok());
        assert!(UrlPolicy::STRICT
            .check_syntax("ftp://example.com/")
            .is_err());
        assert!(UrlPolicy::STRICT
            .check_syntax("https://u:p@example.com/")
            .is_err());
    }

    #[tokio::test]
    async fn resolution_decides_for_names() {
        let refused = UrlPolicy::STRICT.check("https://localhost:9/hook").await;
        assert!(refused.is_err_and(|e| e.contains("loopback")));
        assert!(UrlPolicy::EMBEDDED
            .check("http://localhost:9/hook")
            .await
            .is_ok());
        assert!(UrlPolicy::EMBEDDED
            .check("https://10.0.0.1/hook")
            .await
            .is_err());
    }
}
