//! Egress: outgoing HTTP through `wasmtime-wasi-http`, allowed only to the servers both the
//! operator's policy and the snapshot name ([`Grants`]), with their credentials injected by
//! the host, and counted against the tier's egress ceiling.
//!
//! Every request goes through [`EgressHooks::send_request`] (the `WasiHttpHooks` hook). It is
//! refused (`HTTP-request-denied`) unless its scheme, host and port are exactly those of a
//! granted server and this host still carries the agent (one read of the store: a host that
//! lost the agent to another sends nothing for it) — and never to a model endpoint's origin, which only the host's gateway
//! reaches (a guest calling it directly would bypass the meter); it is also refused once the guest has tried to pass the ceiling. The host
//! name is resolved by the host and the connection pinned to an address the policy allows
//! (`egress::pinned`; refused: `destination-IP-prohibited`). For a server the policy binds to a
//! credential, the host sets the credential's header itself (the guest's value, if any, is
//! replaced), so the secret never enters the sandbox; its first use is audited, and a
//! credential whose audit cannot be written is not used (the request is refused).
//! Allowed requests are counted — request line and headers, request body, status and response
//! headers, response body — into one [`EgressMeter`] per sandbox. A body that would carry the
//! total past the ceiling is cut with an error at that point, and the meter remembers the breach
//! so the host audits it (`ceiling_exceeded`, `egress_bytes`). Timeouts are capped by the
//! tier's wall clock so a slow server cannot hold a turn past its ceiling.
//!
//! The host's own requests to the operator's endpoints (a model provider, a token issuer's
//! keys) go through `direct` instead: never a guest's choice, bounded in time and bytes.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use ahp_store::EventKind;
use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use serde_json::json;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use crate::policy::{CredentialRule, Grants, Origin};
use crate::shared_store::{SharedStore, StoreLock};
use crate::vault::Vault;

pub(crate) mod direct;
pub(crate) mod pinned;

/// Largest write into an outgoing body's stream; the body buffers at most two such chunks
/// before the network takes them (wasmtime's default is 1 MiB, i.e. 2 MiB per body). Part of
/// a sandbox's host-resource bound (`sandbox::host_resources`).
pub const BODY_CHUNK_BYTES: usize = 64 * 1024;

/// What must be durable before a request leaves the host — a sandbox's activation writes,
/// such as a revealed credential's audit (`interfaces::Journal`) — flushed first: a failure
/// denies the request.
pub trait Durable: Send + Sync {
    /// Makes what is held durable.
    ///
    /// # Errors
    ///
    /// The store's failure to record it.
    fn flush(&self) -> Result<(), ahp_store::Error>;
}

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
    pub(crate) fn take(&self, n: u64) -> bool {
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

/// Where an injected credential comes from, and where its use is audited.
#[derive(Clone)]
pub(crate) struct CredentialSource {
    pub(crate) vault: Arc<dyn Vault>,
    pub(crate) db: SharedStore,
    pub(crate) transfer: String,
}

/// The `WasiHttpHooks` of one sandbox.
pub struct EgressHooks {
    grants: Arc<Grants>,
    meter: Arc<EgressMeter>,
    max_wait: Duration,
    credentials: Option<CredentialSource>,
    /// Credential references whose injection into this sandbox's requests was audited.
    audited: BTreeSet<String>,
    /// What must be durable before a request goes out (a sandbox's activation writes: the
    /// interfaces' `Journal`).
    pub(crate) journal: Option<Arc<dyn Durable>>,
}

impl std::fmt::Debug for EgressHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressHooks")
            .field("servers", &self.grants.servers.len())
            .field("meter", &self.meter)
            .finish_non_exhaustive()
    }
}

impl EgressHooks {
    /// Hooks allowing the servers of `grants`, counting into `meter`, with every network wait
    /// capped at `max_wait`, injecting credentials from `credentials` (without it a server
    /// bound to a credential is refused).
    pub(crate) fn new(
        grants: Arc<Grants>,
        meter: Arc<EgressMeter>,
        max_wait: Duration,
        credentials: Option<CredentialSource>,
    ) -> Self {
        Self {
            grants,
            meter,
            max_wait,
            credentials,
            audited: BTreeSet::new(),
            journal: None,
        }
    }

    /// Whether `uri` names a granted server: same scheme, host and port.
    pub fn allows(&self, uri: &http::Uri) -> bool {
        Origin::of_uri(uri).is_some_and(|o| self.grants.server(&o).is_some())
    }

    fn injection(&mut self, rule: &CredentialRule, origin: &Origin) -> Result<(HeaderName, HeaderValue), String> {
        let source = self.credentials.as_ref().ok_or("no vault")?;
        credential_header(source, rule, origin, &mut self.audited)
    }
}

