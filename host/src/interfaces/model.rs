//! `ahp:agent/model`: the host's model gateway ([`crate::gateway`]) as the guest sees it.
//!
//! Linked by hand (`func_wrap` / `func_wrap_async`) rather than through the generated `Host`
//! trait, because a call needs the Store itself, as `metering` does: before reserving, the CPU
//! meter is settled (so the reservation sees every micro-USD the guest burnt), and after the
//! charge the fuel left is cut to what the budget still pays for. `complete` is async: while it
//! waits for the provider the guest is suspended, and when the turn's wall clock runs out the
//! sandbox drops the call (its reservation is then charged in full, see `gateway`). Before
//! that, the gateway gives up itself [`TURN_MARGIN`] ahead of the clock with `unavailable`, so a
//! hanging provider is a typed error the agent sees, not a lost turn.
//!
//! A request is weighed in the guest's memory and refused past its bounds before the host copies
//! it (`model_request`).
//!
//! Per turn at most [`MAX_COMPLETIONS_PER_TURN`] `complete` and [`MAX_ESTIMATES_PER_TURN`]
//! `estimate` calls; past them, `invalid-request` naming the bound.

use std::time::Instant;

use wasmtime::StoreContextMut;
use wasmtime::component::Linker;

use super::bindings::v0_3::ahp::agent::metering::BudgetState;
use super::bindings::v0_3::ahp::agent::model as wit;
use super::context::{AgentCtx, Metered};
use super::model_request::{self, GuestRequest};
use crate::gateway::{self, Gateway, TURN_MARGIN};

/// `complete` calls one turn may make: an agent loop of many steps, each a durable reservation
/// and settlement (two fsyncs) and a provider call.
pub const MAX_COMPLETIONS_PER_TURN: u32 = 64;
/// `estimate` calls one turn may make (each reads the budget).
pub const MAX_ESTIMATES_PER_TURN: u32 = 256;

/// Links `ahp:agent/model@0.3.0`.
pub(crate) fn add_to_linker<T: Metered>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let mut inst = linker.instance("ahp:agent/model@0.3.0")?;
    inst.func_wrap("models", |mut cx: StoreContextMut<'_, T>, (): ()| {
        let models = gateway_of(cx.data_mut().agent()).models();
        Ok((models.into_iter().map(wit::ModelInfo::from).collect::<Vec<_>>(),))
    })?;
    inst.func_wrap(
        "estimate",
        |mut cx: StoreContextMut<'_, T>, (request,): (GuestRequest,)| {
            let st = cx.data_mut().agent();
            st.calls.estimates += 1;
            if st.calls.estimates > MAX_ESTIMATES_PER_TURN {
                return Ok((Err(wit::Error::InvalidRequest(format!(
                    "more than {MAX_ESTIMATES_PER_TURN} estimate calls in one turn"
                ))),));
            }
            let request = match model_request::read(&mut cx, &request)? {
                Ok(request) => request,
                Err(refused) => return Ok((Err(refused.into()),)),
            };
            T::settle(&mut cx)?;
            let st = cx.data_mut().agent();
            let estimate = gateway_of(st).estimate(&request);
            Ok((estimate
                .map(|p| wit::Reservation {
                    input_tokens: p.input_tokens_bound,
                    max_output_tokens: p.max_output_tokens,
                    reserved_micro_usd: p.reserved_micro_usd,
                })
                .map_err(Into::into),))
        },
    )?;
    inst.func_wrap_async(
        "complete",
        |mut cx: StoreContextMut<'_, T>, (request,): (GuestRequest,)| {
            Box::new(async move {
                let st = cx.data_mut().agent();
                st.calls.completions += 1;
                if st.calls.completions > MAX_COMPLETIONS_PER_TURN {
                    return Ok((Err(wit::Error::InvalidRequest(format!(
                        "more than {MAX_COMPLETIONS_PER_TURN} complete calls in one turn"
                    ))),));
                }
                let request = match model_request::read(&mut cx, &request)? {
                    Ok(request) => request,
                    Err(refused) => return Ok((Err(refused.into()),)),
                };
                T::settle(&mut cx)?;
                let st = cx.data_mut().agent();
                // An activation's held writes (a credential's audit, its spend) are durable before
                // the request can carry anything out and before the gateway reserves the budget.
                if let Err(e) = st.journal.flush() {
                    return Ok((Err(wit::Error::Unavailable(wit::Failure {
                        message: format!("the activation's audit could not be recorded: {e}"),
                        charged_micro_usd: 0,
                    })),));
                }
                let deadline = (st.turn_started + st.wall_clock_per_turn)
                    .checked_sub(TURN_MARGIN)
                    .unwrap_or_else(Instant::now);
                let gateway = gateway_of(st);
                let result = gateway.complete(&request, deadline).await;
                // The charge (or a release) changed the budget: cut the fuel left to match.
                let remaining = match &result {
                    Ok(c) => c.budget.remaining_micro_usd(),
                    Err(_) => {
                        let st = cx.data_mut().agent();
                        let budget = st.db(|db| db.budget(&st.transfer)).ok().flatten();
                        budget.map_or(0, |b| b.remaining_micro_usd())
                    }
                };
                T::external_spend(&mut cx, remaining)?;
                let fuel_left = cx.get_fuel().unwrap_or(0);
                Ok((result
                    .map(|c| wit::Completion {
                        parts: c.parts.into_iter().map(Into::into).collect(),
                        stop_reason: c.stop_reason.into(),
                        usage: wit::Usage {
                            input_tokens: c.usage.input_tokens,
                            cache_read_tokens: c.usage.cache_read_tokens,
                            cache_write_tokens: c.usage.cache_write_tokens,
                            output_tokens: c.usage.output_tokens,
                        },
                        charged_micro_usd: c.charged_micro_usd,
                        budget: BudgetState {
                            allocated_micro_usd: c.budget.allocated_micro_usd,
                            spent_micro_usd: c.budget.spent_micro_usd,
                            remaining_micro_usd: c.budget.remaining_micro_usd(),
                            fuel_left_this_turn: fuel_left,
                        },
                    })
                    .map_err(Into::into),))
            })
        },
    )?;
    Ok(())
}

