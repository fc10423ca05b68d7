//! What a model call may cost: a model's prices, what a call used, and the reservation a call
//! of bounded size needs ([`plan_reservation`]: a pure function, so the gateway's `estimate`
//! and the store's reservation agree by construction).

use serde::Serialize;

use super::{MAX_PRICE_MICRO_USD_PER_MTOK, MIN_OUTPUT_TOKENS};
use crate::error::{Error, Result};

/// A model's prices, in integer micro-USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelPrices {
    /// Input tokens neither read from nor written to a prompt cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write: u64,
}

/// What one call used, with one meaning across providers: the four counts are disjoint, and
/// the call's input is `input + cache_read + cache_write`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelUsage {
    /// Input tokens neither read from nor written to a prompt cache.
    pub input_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

/// `ceil(Σ tokens × price / 1e6)`, saturating at `u64::MAX`.
fn cost(parts: &[(u64, u64)]) -> u64 {
    let total: u128 = parts.iter().map(|&(t, p)| u128::from(t) * u128::from(p)).sum();
    u64::try_from(total.div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

impl ModelPrices {
    /// What `usage` costs at these prices, rounded up to the micro-USD.
    pub fn cost(&self, usage: &ModelUsage) -> u64 {
        cost(&[
            (usage.input_tokens, self.input),
            (usage.cache_read_tokens, self.cache_read),
            (usage.cache_write_tokens, self.cache_write),
            (usage.output_tokens, self.output),
        ])
    }

    /// The highest of the three input prices: what an input token costs at worst, whichever
    /// way the provider's cache counts it.
    pub fn max_input(&self) -> u64 {
        self.input.max(self.cache_read).max(self.cache_write)
    }

    pub(super) fn validate(&self) -> Result<()> {
        for (field, p) in [
            ("prices.input", self.input),
            ("prices.output", self.output),
            ("prices.cacheRead", self.cache_read),
            ("prices.cacheWrite", self.cache_write),
        ] {
            if p > MAX_PRICE_MICRO_USD_PER_MTOK {
                return Err(Error::invalid(
                    field,
                    format!("must be at most {MAX_PRICE_MICRO_USD_PER_MTOK} micro-USD per million tokens"),
                ));
            }
        }
        Ok(())
    }
}

/// What a call would hold: see [`plan_reservation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservationPlan {
    /// The upper bound of the input tokens.
    pub input_tokens_bound: u64,
    /// The output cap the call runs with (at most what was asked for).
    pub max_output_tokens: u32,
    /// Its worst-case cost, in micro-USD.
    pub reserved_micro_usd: u64,
}

/// The reservation of a call of at most `input_tokens_bound` input tokens and `max_output_tokens`
/// output tokens at `prices`, when `remaining_micro_usd` is left: the output cap is lowered to
/// what the rest of the budget pays for after the input's worst case. `Err(shortfall)` when the
/// budget cannot pay for the input bound and `min(MIN_OUTPUT_TOKENS, max_output_tokens)` output
/// tokens; the shortfall is what is missing, in micro-USD. A pure function: the gateway's
/// `estimate` and [`Store::reserve_model_call`](crate::Store::reserve_model_call) agree by construction.
pub fn plan_reservation(
    prices: &ModelPrices,
    input_tokens_bound: u64,
    max_output_tokens: u32,
    remaining_micro_usd: u64,
) -> std::result::Result<ReservationPlan, u64> {
    let input_cost = cost(&[(input_tokens_bound, prices.max_input())]);
    let least = max_output_tokens.min(MIN_OUTPUT_TOKENS);
    let least_cost = input_cost.saturating_add(cost(&[(u64::from(least), prices.output)]));
    if least_cost > remaining_micro_usd || max_output_tokens == 0 {
        return Err(least_cost.saturating_sub(remaining_micro_usd).max(1));
    }
    let left = remaining_micro_usd - input_cost;
    let affordable = if prices.output == 0 {
        u64::MAX
    } else {
        // floor(left × 1e6 / price): its cost, rounded up, is still at most `left`.
        u64::try_from(u128::from(left) * 1_000_000 / u128::from(prices.output)).unwrap_or(u64::MAX)
    };
    let cap = u32::try_from(affordable.min(u64::from(max_output_tokens))).unwrap_or(max_output_tokens);
    Ok(ReservationPlan {
        input_tokens_bound,
        max_output_tokens: cap,
        reserved_micro_usd: input_cost + cost(&[(u64::from(cap), prices.output)]),
    })
}
