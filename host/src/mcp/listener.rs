//! The HTTP listener: hyper's HTTP/1 connection loop under the `/mcp` router, with the bounds
//! a server on a network needs and axum's `serve` does not expose.
//!
//! - **Header-read timeout** ([`Limits::header_read_timeout`]): a connection that has not sent
//!   a complete request head this long after the server began waiting for one is closed
//!   (hyper's own timer). This is what ends a slowloris connection trickling header bytes —
//!   and, since the wait for the *next* request's head on a kept-alive connection is timed the
//!   same way, it also bounds how long a connection may sit between requests.
//! - **Request timeout** ([`Limits::request_timeout`]): from a complete head until the
//!   response head, covering a body uploaded slowly and the handler; past it the client gets
//!   `408` and the connection is closed. It must exceed the longest `activate` (the largest
//!   tier's wall clock per turn). Streamed response bodies (SSE) are not cut by it.
//! - **Idle timeout** ([`Limits::idle_timeout`]): a connection on which no handler is working
//!   and no byte has moved either way for this long is closed — a client that stopped reading
//!   a streamed response, or vanished behind a half-open socket.
//! - **Body limit** ([`Limits::max_body_bytes`]): a declared `Content-Length` over it is
//!   answered `413` before any other work; a body that grows past it while being read fails
//!   the read (the router answers `413`).
//! - **Connection limit** ([`Limits::max_connections`]): each connection holds a semaphore
//!   permit; one past the limit is answered `503` with `Retry-After` and closed at once.
//!
//! On shutdown the listener stops accepting, asks every connection to finish its current
//! request and close, and waits at most [`SHUTDOWN_GRACE`] for them.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;
use tower::ServiceExt;

/// Longest a shutdown waits for open connections to finish their current request.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The bounds of one HTTP listener. [`Limits::default`] documents each default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest wait for a complete request head: 10 s, ample for any client on any network
    /// (a head is a few hundred bytes) and short enough that a slowloris holds a slot briefly.
    pub header_read_timeout: Duration,
    /// Longest time from a complete head to the response head: 120 s, above the largest
    /// tier's 90 s wall clock per turn, so an `activate` is never cut short.
    pub request_timeout: Duration,
    /// Longest a connection may sit with no handler working and no byte moving: 60 s, four
    /// times the 15 s keep-alive rmcp sends on its event streams.
    pub idle_timeout: Duration,
    /// Largest request body: [`super::http::MAX_REQUEST_BYTES`], a maximal snapshot plus its
    /// JSON.
    pub max_body_bytes: usize,
    /// Most open connections: 1024, well under the usual 20k–1M descriptor limit and far more
    /// than the orchestrators and consoles of one host need.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(120),
            idle_timeout: Duration::from_secs(60),
            max_body_bytes: super::http::MAX_REQUEST_BYTES,
            max_connections: 1024,
        }
    }
}

/// Serves `router` on `listener` under `limits` until `shutdown` resolves, then drains the open
/// connections (at most [`SHUTDOWN_GRACE`]).
///
/// # Errors
///
/// Never for a single connection's failure (logged and dropped); only if the limits are
/// unusable (a zero timeout or connection limit).
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    if limits.header_read_timeout.is_zero()
        || limits.request_timeout.is_zero()
        || limits.idle_timeout.is_zero()
        || limits.max_connections == 0
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "HTTP timeouts and the connection limit must be above zero",
        ));
    }
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let (stop, stopped) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of descriptors or a connection reset before accept: back off briefly
                    // instead of spinning, as hyper's and axum's loops do.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(%peer, limit = limits.max_connections, "connection refused: at the connection limit");
            refuse(&stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (router, stopped) = (router.clone(), stopped.clone());
        tokio::spawn(async move {
            connection(stream, router, limits, stopped).await;
            drop(permit);
        });
    }
    let _ = stop.send(true);
    // Every connection holds a permit: all of them back means all connections closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, permits.acquire_many(all)).await;
    if drained.is_err() {
        tracing::warn!("shutdown: connections still open after {SHUTDOWN_GRACE:?}; closing them");
    }
    Ok(())
}

/// Answers a connection over the limit with `503` and closes it, without waiting on the peer:
/// one non-blocking write into an empty socket buffer, whatever fits.
fn refuse(stream: &TcpStream) {
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n\
        Content-Type: text/plain\r\nContent-Length: 29\r\n\r\ntoo many connections; retry\r\n";
    let _ = stream.try_write(BUSY);
}

/// What a connection has done lately, shared by its socket and its requests.
struct Activity {
    /// When the connection started.
    epoch: Instant,
    /// Milliseconds after `epoch` of the last byte read or written.
    last_ms: AtomicU64,
    /// Requests whose handler has not yet produced a response head.
    working: AtomicUsize,
}

impl Activity {
    fn new() -> Self {
        Self {
            epoch: Instant::now(),
            last_ms: AtomicU64::new(0),
            working: AtomicUsize::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.epoch + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// Marks a request as being handled until dropped.
struct Working(Arc<Activity>);

impl Working {
    fn start(activity: &Arc<Activity>) -> Self {
        activity.working.fetch_add(1, Ordering::Relaxed);
        Self(activity.clone())
    }
}

impl Drop for Working {
    fn drop(&mut self) {
        self.0.working.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

/// A socket that records when bytes last moved.
struct Tracked {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Tracked {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.touch();
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Serves one connection until it closes, times out, idles out, or the listener stops.
async fn connection(stream: TcpStream, router: axum::Router, limits: Limits, mut stopped: watch::Receiver<bool>) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Tracked {
        inner: stream,
        activity: activity.clone(),
    });
    let per_request = activity.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let working = Working::start(&per_request);
        let router = router.clone();
        async move {
            let response = handle(router, req, limits).await;
            drop(working);
            Ok::<_, Infallible>(response)
        }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    let mut closing = false;
    loop {
        let idle_check = if activity.working.load(Ordering::Relaxed) > 0 {
            Instant::now() + limits.idle_timeout
        } else {
            activity.last() + limits.idle_timeout
        };
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended");
                }
                return;
            }
            () = tokio::time::sleep_until(idle_check), if !closing => {
                let idle = activity.working.load(Ordering::Relaxed) == 0
                    && activity.last() + limits.idle_timeout <= Instant::now();
                if idle {
                    tracing::debug!("closing an idle connection");
                    // Nothing is in flight: there is nothing to finish, so close it outright.
                    return;
                }
            }
            _ = stopped.changed(), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
        }
    }
}

/// One request under the body limit and the request timeout.
async fn handle(router: axum::Router, req: Request<Incoming>, limits: Limits) -> Response<Body> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_body_bytes as u64) {
        return closing(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body over {} bytes", limits.max_body_bytes),
        );
    }
    let req = req.map(|body| Body::new(http_body_util::Limited::new(body, limits.max_body_bytes)));
    match tokio::time::timeout(limits.request_timeout, router.oneshot(req)).await {
        Ok(Ok(response)) => response,
        Ok(Err(never)) => match never {},
        Err(_) => closing(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request was not completed within {}s",
                limits.request_timeout.as_secs_f64()
            ),
        ),
    }
}

/// A plain-text response that closes the connection after it.
fn closing(status: StatusCode, message: String) -> Response<Body> {
    let mut r = Response::new(Body::from(message));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}
