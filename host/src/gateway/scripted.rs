//! A scripted model provider on loopback, speaking OpenAI Chat Completions
//! (`POST /openai/v1/chat/completions`) and Anthropic Messages (`POST /anthropic/v1/messages`)
//! faithfully — non-streaming JSON in each protocol's response shape, tool calls and usage
//! included — with answers a test (or `ahp demo`) scripts, and hostile modes: a provider that
//! hangs, trickles, floods, reports no usage, sends a malformed body or rate-limits.
//!
//! It records every request it receives (the auth headers and the parsed body), so a test can
//! assert what the provider saw: the system prompt, the history, the question, the key.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use ahp_host::gateway::scripted::{Behaviour, ScriptedProvider};
//! let provider = ScriptedProvider::start().await?;
//! provider.push(Behaviour::text("The forecast is 42 units."));
//! let endpoint = provider.openai_endpoint(); // http://127.0.0.1:PORT/openai/v1
//! # let _ = endpoint; Ok(()) }
//! ```

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ahp_store::ModelUsage;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use crate::shared_store::StoreLock;

/// The largest request body the provider accepts: above the gateway's own bound on what it
/// sends (4 MiB of text, JSON-escaped).
pub const MAX_SCRIPTED_REQUEST_BYTES: usize = 64 * 1024 * 1024;

/// Which protocol a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Chat Completions.
    Openai,
    /// Messages.
    Anthropic,
}

/// One request the provider received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its protocol.
    pub protocol: Protocol,
    /// Its `authorization` header.
    pub authorization: Option<String>,
    /// Its `x-api-key` header.
    pub api_key: Option<String>,
    /// Its `anthropic-version` header.
    pub anthropic_version: Option<String>,
    /// Its body, parsed (`Null` if it was not JSON).
    pub body: Value,
    /// Its body's size in bytes.
    pub bytes: usize,
}

impl Received {
    /// Every text the request carries (system prompt, message texts, tool results), in order.
    pub fn texts(&self) -> Vec<String> {
        let mut out = Vec::new();
        let push = |out: &mut Vec<String>, v: &Value| {
            if let Some(s) = v.as_str() {
                out.push(s.to_owned());
            }
        };
        if let Some(s) = self.body.get("system") {
            push(&mut out, s);
        }
        for m in self.body["messages"].as_array().into_iter().flatten() {
            match &m["content"] {
                Value::String(s) => out.push(s.clone()),
                Value::Array(blocks) => {
                    for b in blocks {
                        push(&mut out, &b["text"]);
                        push(&mut out, &b["content"]);
                    }
                }
                _ => {}
            }
        }
        out
    }
}

/// One scripted answer part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptedPart {
    /// Text.
    Text(String),
    /// A call of tool `name` with `arguments` (a JSON object).
    ToolCall {
        /// The tool.
        name: String,
        /// Its arguments.
        arguments: Value,
    },
}

/// What the provider does with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// Answers with `parts` and reports `usage` (written in the protocol's own fields: OpenAI's
    /// `prompt_tokens` = input + cache read, with `cached_tokens`; Anthropic's three input
    /// counts as they are).
    Answer {
        /// The answer.
        parts: Vec<ScriptedPart>,
        /// The usage to report.
        usage: ModelUsage,
    },
    /// A valid answer with no `usage` at all.
    NoUsage,
    /// Accepts the request and never answers.
    Hang,
    /// Sends the status and headers, then one byte of body every `every`, forever.
    Trickle {
        /// The pause between bytes.
        every: Duration,
    },
    /// Sends `bytes` bytes of body (no content length), as fast as the reader takes them.
    Flood {
        /// How many.
        bytes: usize,
    },
    /// A 200 whose body is cut-off JSON.
    Malformed,
    /// HTTP 429 with the protocol's error body.
    RateLimited,
    /// HTTP `status` with an error body that quotes the request's credential back.
    EchoCredential {
        /// The status.
        status: u16,
    },
    /// Waits `after`, then behaves as `then`: a model that takes its time.
    After {
        /// How long the provider thinks.
        after: Duration,
        /// What it then does.
        then: Box<Behaviour>,
    },
}

impl Behaviour {
    /// `self` after a pause of `after`.
    pub fn after(self, after: Duration) -> Self {
        Self::After {
            after,
            then: Box::new(self),
        }
    }

    /// An answer of `text`, with usage estimated from its length.
    pub fn text(text: &str) -> Self {
        Self::Answer {
            parts: vec![ScriptedPart::Text(text.to_owned())],
            usage: ModelUsage {
                input_tokens: 100,
                output_tokens: (text.len() as u64).div_ceil(4).max(1),
                ..ModelUsage::default()
            },
        }
    }
}

/// Chooses the behaviour for a request when the script's queue is empty.
pub type Responder = Arc<dyn Fn(&Received) -> Behaviour + Send + Sync>;

struct Inner {
    queue: Mutex<VecDeque<Behaviour>>,
    received: Mutex<Vec<Received>>,
    responder: Mutex<Responder>,
    /// Requests being answered now, and the most at once so far.
    in_flight: AtomicUsize,
    peak_in_flight: AtomicUsize,
}

