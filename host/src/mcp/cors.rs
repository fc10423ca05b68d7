//! Cross-origin access for MCP clients that run in a web page, for the origins the operator
//! names (`ahp serve --allow-origin`).
//!
//! A browser lets a page read another origin's answer only if the answer says so (CORS), and
//! asks first (a preflight `OPTIONS`) before it sends `Authorization` or an MCP header. By
//! default ahp says so to no page: no response carries CORS headers, and a preflight, which
//! carries no credential, gets the bearer gate's `401`. Clients outside a browser never
//! needed any of it.
//!
//! The operator may name exact origins ([`BrowserOrigin`], at most [`MAX_ORIGINS`]). A request
//! whose `Origin` is one of them goes through tower-http's CORS layer, in front of the bearer
//! gate: a preflight is answered there (the methods MCP uses and [`REQUEST_HEADERS`]), and the
//! answer to the real request carries `Access-Control-Allow-Origin` and exposes
//! [`EXPOSED_HEADERS`]. The same origins are added to the Origin check the MCP service makes
//! after the gate (rmcp's DNS-rebinding protection), so an allowed origin passes it. A request
//! from any other origin is handled exactly as without the flag: no CORS header, a preflight
//! refused `401`, and a call refused `403` by the Origin check even with a valid key.
//!
//! [`allow`] covers the routes of the router it is given: `ahp serve` gives it both MCP
//! surfaces and their protected-resource metadata, never the console.
//!
//! Exact origins only, no wildcard: the Origin allow-list is also the protection against DNS
//! rebinding, which a wildcard would switch off, and the pages that may call a host are few and
//! known to its operator (an inspector, a web client the operator deploys).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use tower::{Layer, ServiceExt};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// Most `--allow-origin`s: each is compared against every request's `Origin`, and the pages
/// that call one host are a handful (sixteen leaves ample room).
pub const MAX_ORIGINS: usize = 16;

/// Longest origin accepted, in bytes: a scheme, a DNS name (at most 253 bytes) and a port.
pub const MAX_ORIGIN_LEN: usize = 300;

/// The request headers an allowed page may send: the bearer credential, the body's type, and
/// the MCP transport's own headers (the session, the protocol version, the event to resume
/// after, and the method and name the 2026-07-28 protocol mirrors into headers).
pub const REQUEST_HEADERS: [HeaderName; 8] = [
    header::AUTHORIZATION,
    header::CONTENT_TYPE,
    header::ACCEPT,
    HeaderName::from_static("mcp-session-id"),
    HeaderName::from_static("mcp-protocol-version"),
    HeaderName::from_static("last-event-id"),
    HeaderName::from_static("mcp-method"),
    HeaderName::from_static("mcp-name"),
];

/// The response headers an allowed page may read besides the safelisted ones: the session a
/// client must send back, and the challenge that leads it to the authorization server.
pub const EXPOSED_HEADERS: [HeaderName; 2] = [HeaderName::from_static("mcp-session-id"), header::WWW_AUTHENTICATE];

/// How long a browser may reuse a preflight's answer: ten minutes, so a page does not ask
/// before every call, while a changed `--allow-origin` reaches it soon after a restart.
pub const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// The origin of a web page allowed to call the MCP endpoints: `http` or `https`, a host, and a
/// port if not the scheme's default — what a browser sends as `Origin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserOrigin {
    /// As a browser serializes it (`http://localhost:6274`, `https://app.example.com`).
    serialized: String,
    /// The same with its port always spelled out (`https://app.example.com:443`).
    with_port: String,
}

impl BrowserOrigin {
    /// The origin as a browser sends it in `Origin`.
    pub fn as_str(&self) -> &str {
        &self.serialized
    }

    /// The origin with its port spelled out even when it is the scheme's default, for an
    /// allow-list that reads a missing port as "any port" (rmcp's).
    pub fn with_port(&self) -> &str {
        &self.with_port
    }

    /// The origin of `url`, if it is an `http` or `https` URL with a host.
    pub(crate) fn of(url: &url::Url) -> Option<Self> {
        let port = url.port_or_known_default()?;
        let host = url.host_str()?;
        let serialized = url.origin().ascii_serialization();
        (matches!(url.scheme(), "http" | "https") && serialized != "null").then(|| Self {
            with_port: format!("{}://{host}:{port}", url.scheme()),
            serialized,
        })
    }
}

impl std::str::FromStr for BrowserOrigin {
    type Err = String;

