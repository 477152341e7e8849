//! The client address a limit is keyed on: the socket's peer, or, when that peer is a trusted
//! proxy, the nearest address in `X-Forwarded-For` that is not one (so a client cannot choose
//! its own key by sending the header itself).

use std::net::IpAddr;

/// An address range: an address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl std::str::FromStr for Net {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("not an address: {s}"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("bad prefix: {s}"))?,
            None => max,
        };
        Ok(Self { addr, prefix })
    }
}

impl Net {
    fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Parses `LATCHKEY_TRUSTED_PROXIES`: comma-separated addresses or CIDR ranges.
pub fn parse_trusted(text: &str) -> Result<Vec<Net>, String> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(str::parse)
        .collect()
}

pub fn client_ip(peer: IpAddr, forwarded_for: Option<&str>, trusted: &[Net]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|n| n.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    let Some(chain) = forwarded_for else {
        return peer;
    };
    let mut nearest = peer;
    for hop in chain.rsplit(',') {
        match hop.trim().parse::<IpAddr>() {
            Ok(ip) if is_trusted(ip) => nearest = ip,
            Ok(ip) => return ip,
            Err(_) => return nearest,
        }
    }
    nearest
}

/// The key a client address is counted under: IPv6 clients by their /64, since one host
/// commonly holds a whole /64 and could otherwise change address per request.
pub fn subject(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|_| panic!("{s}"))
    }

    #[test]
    fn trusts_forwarded_for_only_from_proxies() {
        let trusted = parse_trusted("10.0.0.0/8, 192.168.1.5").unwrap_or_default();
        // Not from a proxy: the header is ignored.
        assert_eq!(
            client_ip(ip("203.0.113.9"), Some("1.2.3.4"), &trusted),
            ip("203.0.113.9")
        );
        // From a proxy: the nearest untrusted hop, not what the client wrote first.
        assert_eq!(
            client_ip(
                ip("10.1.1.1"),
                Some("6.6.6.6, 198.51.100.7, 10.2.2.2"),
                &trusted
            ),
            ip("198.51.100.7")
        );
        assert_eq!(
            client_ip(ip("192.168.1.5"), None, &trusted),
            ip("192.168.1.5")
        );
        assert_eq!(
            client_ip(ip("192.168.1.6"), Some("1.2.3.4"), &trusted),
            ip("192.168.1.6")
        );
        assert!(parse_trusted("10.0.0.0/40").is_err());
        assert!(parse_trusted("::1, fd00::/8").is_ok_and(|n| n.len() == 2));
        assert_eq!(
            subject(ip("2001:db8:1:2:3:4:5:6")),
            subject(ip("2001:db8:1:2::9"))
        );
        assert_ne!(
            subject(ip("2001:db8:1:2::1")),
            subject(ip("2001:db8:1:3::1"))
        );
        assert_eq!(subject(ip("::ffff:1.2.3.4")), "1.2.3.4");
    }
}