/// Counts a request in flight from its arrival until its handler returns.
struct InFlight<'a>(&'a Inner);

impl<'a> InFlight<'a> {
    fn enter(inner: &'a Inner) -> Self {
        let now = inner.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        inner.peak_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(inner)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The running provider. Dropping it stops the server.
pub struct ScriptedProvider {
    addr: SocketAddr,
    inner: Arc<Inner>,
    server: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for ScriptedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedProvider")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for ScriptedProvider {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl ScriptedProvider {
    /// Starts the provider on an ephemeral loopback port. Until scripted, every request is
    /// answered `ok`.
    ///
    /// # Errors
    ///
    /// If the port cannot be bound.
    pub async fn start() -> std::io::Result<Self> {
        let inner = Arc::new(Inner {
            queue: Mutex::new(VecDeque::new()),
            received: Mutex::new(Vec::new()),
            responder: Mutex::new(Arc::new(|_: &Received| Behaviour::text("ok"))),
            in_flight: AtomicUsize::new(0),
            peak_in_flight: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/openai/v1/chat/completions", post(openai))
            .route("/anthropic/v1/messages", post(anthropic))
            .layer(DefaultBodyLimit::max(MAX_SCRIPTED_REQUEST_BYTES))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, inner, server })
    }

    /// [`start`](Self::start) on a one-thread runtime of its own, for synchronous tests and
    /// benches; the provider serves while the runtime is kept.
    ///
    /// # Errors
    ///
    /// If the runtime cannot start or the port cannot be bound.
    pub fn start_on_own_runtime() -> std::io::Result<(tokio::runtime::Runtime, Self)> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let provider = runtime.block_on(Self::start())?;
        Ok((runtime, provider))
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL of its Chat Completions API (a policy model's `endpoint`).
    pub fn openai_endpoint(&self) -> String {
        format!("http://{}/openai/v1", self.addr)
    }

    /// The base URL of its Messages API.
    pub fn anthropic_endpoint(&self) -> String {
        format!("http://{}/anthropic/v1", self.addr)
    }

    /// Scripts the next request's behaviour (queued in order).
    pub fn push(&self, b: Behaviour) {
        self.inner.queue.locked().push_back(b);
    }

    /// What to do once the queue is empty.
    pub fn set_responder(&self, responder: Responder) {
        *self.inner.responder.locked() = responder;
    }

    /// Every request received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.inner.received.locked().clone()
    }

    /// How many requests it received.
    pub fn request_count(&self) -> usize {
        self.inner.received.locked().len()
    }

    /// The requests it is answering now (from arrival until answered, or until the client
    /// went away).
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    /// The most requests it was answering at once so far (from arrival to answer).
    pub fn peak_in_flight(&self) -> usize {
        self.inner.peak_in_flight.load(Ordering::SeqCst)
    }
}

fn header(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

fn record(inner: &Inner, protocol: Protocol, headers: &HeaderMap, body: &Bytes) -> (Received, Behaviour) {
    let received = Received {
        protocol,
        authorization: header(headers, "authorization"),
        api_key: header(headers, "x-api-key"),
        anthropic_version: header(headers, "anthropic-version"),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
        bytes: body.len(),
    };
    inner.received.locked().push(received.clone());
    let next = inner.queue.locked().pop_front();
    let behaviour = next.unwrap_or_else(|| {
        let responder = inner.responder.locked().clone();
        responder(&received)
    });
    (received, behaviour)
}

async fn openai(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Response {
    let _in_flight = InFlight::enter(&inner);
    let (received, behaviour) = record(&inner, Protocol::Openai, &headers, &body);
    let model = received.body["model"].clone();
    let answer = |parts: &[ScriptedPart], usage: Option<&ModelUsage>| {
        let text: String = parts
            .iter()
            .filter_map(|p| match p {
                ScriptedPart::Text(t) => Some(t.as_str()),
                ScriptedPart::ToolCall { .. } => None,
            })
            .collect();
        let calls: Vec<Value> = parts
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match p {
                ScriptedPart::ToolCall { name, arguments } => Some(json!({
                    "id": format!("call_{i}"), "type": "function",
                    "function": { "name": name, "arguments": arguments.to_string() },
                })),
                ScriptedPart::Text(_) => None,
            })
            .collect();
        let mut message =
            json!({ "role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) } });
        if !calls.is_empty() {
            message["tool_calls"] = json!(calls);
        }
        let finish = if calls.is_empty() { "stop" } else { "tool_calls" };
        let mut out = json!({
            "id": "chatcmpl-scripted", "object": "chat.completion", "created": 1_796_039_139, "model": model,
            "choices": [{ "index": 0, "message": message, "finish_reason": finish }],
        });
        if let Some(u) = usage {
            out["usage"] = json!({
                "prompt_tokens": u.input_tokens + u.cache_read_tokens,
                "completion_tokens": u.output_tokens,
                "total_tokens": u.input_tokens + u.cache_read_tokens + u.output_tokens,
                "prompt_tokens_details": { "cached_tokens": u.cache_read_tokens },
            });
        }
        out
    };
    let error =
        json!({ "error": { "message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded" } });
    respond(behaviour, &received, answer, error).await
}

async fn anthropic(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Response {
    let _in_flight = InFlight::enter(&inner);
    let (received, behaviour) = record(&inner, Protocol::Anthropic, &headers, &body);
    let model = received.body["model"].clone();
    let answer = |parts: &[ScriptedPart], usage: Option<&ModelUsage>| {
        let content: Vec<Value> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| match p {
                ScriptedPart::Text(t) => json!({ "type": "text", "text": t }),
                ScriptedPart::ToolCall { name, arguments } => {
                    json!({ "type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": arguments })
                }
            })
            .collect();
        let stop = if parts.iter().any(|p| matches!(p, ScriptedPart::ToolCall { .. })) {
            "tool_use"
        } else {
            "end_turn"
        };
        let mut out = json!({
            "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": null,
        });
        if let Some(u) = usage {
            out["usage"] = json!({
                "input_tokens": u.input_tokens,
                "cache_read_input_tokens": u.cache_read_tokens,
                "cache_creation_input_tokens": u.cache_write_tokens,
                "output_tokens": u.output_tokens,
            });
        }
        out
    };
    let error = json!({ "type": "error", "error": { "type": "rate_limit_error", "message": "Rate limited" } });
    respond(behaviour, &received, answer, error).await
}

async fn respond(
    behaviour: Behaviour,
    received: &Received,
    answer: impl Fn(&[ScriptedPart], Option<&ModelUsage>) -> Value,
    rate_limit_error: Value,
) -> Response {
    let json =
        |status: StatusCode, v: Value| (status, [("content-type", "application/json")], v.to_string()).into_response();
    let mut behaviour = behaviour;
    while let Behaviour::After { after, then } = behaviour {
        tokio::time::sleep(after).await;
        behaviour = *then;
    }
    match behaviour {
        Behaviour::Answer { parts, usage } => json(StatusCode::OK, answer(&parts, Some(&usage))),
        Behaviour::NoUsage => json(StatusCode::OK, answer(&[ScriptedPart::Text("ok".into())], None)),
        Behaviour::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            StatusCode::GATEWAY_TIMEOUT.into_response()
        }
        Behaviour::Trickle { every } => {
            let stream = futures_stream(move |i| async move {
                if i > 0 {
                    tokio::time::sleep(every).await;
                }
                Some(Bytes::from_static(b" "))
            });
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::new(stream))
                .expect("a response")
        }
        Behaviour::Flood { bytes } => {
            const CHUNK: usize = 64 * 1024;
            let chunk = Bytes::from(vec![b'a'; CHUNK]);
            let stream = futures_stream(move |i| {
                let chunk = chunk.clone();
                async move {
                    let sent = i * CHUNK;
                    (sent < bytes).then(|| chunk.slice(..CHUNK.min(bytes - sent)))
                }
            });
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::new(stream))
                .expect("a response")
        }
        Behaviour::Malformed => (
            StatusCode::OK,
            [("content-type", "application/json")],
            r#"{"choices": [{"mess"#,
        )
            .into_response(),
        Behaviour::RateLimited => json(StatusCode::TOO_MANY_REQUESTS, rate_limit_error),
        Behaviour::EchoCredential { status } => {
            let key = received
                .authorization
                .clone()
                .or_else(|| received.api_key.clone())
                .unwrap_or_default();
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::UNAUTHORIZED);
            json(
                status,
                json!({ "error": { "message": format!("Incorrect API key provided: {key}") } }),
            )
        }
        Behaviour::After { .. } => unreachable!("unwrapped above"),
    }
}

/// A body whose `i`-th data frame is `next(i)`, ending at the first `None`.
fn futures_stream<F, Fut>(next: F) -> Generated<F, Fut>
where
    F: Fn(usize) -> Fut + Send + Unpin + 'static,
    Fut: Future<Output = Option<Bytes>> + Send + 'static,
{
    Generated {
        next,
        i: 0,
        pending: None,
    }
}

struct Generated<F, Fut> {
    next: F,
    i: usize,
    pending: Option<std::pin::Pin<Box<Fut>>>,
}

impl<F, Fut> http_body::Body for Generated<F, Fut>
where
    F: Fn(usize) -> Fut + Unpin,
    Fut: Future<Output = Option<Bytes>>,
{
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        if self.pending.is_none() {
            let fut = (self.next)(self.i);
            self.pending = Some(Box::pin(fut));
        }
        let polled = self.pending.as_mut().expect("set above").as_mut().poll(cx);
        match polled {
            std::task::Poll::Pending => std::task::Poll::Pending,
            std::task::Poll::Ready(item) => {
                self.pending = None;
                self.i += 1;
                std::task::Poll::Ready(item.map(|b| Ok(http_body::Frame::data(b))))
            }
        }
    }
}
