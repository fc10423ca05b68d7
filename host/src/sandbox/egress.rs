//! Egress: outgoing HTTP through `wasmtime-wasi-http`, allowed only to the snapshot's MCP
//! servers and counted against the tier's egress ceiling.
//!
//! Every request goes through [`EgressHooks::send_request`] (the `WasiHttpHooks` hook). It is
//! refused (`HTTP-request-denied`) unless its scheme is http(s) and its host and port are those
//! of one of the snapshot's MCP server URLs; it is also refused once the guest has tried to pass the ceiling.
//! Allowed requests are counted — request line and headers, request body, status and response
//! headers, response body — into one [`EgressMeter`] per sandbox. A body that would carry the
//! total past the ceiling is cut with an error at that point, and the meter remembers the breach
//! so the host audits it (`ceiling_exceeded`, `egress_bytes`). Timeouts are capped by the
//! tier's wall clock so a slow server cannot hold a turn past its ceiling.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

/// The egress meter of one sandbox: bytes used over its life, against its ceiling.
#[derive(Debug)]
pub struct EgressMeter {
    used: AtomicU64,
    limit: u64,
    breached: AtomicBool,
}

impl EgressMeter {
    /// A meter allowing `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Self {
            used: AtomicU64::new(0),
            limit,
            breached: AtomicBool::new(false),
        }
    }

    /// Bytes counted so far (never above the limit).
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether the guest tried to pass the ceiling.
    pub fn breached(&self) -> bool {
        self.breached.load(Ordering::Relaxed)
    }

    /// Counts `n` bytes if they fit under the ceiling; otherwise counts nothing, records the
    /// breach and returns false.
    fn take(&self, n: u64) -> bool {
        let fits = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                u.checked_add(n).filter(|&t| t <= self.limit)
            })
            .is_ok();
        if !fits {
            self.breached.store(true, Ordering::Relaxed);
        }
        fits
    }
}

/// The `WasiHttpHooks` of one sandbox.
#[derive(Debug)]
pub struct EgressHooks {
    allowed: BTreeSet<(String, u16)>,
    meter: Arc<EgressMeter>,
    max_wait: Duration,
}

impl EgressHooks {
    /// Hooks allowing the hosts (and ports) of `servers`' URLs, counting into `meter`, with
    /// every network wait capped at `max_wait`.
    pub fn new<'a>(servers: impl IntoIterator<Item = &'a str>, meter: Arc<EgressMeter>, max_wait: Duration) -> Self {
        let allowed = servers
            .into_iter()
            .filter_map(|s| url::Url::parse(s).ok())
            .filter_map(|u| Some((u.host_str()?.to_ascii_lowercase(), u.port_or_known_default()?)))
            .collect();
        Self {
            allowed,
            meter,
            max_wait,
        }
    }

    /// Whether `uri` names an allowed host and port over http(s).
    pub fn allows(&self, uri: &http::Uri) -> bool {
        let port = match uri.scheme_str() {
            Some("http") => 80,
            Some("https") => 443,
            _ => return false,
        };
        let Some(host) = uri.host() else {
            return false;
        };
        let key = (host.to_ascii_lowercase(), uri.port_u16().unwrap_or(port));
        self.allowed.contains(&key)
    }
}

type SendResult = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ),
    HttpError,
>;

impl WasiHttpHooks for EgressHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        drop(fut);
        if !self.allows(request.uri()) {
            tracing::info!(uri = %request.uri(), "egress denied: host not in the snapshot's MCP servers");
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        if self.meter.breached() {
            // The ceiling is over the sandbox's life: after a breach nothing more goes out.
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        let head = head_bytes(
            request.method().as_str().len() + request.uri().to_string().len(),
            request.headers(),
        );
        if !self.meter.take(head) {
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        let cap = |t: Option<Duration>| Some(t.map_or(self.max_wait, |t| t.min(self.max_wait)));
        let options = options.unwrap_or_default();
        let options = RequestOptions {
            connect_timeout: cap(options.connect_timeout),
            first_byte_timeout: cap(options.first_byte_timeout),
            between_bytes_timeout: cap(options.between_bytes_timeout),
        };
        let meter = self.meter.clone();
        let (parts, body) = request.into_parts();
        let request = http::Request::from_parts(
            parts,
            Counted {
                inner: body,
                meter: meter.clone(),
                cut: HttpError::HttpRequestBodySize(Some(meter.limit)),
            }
            .boxed_unsync(),
        );
        Box::new(async move {
            let (response, io) = wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
            let (parts, body) = response.into_parts();
            if !meter.take(head_bytes(16, &parts.headers)) {
                return Err(HttpError::HttpResponseHeaderSectionSize(None));
            }
            let body = Counted {
                inner: body.boxed_unsync(),
                meter: meter.clone(),
                cut: HttpError::HttpResponseBodySize(Some(meter.limit)),
            };
            Ok((
                http::Response::from_parts(parts, body.boxed_unsync()),
                Box::new(io) as Box<dyn Future<Output = Result<(), HttpError>> + Send>,
            ))
        })
    }
}

/// Bytes of a request or status line of `line` bytes and its headers, as sent on the wire.
fn head_bytes(line: usize, headers: &http::HeaderMap) -> u64 {
    let fields: usize = headers.iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum();
    (line + fields + 4) as u64
}

/// A body whose data frames are counted into the meter; the frame that would pass the ceiling
/// is replaced by `cut`.
struct Counted {
    inner: WasiBody,
    meter: Arc<EgressMeter>,
    cut: HttpError,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                let n = frame.data_ref().map_or(0, |d| d.len() as u64);
                if self.meter.take(n) {
                    Poll::Ready(Some(Ok(frame)))
                } else {
                    let cut = std::mem::replace(&mut self.cut, HttpError::HttpRequestDenied);
                    Poll::Ready(Some(Err(cut)))
                }
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_only_the_servers_hosts_and_ports() {
        let meter = Arc::new(EgressMeter::new(100));
        let hooks = EgressHooks::new(
            ["https://inventory.example.com/mcp", "http://127.0.0.1:8080/x"],
            meter,
            Duration::from_secs(1),
        );
        let ok = |u: &str| hooks.allows(&u.parse().unwrap());
        assert!(ok("https://inventory.example.com/other"));
        assert!(ok("https://INVENTORY.example.com:443/"));
        assert!(ok("http://127.0.0.1:8080/"));
        assert!(!ok("http://inventory.example.com/"), "another port");
        assert!(!ok("http://127.0.0.1:8081/"));
        assert!(!ok("http://localhost:8080/"), "another name for the same address");
        assert!(!ok("https://evil.example.com/"));
        assert!(!ok("ftp://inventory.example.com/"));
    }

    #[test]
    fn the_meter_counts_up_to_the_ceiling_and_remembers_a_breach() {
        let m = EgressMeter::new(10);
        assert!(m.take(6));
        assert!(!m.take(5));
        assert!(m.breached());
        assert_eq!(m.used(), 6);
        assert!(m.take(4));
        assert_eq!(m.used(), 10);
    }
}
