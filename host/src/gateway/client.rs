//! The gateway's HTTP client: one bounded POST to a model's endpoint.
//!
//! Bounded in time and in memory, whatever the provider does: the whole exchange — name lookup,
//! connection, TLS, request, the response to its last byte — ends at one deadline (a provider
//! that hangs or trickles gets [`ClientError::Timeout`]); the response body is read frame by frame
//! and the call fails with [`ClientError::TooLarge`] the moment it passes
//! [`MAX_RESPONSE_BYTES`](super::MAX_RESPONSE_BYTES), dropping the connection, so the host
//! holds at most that bound plus one frame per call (a flood of 100 MB costs the host 8 MiB).
//! The connection task is aborted when the call ends or its future is dropped, so no socket
//! outlives its call.
//!
//! The endpoint is the operator's, so it is reached whatever the guests' network defaults
//! (loopback, a private network); TLS verifies it against the webpki roots, as the sandbox's
//! egress does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderValue, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::{ANTHROPIC_VERSION, CONNECT_TIMEOUT, MAX_RESPONSE_BYTES};
use crate::policy::{ModelRule, Provider};

/// Why a POST to a provider failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The request was never sent: the endpoint did not resolve, refused the connection, failed
    /// TLS, or the key is not a valid header value.
    #[error("the provider could not be reached: {0}")]
    NotSent(String),
    /// The deadline passed; `sent` says whether the request may have reached the provider.
    #[error("the provider did not answer in time")]
    Timeout {
        /// Whether the connection was up when the deadline passed.
        sent: bool,
    },
    /// The response passed the byte bound.
    #[error("the provider's response is larger than {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
    /// The connection failed after the request was sent (a cut response).
    #[error("the provider's response was cut: {0}")]
    Cut(String),
}

impl ClientError {
    /// Whether the request may have reached the provider (so its outcome is unknown).
    pub fn was_sent(&self) -> bool {
        match self {
            Self::NotSent(_) => false,
            Self::Timeout { sent } => *sent,
            Self::TooLarge | Self::Cut(_) => true,
        }
    }
}

/// The URL a request for `model` goes to.
pub(super) fn url(model: &ModelRule) -> String {
    let base = model.endpoint.trim_end_matches('/');
    match model.provider {
        Provider::Openai => format!("{base}/chat/completions"),
        Provider::Anthropic => format!("{base}/messages"),
    }
}

/// Aborts the connection task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// POSTs `body` (JSON) to `model`'s endpoint with `key` as the provider expects, and returns the
/// status and the whole response body, all before `deadline`.
///
/// # Errors
///
/// See [`ClientError`].
pub(super) async fn send(
    model: &ModelRule,
    key: Option<&[u8]>,
    body: Vec<u8>,
    deadline: Instant,
) -> Result<(u16, Vec<u8>), ClientError> {
    let sent = AtomicBool::new(false);
    let exchange = exchange(model, key, body, &sent);
    match tokio::time::timeout_at(deadline.into(), exchange).await {
        Ok(r) => r,
        Err(_) => Err(ClientError::Timeout {
            sent: sent.load(Ordering::Relaxed),
        }),
    }
}

async fn exchange(
    model: &ModelRule,
    key: Option<&[u8]>,
    body: Vec<u8>,
    sent: &AtomicBool,
) -> Result<(u16, Vec<u8>), ClientError> {
    let not_sent = |m: String| ClientError::NotSent(m);
    let url = url::Url::parse(&url(model)).map_err(|e| not_sent(format!("bad endpoint: {e}")))?;
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => return Err(not_sent("the endpoint names no host".into())),
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let mut request = Request::post(url.path())
        .header(
            http::header::HOST,
            url.host_str().map_or(host.clone(), |h| match url.port() {
                Some(p) => format!("{h}:{p}"),
                None => h.to_owned(),
            }),
        )
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::USER_AGENT, concat!("ahp/", env!("CARGO_PKG_VERSION")))
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| not_sent(format!("bad request: {e}")))?;
    let headers = request.headers_mut();
    if model.provider == Provider::Anthropic {
        headers.insert("anthropic-version", HeaderValue::from_static(ANTHROPIC_VERSION));
    }
    if let Some(key) = key {
        let key = key.trim_ascii();
        let (name, value) = match model.provider {
            Provider::Openai => ("authorization", [b"Bearer ".as_slice(), key].concat()),
            Provider::Anthropic => ("x-api-key", key.to_vec()),
        };
        let mut value = HeaderValue::from_bytes(&value)
            .map_err(|_| not_sent("the credential is not a valid header value".into()))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }

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
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
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
            CONNECT_TIMEOUT,
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
    if response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .is_some_and(|n| n > MAX_RESPONSE_BYTES as u64)
    {
        return Err(ClientError::TooLarge);
    }
    let mut body = response.into_body();
    let mut read = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ClientError::Cut(e.to_string()))?;
        if let Some(data) = frame.data_ref() {
            if read.len() + data.len() > MAX_RESPONSE_BYTES {
                return Err(ClientError::TooLarge);
            }
            read.extend_from_slice(data);
        }
    }
    Ok((status, read))
}

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T> Stream for T where T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
