//! The HTTP sender under the host's MCP client: rmcp's Streamable HTTP client transport is
//! generic over [`StreamableHttpClient`], and [`EgressClient`] implements it over the same
//! pinned, policy-checked, byte-counted path a guest's `wasi:http` request takes
//! (`crate::egress`, `egress::pinned`) — never over an HTTP client that resolves names itself.
//!
//! Each request goes to one granted server only (its origin fixed when the client is made); the
//! name is resolved once and the connection made to an address the policy allows; the server's
//! credential is set by the host exactly as egress sets it (replacing any value); the request,
//! the response head and every body byte are counted into the sandbox's egress meter; each
//! response body is read up to [`MAX_RESPONSE_BYTES`] and no wait on the network lasts longer
//! than the client's `wait`. The host opens no standing stream (`get_stream` answers that the
//! server has none): a server's messages reach it only in answer to a request.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue, Method, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorData, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{EVENT_STREAM_MIME_TYPE, HEADER_SESSION_ID, JSON_MIME_TYPE};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;
use wasmtime_wasi_http::RequestOptions;

use crate::egress::pinned;
use crate::egress::{CredentialSource, EgressMeter, credential_header, head_bytes};
use crate::policy::{Grants, ServerGrant};
use crate::shared_store::StoreLock;

/// Most bytes of one HTTP response body the host reads from an MCP server: the bound of a
/// tool's result (4 MiB, see `wit/agent.wit`) plus room for its JSON-RPC envelope. Past it the
/// body fails and the call ends as `too-large`; nothing beyond it is buffered.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024 + 64 * 1024;

/// Most bytes of an error response's body kept for the message.
const MAX_ERROR_BODY_BYTES: usize = 4 * 1024;

/// Why a request to an MCP server failed in the sender.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The host refused to send it: the egress ceiling is reached, or the server's credential
    /// is unavailable.
    #[error("refused: {0}")]
    Refused(String),
    /// The network failed or timed out (resolution, connection, TLS, a read).
    #[error("network: {0}")]
    Network(String),
    /// The server sent more than [`MAX_RESPONSE_BYTES`] in one response.
    #[error("the server sent more than {MAX_RESPONSE_BYTES} bytes in one response")]
    TooLarge,
    /// The request could not be built.
    #[error("request: {0}")]
    Request(String),
}

impl From<ClientError> for StreamableHttpError<ClientError> {
    fn from(e: ClientError) -> Self {
        StreamableHttpError::Client(e)
    }
}

/// What went wrong in the sender during a call, remembered so the caller can tell a flood or a
/// refusal from a protocol error (rmcp's errors carry ours only as text).
#[derive(Debug, Default)]
pub struct Trouble {
    too_large: AtomicBool,
    refused: AtomicBool,
}

impl Trouble {
    /// Whether a response passed [`MAX_RESPONSE_BYTES`].
    pub fn too_large(&self) -> bool {
        self.too_large.load(Ordering::Relaxed)
    }

    /// Whether the host refused to send a request (egress ceiling, credential).
    pub fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }
}

/// A [`StreamableHttpClient`] to one granted MCP server through the sandbox's egress path.
#[derive(Clone)]
pub struct EgressClient {
    inner: Arc<Inner>,
}

struct Inner {
    grant: ServerGrant,
    grants: Arc<Grants>,
    meter: Arc<EgressMeter>,
    credentials: Option<CredentialSource>,
    audited: Arc<Mutex<BTreeSet<String>>>,
    wait: Duration,
    trouble: Arc<Trouble>,
}

impl std::fmt::Debug for EgressClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressClient")
            .field("server", &self.inner.grant.origin)
            .finish_non_exhaustive()
    }
}

