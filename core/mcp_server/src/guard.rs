//! The DNS-rebinding rule every HTTP endpoint applies (`/mcp` through rmcp, `/metrics`,
//! `/ready` and any other path here): on a loopback listener, a `Host` header must name this
//! machine, and an `Origin` header must be one of the accepted origins (this machine's pages,
//! and those of `--allow-origin`). A request without the header passes that part of the rule:
//! a browser always sends `Host`, and sends `Origin` across origins; a balancer's health
//! check (HAProxy's `option httpchk` is HTTP/1.0) may send neither.

use hyper::header::{HeaderMap, HOST, ORIGIN};
use hyper::http::uri::{Authority, Uri};

/// The names of this machine a `Host` header may give on a loopback listener.
const LOCAL_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Why a request's `Host` or `Origin` is refused (the 403's text), if it is.
pub(crate) fn refusal(
    headers: &HeaderMap,
    loopback: bool,
    origins: &[String],
) -> Option<&'static str> {
    if loopback {
        if let Some(host) = headers.get(HOST) {
            let named = host
                .to_str()
                .ok()
                .and_then(|h| Authority::try_from(h).ok())
                .is_some_and(|a| LOCAL_HOSTS.contains(&bare(a.host()).as_str()));
            if !named {
                return Some("Forbidden: Host header is not allowed");
            }
        }
    }
    let origin = headers.get(ORIGIN)?;
    let accepted = origin
        .to_str()
        .ok()
        .and_then(Origin::parse)
        .is_some_and(|o| origins.iter().any(|allowed| o.matches(allowed)));
    (!accepted).then_some("Forbidden: Origin header is not allowed")
}

/// A host name lowercased, an IPv6 address without its brackets.
fn bare(host: &str) -> String {
    host.trim_matches(['[', ']']).to_ascii_lowercase()
}

/// An origin: scheme, host and port (the scheme's default when none is written).
struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl Origin {
    fn parse(text: &str) -> Option<Self> {
        let uri = Uri::try_from(text.trim()).ok()?;
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let authority = uri.authority()?;
        let port = authority.port_u16().or(match scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        });
        let host = bare(authority.host());
        Some(Self { scheme, host, port })
    }

    /// Whether it is `allowed` (`scheme://host:port`, `scheme://host:*` for any port, or
    /// `scheme://host`, any port too, as rmcp reads it).
    fn matches(&self, allowed: &str) -> bool {
        let (base, any_port) = match allowed.trim().strip_suffix(":*") {
            Some(base) => (base, true),
            None => (allowed.trim(), false),
        };
        let Ok(uri) = Uri::try_from(base) else {
            return false;
        };
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            return false;
        };
        let port_ok = any_port
            || authority
                .port_u16()
                .is_none_or(|port| self.port == Some(port));
        scheme.eq_ignore_ascii_case(&self.scheme) && bare(authority.host()) == self.host && port_ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn a_foreign_host_or_origin_is_refused_and_a_missing_one_is_not() {
        let local = ["http://localhost:*".to_owned()];
        let refused = |pairs: &[(&'static str, &str)]| refusal(&headers(pairs), true, &local);
        assert_eq!(refused(&[]), None);
        assert_eq!(refused(&[("host", "127.0.0.1:8080")]), None);
        assert_eq!(refused(&[("host", "[::1]:80")]), None);
        assert_eq!(refused(&[("host", "LOCALHOST")]), None);
        assert!(refused(&[("host", "evil.example")]).is_some());
        assert!(refused(&[("host", "127.0.0.1.evil.example:80")]).is_some());
        assert!(refused(&[("host", "localhost"), ("origin", "http://evil.example")]).is_some());
        assert_eq!(refused(&[("origin", "http://localhost:3000")]), None);
        assert!(refused(&[("origin", "https://localhost:3000")]).is_some());
        // Listening for other machines: any host, the origins still checked.
        let open = |pairs: &[(&'static str, &str)]| refusal(&headers(pairs), false, &local);
        assert_eq!(open(&[("host", "mcp.example.com")]), None);
        assert!(open(&[("origin", "http://evil.example")]).is_some());
        let exact = ["https://app.example.com:443".to_owned()];
        let origin = |o: &str| refusal(&headers(&[("origin", o)]), false, &exact);
        assert_eq!(origin("https://app.example.com"), None);
        assert!(origin("https://app.example.com:8443").is_some());
    }
}