/// The header the host adds to requests to `origin` for `rule`: the secret from the vault
/// behind the rule's prefix, marked sensitive. The first use of a reference in `audited` (one
/// set per sandbox and path: `wasi:http`, the MCP client) is audited (`credential_resolved`,
/// with `"use": "injected"`); a credential whose audit cannot be written is not used.
pub(crate) fn credential_header(
    source: &CredentialSource,
    rule: &CredentialRule,
    origin: &Origin,
    audited: &mut BTreeSet<String>,
) -> Result<(HeaderName, HeaderValue), String> {
    let secret = source.vault.resolve(&rule.cred_ref).map_err(|e| e.to_string())?;
    let secret = secret.trim_ascii_end();
    let mut value = rule.inject.prefix.as_bytes().to_vec();
    value.extend_from_slice(secret);
    let mut value = HeaderValue::from_bytes(&value).map_err(|_| "the secret is not a valid header value")?;
    value.set_sensitive(true);
    let name = HeaderName::from_bytes(rule.inject.header.as_bytes()).map_err(|_| "bad header name")?;
    if !audited.contains(&rule.cred_ref) {
        let detail = json!({ "credRef": rule.cred_ref, "server": origin.to_string(), "use": "injected" });
        let recorded = {
            let mut db = source.db.locked();
            db.record_event(&source.transfer, EventKind::CredentialResolved, detail)
        };
        recorded.map_err(|e| format!("the credential's use could not be audited: {e}"))?;
        audited.insert(rule.cred_ref.clone());
    }
    Ok((name, value))
}

type SendResult = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ),
    HttpError,
>;

fn refuse(err: HttpError) -> Box<dyn Future<Output = SendResult> + Send> {
    Box::new(async move { Err(err) })
}