impl EgressClient {
    /// A sender to the server of `grant` (one of `grants`), counting into `meter`, injecting
    /// its credential from `credentials` (auditing its first use into `audited`), waiting at
    /// most `wait` for any one network step, noting what went wrong in `trouble`.
    pub(crate) fn new(
        grant: ServerGrant,
        grants: Arc<Grants>,
        meter: Arc<EgressMeter>,
        credentials: Option<CredentialSource>,
        audited: Arc<Mutex<BTreeSet<String>>>,
        wait: Duration,
        trouble: Arc<Trouble>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                grant,
                grants,
                meter,
                credentials,
                audited,
                wait,
                trouble,
            }),
        }
    }

    fn refuse(&self, why: impl Into<String>) -> ClientError {
        self.inner.trouble.refused.store(true, Ordering::Relaxed);
        ClientError::Refused(why.into())
    }

    /// Sends one request with `body` to `uri` (which must be on the granted origin): injects
    /// the credential, counts the request and the response head, and returns the response
    /// whose body is counted and capped.
    async fn send(
        &self,
        method: Method,
        uri: &str,
        mut headers: http::HeaderMap,
        body: Bytes,
    ) -> Result<http::Response<Capped>, ClientError> {
        let inner = &*self.inner;
        let parsed: http::Uri = uri
            .parse()
            .map_err(|_| ClientError::Request(format!("{uri:?} is not a URI")))?;
        let origin = &inner.grant.origin;
        if crate::policy::Origin::of_uri(&parsed).as_ref() != Some(origin) {
            return Err(self.refuse(format!("{uri} is not on the granted origin {origin}")));
        }
        if inner.meter.breached() {
            return Err(self.refuse("the tier's egress ceiling is reached"));
        }
        if let Some(rule) = &inner.grant.credential {
            let source = inner.credentials.as_ref().ok_or_else(|| self.refuse("no vault"))?;
            let injected = {
                let mut audited = inner.audited.locked();
                credential_header(source, rule, origin, &mut audited)
            };
            let (name, value) = injected.map_err(|why| self.refuse(format!("the server's credential: {why}")))?;
            headers.insert(name, value);
        }
        let authority = parsed.authority().map(|a| a.as_str().to_owned()).unwrap_or_default();
        headers.insert(
            http::header::HOST,
            HeaderValue::from_str(&authority).map_err(|_| ClientError::Request("bad authority".into()))?,
        );
        let head = head_bytes(method.as_str().len() + uri.len(), &headers);
        if !inner.meter.take(head + body.len() as u64) {
            return Err(self.refuse("the tier's egress ceiling is reached"));
        }
        let mut request = http::Request::builder()
            .method(method)
            .uri(parsed)
            .body(Full::new(body).map_err(|never| match never {}))
            .map_err(|e| ClientError::Request(e.to_string()))?;
        *request.headers_mut() = headers;
        let options = RequestOptions {
            connect_timeout: Some(inner.wait),
            first_byte_timeout: Some(inner.wait),
            between_bytes_timeout: Some(inner.wait),
        };
        let network = |e: wasmtime_wasi_http::Error| ClientError::Network(format!("{e:?}"));
        let addr = pinned::resolve_reachable(&origin.host, origin.port, &inner.grants, inner.wait)
            .await
            .map_err(network)?;
        let (response, io) = pinned::send_pinned(request, addr, origin.host.clone(), origin.scheme == "https", options)
            .await
            .map_err(network)?;
        // The connection's I/O runs beside the body and stops when the body is dropped.
        let conn = tokio::spawn(async move {
            let _ = io.await;
        });
        let (parts, body) = response.into_parts();
        if !inner.meter.take(head_bytes(16, &parts.headers)) {
            conn.abort();
            return Err(self.refuse("the tier's egress ceiling is reached"));
        }
        let body = Capped {
            inner: body,
            meter: inner.meter.clone(),
            left: MAX_RESPONSE_BYTES,
            trouble: inner.trouble.clone(),
            _conn: AbortOnDrop(conn),
        };
        Ok(http::Response::from_parts(parts, body))
    }

    fn headers(
        session_id: Option<&str>,
        custom: HashMap<HeaderName, HeaderValue>,
        accept: &'static str,
    ) -> Result<http::HeaderMap, ClientError> {
        let mut headers = http::HeaderMap::new();
        for (name, value) in custom {
            headers.insert(name, value);
        }
        headers.insert(http::header::ACCEPT, HeaderValue::from_static(accept));
        if let Some(sid) = session_id {
            headers.insert(
                HEADER_SESSION_ID,
                HeaderValue::from_str(sid).map_err(|_| ClientError::Request("bad session id".into()))?,
            );
        }
        Ok(headers)
    }
}

/// Stops a spawned connection task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A response body counted into the egress meter and cut after [`MAX_RESPONSE_BYTES`].
pub(crate) struct Capped {
    inner: pinned::Incoming,
    meter: Arc<EgressMeter>,
    left: usize,
    trouble: Arc<Trouble>,
    /// Held for its drop: the connection stops with the body.
    _conn: AbortOnDrop,
}

impl Body for Capped {
    type Data = Bytes;
    type Error = ClientError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, ClientError>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let n = frame.data_ref().map_or(0, Bytes::len);
                if n > self.left {
                    self.trouble.too_large.store(true, Ordering::Relaxed);
                    self.left = 0;
                    return Poll::Ready(Some(Err(ClientError::TooLarge)));
                }
                if !self.meter.take(n as u64) {
                    self.trouble.refused.store(true, Ordering::Relaxed);
                    return Poll::Ready(Some(Err(ClientError::Refused(
                        "the tier's egress ceiling is reached".into(),
                    ))));
                }
                self.left -= n;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(ClientError::Network(format!("{e:?}"))))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Reads all of `body` (it is capped already).
async fn read_all(body: Capped) -> Result<Bytes, ClientError> {
    Ok(body.collect().await?.to_bytes())
}

/// Reads at most `max` bytes of `body`, for an error message.
async fn read_prefix(mut body: Capped, max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < max {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(d) = frame.data_ref() {
                    out.extend_from_slice(&d[..d.len().min(max - out.len())]);
                }
            }
            _ => break,
        }
    }
    out
}

