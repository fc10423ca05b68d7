//! An origin — scheme, host and port — what a request must match exactly to reach a server.

use std::fmt;

/// A scheme, host and port: what a request must match exactly.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    /// `http` or `https`.
    pub scheme: String,
    /// The host, lowercase (an IPv6 address without brackets).
    pub host: String,
    /// The port (the scheme's default if the URL has none).
    pub port: u16,
}

impl Origin {
    /// The origin of `url`.
    ///
    /// # Errors
    ///
    /// A sentence saying what is wrong: not a URL, not http(s), no host, user info, a query.
    pub fn parse(url: &str) -> Result<Self, String> {
        let u = url::Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        if !matches!(u.scheme(), "http" | "https") {
            return Err(format!("{url:?} is not an http or https URL"));
        }
        if !u.username().is_empty() || u.password().is_some() || u.query().is_some() || u.fragment().is_some() {
            return Err(format!("{url:?} may not carry user info, a query or a fragment"));
        }
        let host = match u.host() {
            Some(url::Host::Ipv6(a)) => a.to_string(),
            Some(h) => h.to_string().to_ascii_lowercase(),
            None => return Err(format!("{url:?} names no host")),
        };
        let port = u
            .port_or_known_default()
            .ok_or_else(|| format!("{url:?} has no port"))?;
        Ok(Self {
            scheme: u.scheme().to_owned(),
            host,
            port,
        })
    }

    /// The origin a request URI addresses, or `None` if it is not absolute http(s).
    pub fn of_uri(uri: &http::Uri) -> Option<Self> {
        let scheme = uri.scheme_str()?;
        let default = match scheme {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        let host = uri.host()?;
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        Some(Self {
            scheme: scheme.to_owned(),
            host: host.to_ascii_lowercase(),
            port: uri.port_u16().unwrap_or(default),
        })
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "{}://[{}]:{}", self.scheme, self.host, self.port)
        } else {
            write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
        }
    }
}
