//! The host's model gateway: a sandboxed agent's only way to a model (`ahp:agent/model`).
//!
//! The operator's policy lists the models ([`ModelRule`]); the guest names one by id and sends a
//! provider-neutral [`Request`]. The gateway validates and bounds it ([`Request::validate`]),
//! reserves its worst case from the transfer's budget (`reservation`), maps it to the model's
//! protocol ([`openai`]: Chat Completions; [`anthropic`]: Messages), adds the operator's key
//! from the vault (never seen by the guest), sends it through a bounded client (`client`: a
//! total deadline, at most [`MAX_RESPONSE_BYTES`] read), maps the answer back, and settles the
//! reservation from the provider's usage. The error of every way a call can fail is typed
//! ([`Error`]) and says what it was charged.
//!
//! [`scripted`] is a local provider speaking both protocols with scripted answers, for tests and
//! `ahp demo`.

pub mod anthropic;
mod client;
pub mod openai;
mod request;
mod reservation;
pub mod scripted;
mod weight;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_store::model_call::{CallOutcome, ModelUsage, Reservation, ReservationPlan, ReservationRequest};
use ahp_store::{Budget, plan_reservation};

pub use self::client::ClientError;
pub use self::request::{
    MAX_CALL_ID_BYTES, MAX_DESCRIPTION_BYTES, MAX_MESSAGES, MAX_PARTS, MAX_REQUEST_TEXT_BYTES, MAX_SCHEMA_BYTES,
    MAX_SYSTEM_BYTES, MAX_TOOL_NAME_BYTES, MAX_TOOLS, Message, Part, Request, Role, ToolCall, ToolChoice,
    ToolDefinition, ToolResult,
};
pub use self::reservation::{INPUT_TOKEN_OVERHEAD, input_tokens_bound};
pub use self::weight::Weight;
use crate::policy::{ModelRule, Provider};
use crate::scrub::Scrub;
use crate::shared_store::{SharedStore, StoreLock};
use crate::vault::Vault;

/// Most bytes of a provider's response the host reads; past it the call fails (`provider-error`,
/// charged its reservation) and the connection is dropped, so the host never holds more.
pub const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
/// Most parts of a completion the host accepts from a provider.
pub const MAX_RESPONSE_PARTS: usize = 1024;
/// The longest a call waits for its provider (connecting, sending, reading the whole response).
pub const MAX_CALL_WAIT: Duration = Duration::from_secs(120);
/// Longest a connection (and TLS handshake) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// What a call leaves of its turn's wall clock: the call ends with `unavailable` this long before
/// the turn would, so its settlement is written and the guest gets the typed error.
pub const TURN_MARGIN: Duration = Duration::from_millis(500);
/// The Anthropic API version the gateway speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// It finished its answer.
    EndTurn,
    /// It reached the output cap.
    MaxTokens,
    /// It asks for tool calls.
    ToolUse,
    /// The provider filtered its output.
    ContentFilter,
    /// Anything else.
    Other,
}

/// What a provider answered, mapped to the neutral form (before settlement).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Text and tool-call parts, in order.
    pub parts: Vec<Part>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Its usage, one meaning across providers; `None` if the response had none.
    pub usage: Option<ModelUsage>,
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The model's parts.
    pub parts: Vec<Part>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// What it used.
    pub usage: ModelUsage,
    /// What it was charged, in micro-USD.
    pub charged_micro_usd: u64,
    /// The budget after the charge.
    pub budget: Budget,
}

/// A call that reached (or tried to reach) its provider and failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong (never the credential).
    pub message: String,
    /// What the call was charged.
    pub charged_micro_usd: u64,
}

/// Why a call was refused or failed (the WIT's `model.error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No model of that id is offered.
    #[error("unknown model {0:?}")]
    UnknownModel(String),
    /// The request breaks a rule.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The request is larger than a bound.
    #[error("request too large: {0}")]
    TooLarge(String),
    /// The budget cannot pay for the smallest useful call; the shortfall in micro-USD.
    #[error("insufficient budget: {0} micro-USD short")]
    InsufficientBudget(u64),
    /// HTTP 429 from the provider.
    #[error("rate limited: {}", .0.message)]
    RateLimited(Failure),
    /// The provider answered with an error, an unreadable response or too many bytes.
    #[error("provider error: {}", .0.message)]
    ProviderError(Failure),
    /// The provider could not be reached or did not answer in time, or the database failed.
    #[error("unavailable: {}", .0.message)]
    Unavailable(Failure),
    /// The transfer is insolvent.
    #[error("insolvent")]
    Insolvent,
}

impl Error {
    /// A stable machine-readable kind (the WIT case's name).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UnknownModel(_) => "unknown-model",
            Self::InvalidRequest(_) => "invalid-request",
            Self::TooLarge(_) => "too-large",
            Self::InsufficientBudget(_) => "insufficient-budget",
            Self::RateLimited(_) => "rate-limited",
            Self::ProviderError(_) => "provider-error",
            Self::Unavailable(_) => "unavailable",
            Self::Insolvent => "insolvent",
        }
    }

    /// What the failed call was charged.
    pub fn charged_micro_usd(&self) -> u64 {
        match self {
            Self::RateLimited(f) | Self::ProviderError(f) | Self::Unavailable(f) => f.charged_micro_usd,
            _ => 0,
        }
    }
}