impl WasiHttpHooks for EgressHooks {
    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        1
    }

    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        BODY_CHUNK_BYTES
    }

    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        drop(fut);
        if Origin::of_uri(request.uri()).is_some_and(|o| self.grants.is_model_origin(&o)) {
            // The gateway is the only way to a model: a direct call would bypass the meter.
            tracing::info!(uri = %request.uri(), "egress denied: a model endpoint's origin (models are called through ahp:agent/model)");
            return refuse(HttpError::HttpRequestDenied);
        }
        let Some(grant) = Origin::of_uri(request.uri()).and_then(|o| self.grants.server(&o).cloned()) else {
            tracing::info!(uri = %request.uri(), "egress denied: not a server of both the operator's policy and the snapshot");
            return refuse(HttpError::HttpRequestDenied);
        };
        if self.meter.breached() {
            // The ceiling is over the sandbox's life: after a breach nothing more goes out.
            return refuse(HttpError::HttpRequestDenied);
        }
        // A host that lost the agent to another (a takeover, a move) sends nothing for it.
        if let Some(source) = &self.credentials
            && let Err(e) = source.db.locked().check_carried_here(&source.transfer)
        {
            tracing::warn!(transfer = %source.transfer, error = %e, "egress denied: this host may no longer act for the agent");
            return refuse(HttpError::HttpRequestDenied);
        }
        // What an activation holds (a credential's audit) is durable before anything goes out.
        if let Some(Err(e)) = self.journal.as_ref().map(|j| j.flush()) {
            tracing::warn!(error = %e, "egress denied: the activation's audit could not be recorded");
            return refuse(HttpError::HttpRequestDenied);
        }
        if let Some(rule) = &grant.credential {
            match self.injection(rule, &grant.origin) {
                Ok((name, value)) => {
                    request.headers_mut().insert(name, value);
                }
                Err(reason) => {
                    tracing::warn!(origin = %grant.origin, credRef = %rule.cred_ref, %reason, "egress denied: credential unavailable");
                    return refuse(HttpError::HttpRequestDenied);
                }
            }
        }
        let head = head_bytes(
            request.method().as_str().len() + request.uri().to_string().len(),
            request.headers(),
        );
        if !self.meter.take(head) {
            return refuse(HttpError::HttpRequestDenied);
        }
        let cap = |t: Option<Duration>| Some(t.map_or(self.max_wait, |t| t.min(self.max_wait)));
        let options = options.unwrap_or_default();
        let options = RequestOptions {
            connect_timeout: cap(options.connect_timeout),
            first_byte_timeout: cap(options.first_byte_timeout),
            between_bytes_timeout: cap(options.between_bytes_timeout),
        };
        let meter = self.meter.clone();
        let grants = self.grants.clone();
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
            let origin = &grant.origin;
            let wait = options.connect_timeout.unwrap_or(Duration::from_secs(10));
            let addr = pinned::resolve_reachable(&origin.host, origin.port, &grants, wait).await?;
            let (response, io) =
                pinned::send_pinned(request, addr, origin.host.clone(), origin.scheme == "https", options).await?;
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
pub(crate) fn head_bytes(line: usize, headers: &http::HeaderMap) -> u64 {
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
    fn allows_only_the_granted_servers_scheme_host_and_port() {
        let policy = crate::policy::Policy {
            servers: [
                "https://inventory.example.com",
                "http://127.0.0.1:8080",
                "https://other.example.com",
            ]
            .into_iter()
            .map(|s| crate::policy::ServerRule {
                server: s.into(),
                credential: None,
                tool_call_micro_usd: 0,
            })
            .collect(),
            models: vec![],
            allow_networks: vec![],
        };
        let snapshot: Vec<ahp_store::McpServer> = ["https://inventory.example.com/mcp", "http://127.0.0.1:8080/x"]
            .into_iter()
            .map(|s| ahp_store::McpServer {
                server: s.into(),
                cred_ref: "r".into(),
            })
            .collect();
        let meter = Arc::new(EgressMeter::new(100));
        let hooks = EgressHooks::new(Arc::new(policy.grants(&snapshot)), meter, Duration::from_secs(1), None);
        let ok = |u: &str| hooks.allows(&u.parse().unwrap());
        assert!(ok("https://inventory.example.com/other"));
        assert!(ok("https://INVENTORY.example.com:443/"));
        assert!(ok("http://127.0.0.1:8080/"));
        assert!(!ok("http://inventory.example.com/"), "another scheme and port");
        assert!(!ok("http://inventory.example.com:443/"), "another scheme, same port");
        assert!(!ok("http://127.0.0.1:8081/"));
        assert!(!ok("http://localhost:8080/"), "another name for the same address");
        assert!(!ok("https://evil.example.com/"));
        assert!(!ok("https://other.example.com/"), "in the policy, not in the snapshot");
        assert!(!ok("ftp://inventory.example.com/"));
    }

    /// A request the hooks of a sandbox on `host` send to a local port where nothing listens:
    /// refused before it goes out, or sent (and then refused by the network).
    fn send_from(host: ahp_store::Store, transfer: &str, dir: &std::path::Path) -> Result<(), HttpError> {
        let policy: crate::policy::Policy = serde_json::from_value(json!({
            "servers": [{ "server": "http://127.0.0.1:9" }],
            "allowNetworks": ["127.0.0.0/8"],
        }))
        .unwrap();
        let snapshot = [ahp_store::McpServer {
            server: "http://127.0.0.1:9/mcp".into(),
            cred_ref: "r".into(),
        }];
        let source = CredentialSource {
            vault: Arc::new(crate::vault::DirVault::open(dir.join("vault")).unwrap()),
            db: crate::shared_store::share(host),
            transfer: transfer.to_owned(),
        };
        let mut hooks = EgressHooks::new(
            Arc::new(policy.grants(&snapshot)),
            Arc::new(EgressMeter::new(1 << 20)),
            Duration::from_secs(1),
            Some(source),
        );
        let request = http::Request::get("http://127.0.0.1:9/mcp")
            .body(http_body_util::Empty::new().map_err(|e| match e {}).boxed_unsync())
            .unwrap();
        let sent = hooks.send_request(request, None, Box::new(async { Ok(()) }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(Box::into_pin(sent)).map(|_| ())
    }

    #[test]
    fn a_host_that_no_longer_carries_the_agent_sends_nothing_for_it() {
        use ahp_store::{Store, Tier, TokenKey};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ahp.db");
        let key = TokenKey::random();
        let open = |host: &str| {
            Store::open(&path)
                .unwrap()
                .with_token_key(key.clone())
                .with_host_id(host)
                .unwrap()
        };
        // Host B began the activation: it carries the agent.
        let mut b = open("host-b");
        let snap = crate::testing::snapshot(0, json!({}));
        let transfer = crate::testing::pushed(&mut b, &key, &snap, Tier::Nano, 1_000_000, "c").unwrap();
        let token = crate::testing::activate_token(&b, &key, &transfer).unwrap();
        b.begin_activation(&transfer, &token).unwrap();
        // From host A, nothing goes out for it; from B the request goes out (and finds no
        // server).
        assert!(matches!(
            send_from(open("host-a"), &transfer, dir.path()),
            Err(HttpError::HttpRequestDenied)
        ));
        let from_b = send_from(b, &transfer, dir.path());
        assert!(
            !matches!(from_b, Err(HttpError::HttpRequestDenied) | Ok(())),
            "{from_b:?}"
        );
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