/// The gateway of this sandbox's transfer over the policy's models.
fn gateway_of(st: &AgentCtx) -> Gateway {
    Gateway::new(
        st.grants.models.clone(),
        st.vault.clone(),
        st.db.clone(),
        st.transfer.clone(),
    )
}

impl From<gateway::ModelInfo> for wit::ModelInfo {
    fn from(m: gateway::ModelInfo) -> Self {
        Self {
            id: m.id,
            context_tokens: m.context_tokens,
            max_output_tokens: m.max_output_tokens,
            prices: wit::Prices {
                input: m.prices.input,
                output: m.prices.output,
                cache_read: m.prices.cache_read,
                cache_write: m.prices.cache_write,
            },
        }
    }
}

impl From<gateway::Part> for wit::Part {
    fn from(p: gateway::Part) -> Self {
        match p {
            gateway::Part::Text(t) => wit::Part::Text(t),
            gateway::Part::ToolCall(c) => wit::Part::ToolCall(wit::ToolCall {
                id: c.id,
                name: c.name,
                arguments_json: c.arguments_json,
            }),
            gateway::Part::ToolResult(r) => wit::Part::ToolResult(wit::ToolResult {
                call_id: r.call_id,
                content: r.content,
                is_error: r.is_error,
            }),
        }
    }
}

impl From<gateway::Failure> for wit::Failure {
    fn from(f: gateway::Failure) -> Self {
        Self {
            message: f.message,
            charged_micro_usd: f.charged_micro_usd,
        }
    }
}

impl From<gateway::StopReason> for wit::StopReason {
    fn from(r: gateway::StopReason) -> Self {
        match r {
            gateway::StopReason::EndTurn => Self::EndTurn,
            gateway::StopReason::MaxTokens => Self::MaxTokens,
            gateway::StopReason::ToolUse => Self::ToolUse,
            gateway::StopReason::ContentFilter => Self::ContentFilter,
            gateway::StopReason::Other => Self::Other,
        }
    }
}

impl From<gateway::Error> for wit::Error {
    fn from(e: gateway::Error) -> Self {
        match e {
            gateway::Error::UnknownModel(m) => wit::Error::UnknownModel(m),
            gateway::Error::InvalidRequest(m) => wit::Error::InvalidRequest(m),
            gateway::Error::TooLarge(m) => wit::Error::TooLarge(m),
            gateway::Error::InsufficientBudget(n) => wit::Error::InsufficientBudget(n),
            gateway::Error::RateLimited(f) => wit::Error::RateLimited(f.into()),
            gateway::Error::ProviderError(f) => wit::Error::ProviderError(f.into()),
            gateway::Error::Unavailable(f) => wit::Error::Unavailable(f.into()),
            gateway::Error::Insolvent => wit::Error::Insolvent,
        }
    }
}