    /// Parses `scheme://host[:port]`, with at most a trailing `/`. Scheme and host are
    /// normalized as a browser does (lowercase, the scheme's default port dropped, an
    /// internationalized name in its ASCII form).
    fn from_str(s: &str) -> Result<Self, String> {
        let refuse = |why: &str| {
            Err(format!(
                "{s:?} is not an origin ({why}); write e.g. http://localhost:6274"
            ))
        };
        if s.len() > MAX_ORIGIN_LEN {
            return Err(format!("an origin is at most {MAX_ORIGIN_LEN} bytes, not {}", s.len()));
        }
        if s.contains('*') {
            return refuse("no wildcard: name each origin");
        }
        let Ok(url) = url::Url::parse(s) else {
            return refuse("not a URL");
        };
        if !matches!(url.scheme(), "http" | "https") {
            return refuse("the scheme must be http or https");
        }
        if !url.username().is_empty() || url.password().is_some() {
            return refuse("no credentials");
        }
        // The parser gives `/` for no path at all; a written `/` is accepted as the same.
        if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
            return refuse("no path, query or fragment");
        }
        Self::of(&url).map_or_else(|| refuse("no host"), Ok)
    }
}

impl std::fmt::Display for BrowserOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.serialized)
    }
}

/// The allowed origins and the CORS layer their requests go through.
#[derive(Clone)]
struct Allowed {
    origins: Arc<[HeaderValue]>,
    cors: CorsLayer,
}

/// `router` with CORS for `origins` on each of its routes (see the module doc); `router`
/// unchanged if `origins` is empty.
///
/// # Panics
///
/// Never: a [`BrowserOrigin`] is ASCII, so it is a header value.
pub fn allow(router: axum::Router, origins: &[BrowserOrigin]) -> axum::Router {
    if origins.is_empty() {
        return router;
    }
    let origins: Arc<[HeaderValue]> = origins
        .iter()
        .map(|o| HeaderValue::from_str(o.as_str()).expect("an origin is ASCII"))
        .collect();
    let cors = CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins.iter().cloned()))
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers(REQUEST_HEADERS)
        .expose_headers(EXPOSED_HEADERS)
        .max_age(PREFLIGHT_MAX_AGE);
    router.route_layer(middleware::from_fn_with_state(Allowed { origins, cors }, steer))
}

/// A request from an allowed origin goes through the CORS layer; any other one past it.
async fn steer(State(allowed): State<Allowed>, req: Request, next: Next) -> Response {
    let listed = req
        .headers()
        .get(header::ORIGIN)
        .is_some_and(|origin| allowed.origins.contains(origin));
    if !listed {
        return next.run(req).await;
    }
    match allowed.cors.layer(next).oneshot(req).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<BrowserOrigin, String> {
        s.parse()
    }

    #[test]
    fn an_origin_is_kept_as_a_browser_sends_it() {
        for (given, sent, with_port) in [
            (
                "http://localhost:6274",
                "http://localhost:6274",
                "http://localhost:6274",
            ),
            (
                "http://127.0.0.1:6274/",
                "http://127.0.0.1:6274",
                "http://127.0.0.1:6274",
            ),
            (
                "HTTP://LocalHost:6274",
                "http://localhost:6274",
                "http://localhost:6274",
            ),
            (
                "https://app.example.com",
                "https://app.example.com",
                "https://app.example.com:443",
            ),
            (
                "https://app.example.com:443",
                "https://app.example.com",
                "https://app.example.com:443",
            ),
            ("http://localhost:80", "http://localhost", "http://localhost:80"),
            ("http://[::1]:6274", "http://[::1]:6274", "http://[::1]:6274"),
            (
                "https://bücher.example",
                "https://xn--bcher-kva.example",
                "https://xn--bcher-kva.example:443",
            ),
        ] {
            let origin = parse(given).unwrap_or_else(|e| panic!("{given}: {e}"));
            assert_eq!((origin.as_str(), origin.with_port()), (sent, with_port), "{given}");
        }
    }

    #[test]
    fn anything_but_an_exact_origin_is_refused() {
        for given in [
            "",
            "*",
            "null",
            "http://*",
            "https://*.example.com",
            "http://localhost:*",
            "localhost:6274",
            "127.0.0.1:6274",
            "file:///tmp",
            "ftp://example.com",
            "ws://localhost:6274",
            "http://",
            "http://localhost:6274/inspector",
            "http://localhost:6274//",
            "http://localhost:6274?x=1",
            "http://localhost:6274#x",
            "http://user@localhost:6274",
            "http://user:secret@localhost:6274",
            "http://localhost:65536",
        ] {
            assert!(parse(given).is_err(), "{given:?} was accepted");
        }
        // The longest accepted origin, and one byte more.
        let host: String = (0..MAX_ORIGIN_LEN - "https://".len())
            .map(|i| if i % 50 == 49 { '.' } else { 'a' })
            .collect();
        let longest = format!("https://{host}");
        assert_eq!(parse(&longest).unwrap().as_str(), longest);
        let one_past = format!("{longest}a");
        assert!(parse(&one_past).unwrap_err().contains("at most 300 bytes"));
    }
}
