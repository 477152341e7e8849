//! Webhook receiver URL validation: never a panic; an accepted URL is https without
//! credentials; an address literal is judged the same in every spelling (an IPv4 address and
//! its IPv6-mapped form), so no spelling slips a loopback or private address through.
#![no_main]

use std::net::{IpAddr, Ipv4Addr};

use latchkey_webhooks::url_policy::UrlPolicy;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let strict = UrlPolicy::STRICT;
    if let Ok(url) = strict.check_syntax(&text) {
        assert_eq!(url.scheme(), "https");
        assert!(url.username().is_empty() && url.password().is_none());
        let ip = match url.host() {
            Some(url::Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
            Some(url::Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
            _ => None,
        };
        if let Some(ip) = ip {
            let verdict = strict.check_ip(ip).is_ok();
            if verdict {
                assert!(!ip.is_loopback() && !ip.is_unspecified() && !ip.is_multicast());
            }
            if let IpAddr::V4(v4) = ip {
                assert_eq!(
                    verdict,
                    strict.check_ip(IpAddr::V6(v4.to_ipv6_mapped())).is_ok()
                );
            }
        }
    }
    if data.len() >= 4 {
        let v4 = Ipv4Addr::new(data[0], data[1], data[2], data[3]);
        let plain = strict.check_ip(IpAddr::V4(v4)).is_ok();
        assert_eq!(
            plain,
            strict.check_ip(IpAddr::V6(v4.to_ipv6_mapped())).is_ok()
        );
        if plain {
            assert!(!v4.is_loopback() && !v4.is_private() && !v4.is_link_local());
        }
    }
});
