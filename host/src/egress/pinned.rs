//! Outgoing HTTP connections pinned to an address the operator's policy allows.
//!
//! A guest's request names a host; checking the *name* against an allow-list and letting the
//! HTTP client resolve it again at connect time would let a DNS answer that changes in between
//! (rebinding) reach loopback, a private network or a metadata address. So the host resolves
//! the name once ([`resolve_reachable`]), checks every address against the policy
//! ([`Grants::reachable`](crate::policy::Grants::reachable)), and connects to the first
//! allowed one ([`send_pinned`]); TLS still verifies the certificate against the *name*.
//!
//! [`send_pinned`] is wasmtime-wasi-http 48's `default_send_request` (Apache-2.0 WITH
//! LLVM-exception) with the connection made to a given `SocketAddr` instead of resolving the
//! authority, and without its 600 s default timeouts (the caller always passes them).

use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions};

use crate::policy::Grants;

/// Resolves `host` (a name or an IP literal) and returns the first address the grants allow,
/// with `port`.
///
/// # Errors
///
/// `DnsTimeout` or `DnsError` if the name does not resolve within `timeout`;
/// `DestinationIpProhibited` if no address it resolves to is allowed.
pub(crate) async fn resolve_reachable(
    host: &str,
    port: u16,
    grants: &Grants,
    timeout: Duration,
) -> Result<SocketAddr, Error> {
    let addrs: Vec<SocketAddr> = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => match tokio::time::timeout(timeout, tokio::net::lookup_host((host, port))).await {
            Err(_) => return Err(Error::DnsTimeout),
            Ok(Err(e)) => {
                return Err(Error::DnsError {
                    rcode: Some(e.to_string()),
                    info_code: None,
                });
            }
            Ok(Ok(a)) => a.collect(),
        },
    };
    match addrs.iter().find(|a| grants.reachable(a.ip())) {
        Some(a) => Ok(*a),
        None => {
            tracing::info!(%host, ?addrs, "egress denied: the name resolves only to addresses the policy refuses");
            Err(Error::DestinationIpProhibited)
        }
    }
}

/// Sends `req` over a new connection to `addr` (TLS with `host` as the server name when
/// `use_tls`), waiting at most the timeouts of `options`.
///
/// # Errors
///
/// As `wasmtime_wasi_http::default_send_request`.
pub(crate) async fn send_pinned(
    mut req: Request<impl Body<Data = Bytes, Error = Error> + Send + 'static>,
    addr: SocketAddr,
    host: String,
    use_tls: bool,
    options: RequestOptions,
) -> Result<(Response<Incoming>, impl Future<Output = Result<(), Error>> + Send), Error> {
    let connect_timeout = options.connect_timeout.unwrap_or(Duration::from_secs(10));
    let first_byte_timeout = options.first_byte_timeout.unwrap_or(Duration::from_secs(10));
    let between_bytes_timeout = options
        .between_bytes_timeout
        .unwrap_or(Duration::from_secs(10))
        .max(Duration::from_nanos(1));

    let stream = match tokio::time::timeout(connect_timeout, TcpStream::connect(addr)).await {
        Ok(stream) => stream.map_err(Error::Connect)?,
        Err(_) => return Err(Error::ConnectionTimeout),
    };
    let io: Box<dyn Stream> = if use_tls {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        let config =
            rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|_| Error::TlsProtocolError)?
                .with_root_certificates(roots)
                .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
        let name = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => rustls::pki_types::ServerName::from(ip),
            Err(_) => rustls::pki_types::ServerName::try_from(host).map_err(Error::InvalidDnsNameError)?,
        };
        let tls = tokio::time::timeout(connect_timeout, connector.connect(name, stream))
            .await
            .map_err(|_| Error::ConnectionTimeout)?
            .map_err(Error::Tls)?;
        Box::new(tls)
    } else {
        Box::new(stream)
    };
    let (mut sender, conn) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(io)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)??;

    // The request line carries only the path: the authority is in the Host header.
    *req.uri_mut() = http::Uri::builder()
        .path_and_query(req.uri().path_and_query().map_or("/", |p| p.as_str()))
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;

    let send = async move {
        let res = tokio::time::timeout(first_byte_timeout, sender.send_request(req))
            .await
            .map_err(|_| Error::ConnectionReadTimeout)?
            .map_err(Error::from)?;
        let mut timeout = tokio::time::interval(between_bytes_timeout);
        timeout.reset();
        Ok::<_, Error>(res.map(|incoming| Incoming { incoming, timeout }))
    };
    let mut send = pin!(send);
    let mut conn = Some(conn);
    // Wait for the response while driving the connection's I/O.
    let res = std::future::poll_fn(|cx| match send.as_mut().poll(cx) {
        Poll::Ready(r) => Poll::Ready(r),
        Poll::Pending => {
            let Some(fut) = conn.as_mut() else {
                return Poll::Pending;
            };
            let res = ready!(Pin::new(fut).poll(cx));
            conn = None;
            match res {
                Ok(()) => send.as_mut().poll(cx),
                Err(err) => Poll::Ready(Err(Error::from(err))),
            }
        }
    })
    .await?;
    Ok((res, async move {
        let Some(conn) = conn.take() else {
            return Ok(());
        };
        conn.await.map_err(|err| {
            if err.is_timeout() {
                Error::HttpResponseTimeout
            } else {
                err.into()
            }
        })
    }))
}

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T> Stream for T where T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}

/// A response body that fails when no frame arrives within the between-bytes timeout.
pub(crate) struct Incoming {
    incoming: hyper::body::Incoming,
    timeout: tokio::time::Interval,
}

impl Body for Incoming {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(err))) => Poll::Ready(Some(Err(if err.is_timeout() {
                Error::HttpResponseTimeout
            } else {
                Error::from(err)
            }))),
            Poll::Ready(Some(Ok(frame))) => {
                self.timeout.reset();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(self.timeout.poll_tick(cx));
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.incoming.size_hint()
    }
}