fn media_type_is(value: Option<&HeaderValue>, wanted: &str) -> bool {
    value
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case(wanted))
}

/// A sessionless `server/discover` refused with a 4xx is how a server of the older era answers:
/// hand rmcp's lifecycle the server's JSON-RPC error (or an `invalid_request`), correlated with
/// the request, so it falls back to `initialize` (as rmcp's own senders do).
fn legacy_discover_response(
    message: &ClientJsonRpcMessage,
    session_attached: bool,
    status: StatusCode,
    body: &[u8],
) -> Option<StreamableHttpPostResponse> {
    if session_attached
        || !status.is_client_error()
        || matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
    {
        return None;
    }
    let ClientJsonRpcMessage::Request(request) = message else {
        return None;
    };
    if !matches!(request.request, ClientRequest::DiscoverRequest(_)) {
        return None;
    }
    let error = match serde_json::from_slice::<ServerJsonRpcMessage>(body) {
        Ok(ServerJsonRpcMessage::Error(e)) => e.error,
        _ => ErrorData::invalid_request(format!("server/discover rejected with HTTP {status}"), None),
    };
    Some(StreamableHttpPostResponse::Json(
        ServerJsonRpcMessage::error(error, Some(request.id.clone())),
        None,
    ))
}

impl StreamableHttpClient for EgressClient {
    type Error = ClientError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<ClientError>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        _max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<ClientError>> {
        self.post_message(uri, message, session_id, auth_header, custom_headers)
            .await
    }

    /// The response limits are ours ([`MAX_RESPONSE_BYTES`] per body, whatever rmcp asks); the
    /// `auth_header` is ignored: the only credential sent is the one the policy binds.
    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        _limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<ClientError>> {
        let body = serde_json::to_vec(&message).map_err(StreamableHttpError::Deserialize)?;
        let mut headers = Self::headers(
            session_id.as_deref(),
            custom_headers,
            "text/event-stream, application/json",
        )?;
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(JSON_MIME_TYPE));
        let session_attached = session_id.is_some();
        let response = self.send(Method::POST, &uri, headers, body.into()).await?;
        let status = response.status();
        let content_type = response.headers().get(http::header::CONTENT_TYPE).cloned();
        let new_session = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                "HTTP {status}: the server refused the host's credential"
            ))));
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_attached {
            return Err(StreamableHttpError::SessionExpired);
        }
        let awaits_no_response = !matches!(message, ClientJsonRpcMessage::Request(_));
        let body = response.into_body();
        if !status.is_success() {
            let prefix = read_prefix(body, MAX_ERROR_BODY_BYTES).await;
            if let Some(r) = legacy_discover_response(&message, session_attached, status, &prefix) {
                return Ok(r);
            }
            if let Ok(error @ JsonRpcMessage::Error(_)) = serde_json::from_slice::<ServerJsonRpcMessage>(&prefix) {
                return Ok(StreamableHttpPostResponse::Json(error, new_session));
            }
            let text = String::from_utf8_lossy(&prefix[..prefix.len().min(512)]).into_owned();
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                "HTTP {status}: {text}"
            ))));
        }
        if awaits_no_response {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if media_type_is(content_type.as_ref(), EVENT_STREAM_MIME_TYPE) {
            let events: BoxStream<'static, Result<Sse, SseError>> = sse_stream::SseStream::new(body).boxed();
            return Ok(StreamableHttpPostResponse::Sse(events, new_session));
        }
        if media_type_is(content_type.as_ref(), JSON_MIME_TYPE) {
            let bytes = read_all(body).await?;
            let parsed = serde_json::from_slice::<ServerJsonRpcMessage>(&bytes).map_err(|e| {
                StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!("not a JSON-RPC message: {e}")))
            })?;
            return Ok(StreamableHttpPostResponse::Json(parsed, new_session));
        }
        Err(StreamableHttpError::UnexpectedContentType(
            content_type.map(|ct| String::from_utf8_lossy(ct.as_bytes()).into_owned()),
        ))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<ClientError>> {
        let headers = Self::headers(Some(&session_id), custom_headers, "application/json")?;
        let response = self.send(Method::DELETE, &uri, headers, Bytes::new()).await?;
        if response.status().is_success() || response.status() == StatusCode::METHOD_NOT_ALLOWED {
            Ok(())
        } else {
            Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                "delete_session returned {}",
                response.status()
            ))))
        }
    }

    /// The host opens no standing stream and resumes none: a server's messages come only in
    /// answer to a request, so nothing a server sends outside a call is held.
    async fn get_stream(
        &self,
        _uri: Arc<str>,
        _session_id: Option<Arc<str>>,
        _last_event_id: Option<String>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<ClientError>> {
        Err(StreamableHttpError::ServerDoesNotSupportSse)
    }
}