/// A model as a guest sees it (the WIT's `model-info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// Its id.
    pub id: String,
    /// Its context, in tokens.
    pub context_tokens: u32,
    /// Its output cap, in tokens.
    pub max_output_tokens: u32,
    /// Its prices.
    pub prices: ahp_store::ModelPrices,
}

/// The gateway for one transfer: the policy's models, the vault their keys are in, the store
/// that meters them.
#[derive(Clone)]
pub struct Gateway {
    models: Arc<[ModelRule]>,
    vault: Arc<dyn Vault>,
    db: SharedStore,
    transfer: String,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("models", &self.models.len())
            .field("transfer", &self.transfer)
            .finish_non_exhaustive()
    }
}

/// The body of a request mapped for `model`'s provider, with `max_output_tokens`.
fn body(model: &ModelRule, request: &Request, max_output_tokens: u32) -> Vec<u8> {
    match model.provider {
        Provider::Openai => openai::request_body(&model.provider_model, request, max_output_tokens),
        Provider::Anthropic => anthropic::request_body(&model.provider_model, request, max_output_tokens),
    }
}

impl Gateway {
    /// The gateway of `transfer` over `models` (the operator's, in order), with keys from
    /// `vault` and spend in `db`.
    pub fn new(models: Arc<[ModelRule]>, vault: Arc<dyn Vault>, db: SharedStore, transfer: String) -> Self {
        Self {
            models,
            vault,
            db,
            transfer,
        }
    }

    /// The models offered, in the operator's order.
    pub fn models(&self) -> Vec<ModelInfo> {
        self.models
            .iter()
            .map(|m| ModelInfo {
                id: m.id.clone(),
                context_tokens: m.context_tokens,
                max_output_tokens: m.max_output_tokens,
                prices: m.price_micro_usd_per_m_tok.into(),
            })
            .collect()
    }

    fn model(&self, id: &str) -> Result<&ModelRule, Error> {
        self.models
            .iter()
            .find(|m| m.id == id)
            .ok_or_else(|| Error::UnknownModel(id.to_owned()))
    }

    /// The input-token bound of `request` for `model` and the output cap it asks for.
    fn prepare(&self, model: &ModelRule, request: &Request) -> (u64, u32) {
        let wanted = request
            .max_output_tokens
            .map_or(model.max_output_tokens, |n| n.min(model.max_output_tokens));
        let probe = body(model, request, wanted);
        (input_tokens_bound(probe.len(), model.context_tokens), wanted)
    }

    /// What `complete(request)` would reserve now, without calling or reserving.
    ///
    /// # Errors
    ///
    /// As [`complete`](Self::complete) before the call: unknown model, invalid, too large,
    /// insufficient budget, insolvent; `unavailable` if the budget cannot be read.
    pub fn estimate(&self, request: &Request) -> Result<ReservationPlan, Error> {
        let model = self.model(&request.model)?;
        request.validate()?;
        let (bound, wanted) = self.prepare(model, request);
        let budget = self.db.locked().budget(&self.transfer);
        let budget = budget.map_err(|e| unavailable(format!("the budget could not be read: {e}"), 0))?;
        let budget = budget.ok_or_else(|| unavailable("the transfer has no budget".into(), 0))?;
        if budget.is_exhausted() {
            return Err(Error::Insolvent);
        }
        plan_reservation(
            &model.price_micro_usd_per_m_tok.into(),
            bound,
            wanted,
            budget.remaining_micro_usd(),
        )
        .map_err(Error::InsufficientBudget)
    }

