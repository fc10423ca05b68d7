//! Requests to the operator's own endpoints — a model provider (the gateway), a token issuer's
//! metadata and key set (`mcp::oauth`) — bounded in time and in memory, whatever the server does.
//!
//! The whole exchange — name lookup, connection, TLS, request, the response to its last byte —
//! ends at one deadline (a server that hangs or trickles gets [`ClientError::Timeout`]); the
//! response body is read frame by frame and the call fails with [`ClientError::TooLarge`] the
//! moment it passes the caller's byte bound, dropping the connection, so the host holds at most
//! that bound plus one frame per call. The connection task is aborted when the call ends or its
//! future is dropped, so no socket outlives its call.
//!
//! The endpoint is the operator's, so it is reached whatever the guests' network defaults
//! (loopback, a private network); TLS verifies it against the webpki roots, as the sandbox's
//! egress does. Guests never choose these URLs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Why a request to an operator's endpoint failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The request was never sent: the endpoint did not resolve, refused the connection, failed
    /// TLS, or a header is not a valid header value.
    #[error("the server could not be reached: {0}")]
    NotSent(String),
    /// The deadline passed; `sent` says whether the request may have reached the server.
    #[error("the server did not answer in time")]
    Timeout {
        /// Whether the connection was up when the deadline passed.
        sent: bool,
    },
    /// The response passed the byte bound (`limit` bytes).
    #[error("the server's response is larger than {limit} bytes")]
    TooLarge {
        /// The bound.
        limit: usize,
    },
    /// The connection failed after the request was sent (a cut response).
    #[error("the server's response was cut: {0}")]
    Cut(String),
}

impl ClientError {
    /// Whether the request may have reached the server (so its outcome is unknown).
    pub fn was_sent(&self) -> bool {
        match self {
            Self::NotSent(_) => false,
            Self::Timeout { sent } => *sent,
            Self::TooLarge { .. } | Self::Cut(_) => true,
        }
    }
}

/// One request to an operator's endpoint.
pub(crate) struct Exchange<'a> {
    /// `GET` or `POST`.
    pub method: Method,
    /// Where (`http` or `https`).
    pub url: &'a str,
    /// Headers besides `Host` and `User-Agent`, which are set here.
    pub headers: HeaderMap,
    /// The request body (empty for a `GET`).
    pub body: Vec<u8>,
    /// Most response bytes read.
    pub max_response_bytes: usize,
    /// Longest wait for the connection (and, apart, for the TLS handshake).
    pub connect_timeout: Duration,
}

/// Aborts the connection task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sends `exchange` and returns the status and the whole response body, all before `deadline`.
///
/// # Errors
///
/// See [`ClientError`].
pub(crate) async fn send(exchange: Exchange<'_>, deadline: Instant) -> Result<(u16, Vec<u8>), ClientError> {
    let sent = AtomicBool::new(false);
    match tokio::time::timeout_at(deadline.into(), run(exchange, &sent)).await {
        Ok(r) => r,
        Err(_) => Err(ClientError::Timeout {
            sent: sent.load(Ordering::Relaxed),
        }),
    }
}

async fn run(exchange: Exchange<'_>, sent: &AtomicBool) -> Result<(u16, Vec<u8>), ClientError> {
    let not_sent = |m: String| ClientError::NotSent(m);
    let url = url::Url::parse(exchange.url).map_err(|e| not_sent(format!("bad endpoint: {e}")))?;
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => return Err(not_sent("the endpoint names no host".into())),
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let target = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    };
    let mut request = Request::builder()
        .method(exchange.method)
        .uri(target)
        .header(
            http::header::HOST,
            url.host_str().map_or(host.clone(), |h| match url.port() {
                Some(p) => format!("{h}:{p}"),
                None => h.to_owned(),
            }),
        )
        .header(http::header::USER_AGENT, concat!("ahp/", env!("CARGO_PKG_VERSION")))
        .body(Full::new(Bytes::from(exchange.body)))
        .map_err(|e| not_sent(format!("bad request: {e}")))?;
    request.headers_mut().extend(exchange.headers);

    let connect = async {
        let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| not_sent(format!("{host} does not resolve: {e}")))?
            .collect();
        let mut last = format!("{host} resolves to no address");
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(s) => return Ok(s),
                Err(e) => last = format!("connecting to {addr}: {e}"),
            }
        }
        Err(not_sent(last))
    };
    let stream = tokio::time::timeout(exchange.connect_timeout, connect)
        .await
        .map_err(|_| not_sent("connecting timed out".into()))??;
    let io: Box<dyn Stream> = if url.scheme() == "https" {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| not_sent(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => rustls::pki_types::ServerName::from(ip),
            Err(_) => {
                rustls::pki_types::ServerName::try_from(host.clone()).map_err(|e| not_sent(format!("TLS: {e}")))?
            }
        };
        let tls = tokio::time::timeout(
            exchange.connect_timeout,
            tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, stream),
        )
        .await
        .map_err(|_| not_sent("the TLS handshake timed out".into()))?
        .map_err(|e| not_sent(format!("TLS: {e}")))?;
        Box::new(tls)
    } else {
        Box::new(stream)
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| not_sent(format!("HTTP: {e}")))?;
    let _conn = AbortOnDrop(tokio::spawn(conn).abort_handle());
    sent.store(true, Ordering::Relaxed);
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| ClientError::Cut(e.to_string()))?;
    let status = response.status().as_u16();
    let max = exchange.max_response_bytes;
    if response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .is_some_and(|n| n > max as u64)
    {
        return Err(ClientError::TooLarge { limit: max });
    }
    let mut body = response.into_body();
    let mut read = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ClientError::Cut(e.to_string()))?;
        if let Some(data) = frame.data_ref() {
            if read.len() + data.len() > max {
                return Err(ClientError::TooLarge { limit: max });
            }
            read.extend_from_slice(data);
        }
    }
    Ok((status, read))
}

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T> Stream for T where T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
