//! The gateway's side of the reservation rule: the input-token bound it reserves for, and the
//! open reservation that is always settled — by the call, or, when the call's future is dropped
//! (the turn's wall clock ran out mid-call), by its `Drop`, which charges it in full.

use std::time::{Duration, Instant};

use ahp_store::model_call::{CallOutcome, Settlement};

use crate::shared_store::{SharedStore, StoreLock};

/// Tokens added to a request's size for what providers add around it: role and message framing,
/// tool definitions rendered into the prompt, Anthropic's hidden tool-use system prompt (about
/// 350 tokens). The bound is generous: every byte-level BPE token covers at least one byte of
/// text, and the request's JSON has more bytes than its text.
pub const INPUT_TOKEN_OVERHEAD: u64 = 1024;

/// The upper bound of the input tokens of a provider request of `body_bytes` bytes to a model of
/// `context_tokens`: one token per byte of the request as sent, plus [`INPUT_TOKEN_OVERHEAD`],
/// and never more than the context (a provider reads, and bills, no more than that).
pub fn input_tokens_bound(body_bytes: usize, context_tokens: u32) -> u64 {
    (body_bytes as u64)
        .saturating_add(INPUT_TOKEN_OVERHEAD)
        .min(u64::from(context_tokens))
}

/// A reservation held for a call in flight. [`settle`](Self::settle) settles it once; dropped
/// unsettled, it is settled as an unknown outcome (charged in full) on a blocking thread.
pub(super) struct Open {
    db: SharedStore,
    call_id: String,
    started: Instant,
    settled: bool,
}

impl Open {
    pub(super) fn new(db: SharedStore, call_id: String) -> Self {
        Self {
            db,
            call_id,
            started: Instant::now(),
            settled: false,
        }
    }

    /// Settles the call as `outcome` now.
    pub(super) fn settle(&mut self, outcome: CallOutcome) -> ahp_store::Result<Settlement> {
        self.settled = true;
        let latency = self.started.elapsed();
        self.db.locked().settle_model_call(&self.call_id, outcome, latency)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let (db, call_id, latency) = (
            self.db.clone(),
            std::mem::take(&mut self.call_id),
            self.started.elapsed(),
        );
        let settle = move || settle_dropped(&db, &call_id, latency);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(settle)),
            Err(_) => settle(),
        }
    }
}

fn settle_dropped(db: &SharedStore, call_id: &str, latency: Duration) {
    let settled = db.locked().settle_model_call(call_id, CallOutcome::Unknown, latency);
    match settled {
        Ok(s) => {
            tracing::info!(%call_id, charged = s.charged_micro_usd, "a model call dropped mid-flight was charged its reservation")
        }
        // Left open: the next takeover charges it in full.
        Err(e) => tracing::error!(%call_id, error = %e, "a dropped model call could not be settled"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_size_plus_the_overhead_within_the_context() {
        assert_eq!(input_tokens_bound(0, 128_000), INPUT_TOKEN_OVERHEAD);
        assert_eq!(input_tokens_bound(10_000, 128_000), 10_000 + INPUT_TOKEN_OVERHEAD);
        assert_eq!(input_tokens_bound(1 << 30, 128_000), 128_000);
    }
}