    /// Calls the model: validates, reserves, sends, settles (see the [module docs](self)). The
    /// call gives up at `deadline` (and after [`MAX_CALL_WAIT`]) with `unavailable`, charged its
    /// reservation. Its store work (the reservation, the settlement: a commit each) runs in
    /// place, on the thread polling it (a turn's task on the runtime).
    ///
    /// # Errors
    ///
    /// Every case of [`Error`]; each says what it was charged.
    pub async fn complete(&self, request: &Request, deadline: Instant) -> Result<Completion, Error> {
        let model = self.model(&request.model)?;
        request.validate()?;
        let deadline = deadline.min(Instant::now() + MAX_CALL_WAIT);
        let (bound, wanted) = self.prepare(model, request);
        let ask = ReservationRequest {
            model: &model.id,
            prices: model.price_micro_usd_per_m_tok.into(),
            input_tokens_bound: bound,
            max_output_tokens: wanted,
        };
        let reserved = self.db.locked().reserve_model_call(&self.transfer, &ask);
        let held = match reserved {
            Ok(Reservation::Granted(r)) => r,
            Ok(Reservation::InsufficientBudget { shortfall_micro_usd }) => {
                return Err(Error::InsufficientBudget(shortfall_micro_usd));
            }
            Ok(Reservation::Insolvent) => return Err(Error::Insolvent),
            Err(e) => return Err(unavailable(format!("the call could not be reserved: {e}"), 0)),
        };
        let mut open = reservation::Open::new(self.db.clone(), held.call_id.clone());
        let body = body(model, request, held.plan.max_output_tokens);
        let key = match &model.credential {
            None => None,
            Some(c) => match self.vault.resolve(&c.cred_ref) {
                Ok(k) => Some(k),
                Err(e) => {
                    let s = open.settle(CallOutcome::Refused);
                    return Err(unavailable(
                        format!("the model's credential is unavailable: {e}"),
                        s.map_or(0, |s| s.charged_micro_usd),
                    ));
                }
            },
        };
        let sent = client::send(model, key.as_deref(), body, deadline).await;
        let (outcome, result) = match sent {
            Err(e) => {
                let outcome = if e.was_sent() {
                    CallOutcome::Unknown
                } else {
                    CallOutcome::Refused
                };
                (outcome, Err(e))
            }
            Ok((status, bytes)) if !(200..300).contains(&status) => (CallOutcome::Refused, Ok(Err((status, bytes)))),
            Ok((_, bytes)) => {
                let parsed = match model.provider {
                    Provider::Openai => openai::parse_response(&bytes),
                    Provider::Anthropic => anthropic::parse_response(&bytes),
                };
                match parsed {
                    Ok(Reply { usage: Some(u), .. }) => (CallOutcome::Completed(u), Ok(Ok(parsed))),
                    _ => (CallOutcome::Unknown, Ok(Ok(parsed))),
                }
            }
        };
        let settled = open.settle(outcome);
        let charged = settled.as_ref().map_or(0, |s| s.charged_micro_usd);
        let settled = match settled {
            Ok(s) => s,
            Err(e) => {
                // Left open: charged in full at the next takeover.
                tracing::error!(transfer = %self.transfer, error = %e, "a model call could not be settled");
                return Err(unavailable(
                    format!("the call could not be recorded: {e}"),
                    held.plan.reserved_micro_usd,
                ));
            }
        };
        match result {
            Err(e @ (ClientError::TooLarge { .. } | ClientError::Cut(_))) => Err(Error::ProviderError(Failure {
                message: e.to_string(),
                charged_micro_usd: charged,
            })),
            Err(e) => Err(unavailable(e.to_string(), charged)),
            Ok(Err((429, bytes))) => Err(Error::RateLimited(Failure {
                message: format!("HTTP 429: {}", excerpt(&bytes, key.as_deref())),
                charged_micro_usd: charged,
            })),
            Ok(Err((status, bytes))) => Err(Error::ProviderError(Failure {
                message: format!("HTTP {status}: {}", excerpt(&bytes, key.as_deref())),
                charged_micro_usd: charged,
            })),
            Ok(Ok(Err(reason))) => Err(Error::ProviderError(Failure {
                message: format!("the provider's response could not be read: {reason}"),
                charged_micro_usd: charged,
            })),
            Ok(Ok(Ok(reply))) => match reply.usage {
                Some(usage) => Ok(Completion {
                    parts: scrubbed(reply.parts, key.as_deref()),
                    stop_reason: reply.stop_reason,
                    usage,
                    charged_micro_usd: charged,
                    budget: settled.budget,
                }),
                None => Err(Error::ProviderError(Failure {
                    message: "the provider's response reported no usage".into(),
                    charged_micro_usd: charged,
                })),
            },
        }
    }
}

/// A completion's parts with every form of the key replaced ([`crate::scrub`]): a provider may
/// echo it in an answer as well as in an error.
fn scrubbed(mut parts: Vec<Part>, key: Option<&[u8]>) -> Vec<Part> {
    let scrub = Scrub::new(key);
    if scrub.is_empty() {
        return parts;
    }
    for part in &mut parts {
        match part {
            Part::Text(text) => scrub.string(text),
            Part::ToolCall(call) => {
                scrub.string(&mut call.id);
                scrub.string(&mut call.name);
                scrub.string(&mut call.arguments_json);
            }
            Part::ToolResult(result) => scrub.string(&mut result.content),
        }
    }
    parts
}

fn unavailable(message: String, charged_micro_usd: u64) -> Error {
    Error::Unavailable(Failure {
        message,
        charged_micro_usd,
    })
}

/// Most bytes of a provider's error body handed to the guest.
pub const MAX_ERROR_EXCERPT_BYTES: usize = 512;

/// The start of a provider's error body, for the guest: at most [`MAX_ERROR_EXCERPT_BYTES`],
/// lossy UTF-8, with every form of the key replaced ([`crate::scrub`]) — a provider that echoes
/// the key it was sent must not hand it to the guest.
fn excerpt(bytes: &[u8], key: Option<&[u8]>) -> String {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    Scrub::new(key).string(&mut text);
    let mut end = text.len().min(MAX_ERROR_EXCERPT_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text
}

#[cfg(test)]
mod tests;
