//! Which addresses a sandbox may connect to: the ranges refused by default, and the networks
//! the policy allows beyond them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// Whether `ip` may be connected to: inside one of `allowed`, or outside every range refused by
/// default (see the [policy docs](super)). An IPv4-mapped IPv6 address is judged as IPv4.
pub fn reachable(ip: IpAddr, allowed: &[IpNet]) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    allowed.iter().any(|n| n.contains(&ip)) || !refused_by_default(ip)
}

fn refused_by_default(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => v4_refused(a),
        IpAddr::V6(a) => v6_refused(a),
    }
}

fn v4_refused(a: Ipv4Addr) -> bool {
    let [b0, b1, ..] = a.octets();
    a.is_loopback()
        || a.is_private()
        || a.is_link_local()
        || a.is_unspecified()
        || a.is_multicast()
        || a.is_broadcast()
        || a.is_documentation()
        || b0 == 0
        || (b0 == 100 && (64..128).contains(&b1))
        || b0 >= 240
}

fn v6_refused(a: Ipv6Addr) -> bool {
    let s = a.segments();
    a.is_loopback()
        || a.is_unspecified()
        || a.is_multicast()
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        || (s[0] & 0xfe00) == 0xfc00
        // NAT64 (64:ff9b::/96) reaches the embedded IPv4 address: judge that.
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] && v4_refused(Ipv4Addr::new(
            (s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8)))
        || (s[0] == 0x2001 && s[1] == 0x0db8)
}
