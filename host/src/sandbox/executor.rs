//! The run executor: one call of a guest (`resume` or `turn`, [`Call`]) in its sandbox under
//! the tier's ceilings, and what the run reports ([`Run`], [`RunOutcome`]).
//!
//! [`Sandboxes::prepare`] sets up a fresh [`Sandbox`] for a transfer (its Store, not yet
//! instantiated); [`Sandboxes::run`] checks the component's core instances, memories and tables
//! ([`counts`](super::counts)) before the first instantiation, instantiates from the cached
//! `InstancePre`, calls the guest under the run's wall-clock deadline, settles the meter, has
//! any `ceiling_exceeded` audited ([`audit`](super::audit)) and classifies how the run ended.

use std::sync::Arc;

use ahp_store::Transfer;
use wasmtime::{AsContextMut, Trap, UpdateDeadline};

use super::audit::{MAX_GUEST_MESSAGE_BYTES, one_line, truncate};
use super::cache::Prepared;
use super::instance::{AgentInstance, AgentPre};
use super::state::SandboxState;
use super::{Ceiling, ComponentCounts, Error, METER_QUANTUM_FUEL, Sandboxes, host_resources, meter};
use crate::interfaces::TurnCtx;
use crate::interfaces::context::HeldInbox;
use crate::shared_store::StoreLock;

/// What a run calls in the guest: the export that names its layer.
#[derive(Debug, Clone)]
pub enum Call {
    /// `resume`: activation (and, for tests and the benches, a repeated resume).
    Resume,
    /// `turn`: a conversation turn for a dispatched wake.
    Turn(Box<TurnCtx>),
}

/// How one run of a guest [`Call`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// The guest's `resume` (or `turn`) returned `Ok`.
    Returned,
    /// The guest's `resume` (or `turn`) returned an error; the guest's message (bounded).
    GuestError(String),
    /// The guest broke a ceiling and was stopped.
    CeilingExceeded(Ceiling),
    /// The guest ran out of budget (not of its per-turn ceiling) and was stopped.
    BudgetExhausted,
    /// The guest trapped for another reason (a panic, an out-of-bounds access, …).
    Trapped(String),
    /// The host stopped the guest: the store refused its spend (e.g. the transfer was
    /// terminated while it ran).
    Stopped(String),
    /// The host cut the run short for a reason of its own, not the guest's (its host lease is
    /// no longer fresh: another host may carry the agent from now on). Nothing about the
    /// transfer follows from it: its sandbox is dropped, its transfer left as it is.
    Cancelled(String),
}

/// What one run did in its sandbox.
#[derive(Debug, Clone)]
pub struct Run {
    /// How the run ended.
    pub outcome: RunOutcome,
    /// Fuel the run burnt.
    pub fuel_consumed: u64,
    /// Compute spend recorded over the sandbox's life so far, micro-USD.
    pub compute_micro_usd: u64,
    /// Time the run spent in the database.
    pub store_time: std::time::Duration,
    /// What an author needs to see of a run that did not return `ok`; `None` when it did.
    pub diagnosis: Option<Diagnosis>,
    /// The turn's last compute spend, for the caller to record with the turn's end: only for a
    /// turn that returned after [`Sandbox::defer_last_settlement`] (see `meter`).
    pub(crate) deferred_spend: Option<meter::DeferredSpend>,
    /// What a conversation turn did with its inbox that is not recorded yet, for the caller to
    /// record with the turn's end (`Store::finish_turn_spending`), whatever the outcome.
    pub(crate) inbox: HeldInbox,
}

/// Longest tail of the guest's output a [`Diagnosis`] keeps, in bytes.
pub const DIAGNOSIS_LOG_BYTES: usize = 4096;

/// Longest trace a [`Diagnosis`] keeps, in bytes: the error chain and the innermost frames of
/// a wasm backtrace, which is what an author reads.
pub const MAX_DIAGNOSIS_TRACE_BYTES: usize = 16 * 1024;

/// A failed run as its author needs it (`ahp run` prints it): the whole error wasmtime
/// reported, and the last of what the guest wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    /// The whole error chain wasmtime reported, its wasm backtrace included (function names
    /// where the component kept its name section); `None` for a guest's own `err` and for a
    /// refusal before the guest ran.
    pub trace: Option<String>,
    /// The last [`DIAGNOSIS_LOG_BYTES`] the guest wrote to stdout and stderr, from a line start.
    pub guest_log_tail: String,
}

impl Run {
    /// The report of this run, which left `transfer`.
    pub fn report(self, transfer: Transfer) -> RunReport {
        RunReport {
            transfer,
            outcome: self.outcome,
            fuel_consumed: self.fuel_consumed,
            compute_micro_usd: self.compute_micro_usd,
            store_time: self.store_time,
            diagnosis: self.diagnosis,
        }
    }
}

/// What one run did, and the transfer it left.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The transfer after the run (e.g. `active`, `pushed` after a failed activation,
    /// `insolvent`).
    pub transfer: Transfer,
    /// How the run ended.
    pub outcome: RunOutcome,
    /// Fuel the run burnt.
    pub fuel_consumed: u64,
    /// Compute spend recorded over the sandbox's life so far, micro-USD.
    pub compute_micro_usd: u64,
    /// Time the run spent in the database (its reads and commits, lock waits included):
    /// the rest of a run's time is the sandbox's own.
    pub store_time: std::time::Duration,
    /// What an author needs to see of a run that did not return `ok` ([`Run::diagnosis`]).
    pub diagnosis: Option<Diagnosis>,
}

/// One transfer's sandbox: its wasmtime Store, and its instance once the first run made it.
pub struct Sandbox {
    pub(super) store: wasmtime::Store<SandboxState>,
    pub(super) pre: AgentPre,
    /// What instantiating `pre` creates, checked against the ceilings before it is.
    pub(super) counts: ComponentCounts,
    pub(super) agent: Option<AgentInstance>,
    pub(super) egress_audited: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("transfer", &self.transfer())
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// The transfer it continues.
    pub fn transfer(&self) -> &str {
        self.store.data().transfer()
    }

    /// Holds what the guest writes from now on (credential audit, checkpoint, spend, the
    /// meter's settlements) for the activation's end to record, until
    /// [`take_activation_writes`](Self::take_activation_writes) (see
    /// [`Journal`](crate::interfaces::Journal)).
    pub fn hold_activation_writes(&self) {
        self.store.data().agent.journal.hold();
    }

    /// Stops holding and hands out the writes held since
    /// [`hold_activation_writes`](Self::hold_activation_writes), not yet recorded.
    pub fn take_activation_writes(&self) -> ahp_store::ActivationWrites {
        self.store.data().agent.journal.take().unwrap_or_default()
    }

    /// Whether its component exports `turn` (built for `ahp:agent@0.2.0`).
    pub fn takes_turns(&self) -> bool {
        self.pre.takes_turns()
    }

    /// What the guest wrote to stdout and stderr (bounded by [`MAX_GUEST_LOG_BYTES`](super::MAX_GUEST_LOG_BYTES)).
    pub fn guest_log(&self) -> String {
        String::from_utf8_lossy(&self.store.data().log.contents()).into_owned()
    }
}

impl Sandboxes {
    /// Sets up a fresh sandbox for `t` (not yet instantiated: its first [`run`](Self::run)
    /// instantiates it).
    ///
    /// # Errors
    ///
    /// [`Error::NotProvisioned`], [`Error::UnknownComponent`], [`Error::InvalidComponent`],
    /// [`Error::Store`] if the snapshot cannot be read.
    pub fn prepare(&self, t: &Transfer) -> Result<Sandbox, Error> {
        let (tier, component) = t
            .tier
            .zip(t.component.as_deref())
            .ok_or_else(|| Error::NotProvisioned(t.id.clone()))?;
        let (snapshot, record) = {
            let mut db = self.store.locked();
            (db.snapshot(&t.id)?, db.component(component)?)
        };
        let record = record.ok_or_else(|| Error::UnknownComponent(component.to_owned()))?;
        let Prepared { pre, counts } = self.prepared(&record.digest)?;
        // A slot of the pool for this sandbox: park the least recently used if none is free.
        for parked in self.make_room(&t.id) {
            tracing::info!(transfer = %parked, "parked an agent's sandbox to make room");
        }
        let limits = tier.limits();
        let ceilings = self.cap.tighten(limits);
        let grants = Arc::new(self.policy().grants(&snapshot.mcp_config));
        let mut state = SandboxState::new(
            t.id.clone(),
            Arc::new(snapshot),
            limits,
            ceilings,
            grants,
            self.store.clone(),
            self.vault.clone(),
        );
        if let Some(carriers) = self.carriers.get() {
            state.agent.carriers = carriers.clone();
        }
        let mut store = wasmtime::Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        // What one host call may copy in from the guest (see `host_resources`).
        store.set_hostcall_fuel(host_resources::hostcall_copy_bytes(&ceilings));
        // Hand fuel out an interval at a time, so that the fuel burnt reaches the Store even in
        // a call-free loop: what the epoch callback, the settlements and a wall-clock trap see.
        store
            .fuel_async_yield_interval(Some(meter::FUEL_FLUSH_INTERVAL))
            .map_err(|e| Error::Wasmtime(format!("{e:#}")))?;
        store.epoch_deadline_callback(|mut cx| {
            let st = cx.data();
            if st.turn_started.elapsed() > st.ceilings.wall_clock_per_turn {
                cx.data_mut().limiter.breach = Some(Ceiling::WallClock);
                // Charge what the guest burnt before trapping it (the run settles again after).
                meter::settle(&mut cx)?;
                return Err(wasmtime::format_err!("wall-clock ceiling reached"));
            }
            if meter::unsettled(&cx) >= METER_QUANTUM_FUEL {
                meter::settle(&mut cx)?;
            }
            Ok(UpdateDeadline::Continue(1))
        });
        Ok(Sandbox {
            store,
            pre,
            counts,
            agent: None,
            egress_audited: Default::default(),
        })
    }

    /// Runs one call of `sandbox`'s guest: `call` under the tier's ceilings, metered against the
    /// budget, its ceiling breaches audited in the transfer's log. Knows nothing of the
    /// transfer's lifecycle: what the outcome means for it is the caller's (`activation`,
    /// `agents`).
    pub fn run(&self, sandbox: &mut Sandbox, call: Call) -> Run {
        wasmtime_wasi::runtime::in_tokio(self.run_async(sandbox, call, std::future::pending()))
    }

    /// [`run`](Self::run) as a future, for a turn that runs as a task of the runtime. `stop`
    /// ends the run early when it completes first (its future is dropped, which unwinds the
    /// guest off its fiber: wasmtime's async support makes that safe): the run is then
    /// [`RunOutcome::Cancelled`] with the reason `stop` gave, and its sandbox must not be kept.
    pub async fn run_async(
        &self,
        sandbox: &mut Sandbox,
        call: Call,
        stop: impl std::future::Future<Output = String>,
    ) -> Run {
        let (outcome, fuel, trace, deferred_spend) = run(sandbox, call, stop).await;
        self.audit_ceiling(sandbox, &outcome);
        sandbox.store.data_mut().agent.turn = None;
        let inbox = sandbox.store.data_mut().agent.take_held_inbox();
        let diagnosis = (outcome != RunOutcome::Returned).then(|| Diagnosis {
            trace,
            guest_log_tail: log_tail(&sandbox.store.data().log.contents(), DIAGNOSIS_LOG_BYTES),
        });
        let st = sandbox.store.data();
        Run {
            outcome,
            fuel_consumed: fuel,
            compute_micro_usd: st.meter.charged_micro_usd,
            store_time: st.agent.store_time.get(),
            diagnosis,
            deferred_spend,
            inbox,
        }
    }

    /// Instantiates and resumes a sandbox for `transfer` without any activation bookkeeping,
    /// then drops it: the warm path the benchmarks measure (the transfer must have a budget).
    /// Returns how the run ended and the time it spent in the database.
    ///
    /// # Errors
    ///
    /// As the setup half of [`activate`](Self::activate).
    #[doc(hidden)]
    pub fn trial_resume(&self, transfer: &Transfer) -> Result<(RunOutcome, std::time::Duration), Error> {
        let mut sandbox = self.prepare(transfer)?;
        let (outcome, _, _, _) =
            wasmtime_wasi::runtime::in_tokio(run(&mut sandbox, Call::Resume, std::future::pending()));
        Ok((outcome, sandbox.store.data().agent.store_time.get()))
    }
}

/// The last `max` bytes of `log`, starting at a line (or, for one longer line, a character).
fn log_tail(log: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(log);
    if text.len() <= max {
        return text.into_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let tail = &text[start..];
    match tail.find('\n') {
        Some(nl) if nl + 1 < tail.len() => tail[nl + 1..].to_owned(),
        _ => tail.to_owned(),
    }
}

/// One run: check the component's counts (before the first instantiation), fuel the Store,
/// instantiate if needed, call the guest under the run's wall-clock deadline, settle the meter,
/// classify.
///
/// The guest runs on wasmtime's async path: a future, polled by the turn's task on the
/// runtime (or, for a synchronous caller, by `wasmtime_wasi::runtime::in_tokio` on its own
/// thread), so a guest waiting on its model, a tool or a sleep holds no thread. Two things
/// end a run at its wall-clock ceiling: while wasm runs, the epoch callback (see `prepare`)
/// traps it; while the guest waits in a host call (`wasi:io/poll`, what `std::thread::sleep`
/// becomes, a stream, an HTTP response), the call's future is pending and `timeout_at` drops
/// it, which unwinds the guest off its fiber and cancels the wait. Either way no host thread
/// stays behind with the guest. `stop` completing first ends the run the same way, as
/// [`RunOutcome::Cancelled`].
async fn run(
    sandbox: &mut Sandbox,
    call: Call,
    stop: impl std::future::Future<Output = String>,
) -> (RunOutcome, u64, Option<String>, Option<meter::DeferredSpend>) {
    let store = &mut sandbox.store;
    let turn = match call {
        Call::Resume => None,
        Call::Turn(t) => Some(*t),
    };
    let is_turn = turn.is_some();
    let defer = meter::take_defer(&mut store.as_context_mut());
    store.data_mut().agent.start_turn(turn);
    if sandbox.agent.is_none()
        && let Some(ceiling) = sandbox.counts.breach(&store.data().ceilings)
    {
        store.data_mut().limiter.breach = Some(ceiling);
        return (RunOutcome::CeilingExceeded(ceiling), 0, None, None);
    }
    let fuel = match meter::start_turn(&mut store.as_context_mut()) {
        Ok(f) => f,
        Err(e) => return (RunOutcome::Trapped(format!("{e:#}")), 0, Some(format!("{e:?}")), None),
    };
    if fuel == 0 {
        return (RunOutcome::BudgetExhausted, 0, None, None);
    }
    store.set_epoch_deadline(1);
    let deadline = store.data().turn_started + store.data().ceilings.wall_clock_per_turn;
    // What ended the call: the guest, the wall clock while it waited, or `stop`. The guest's
    // future is dropped when another branch wins.
    let ended = tokio::select! {
        biased;
        why = stop => Err(Some(why)),
        timed = tokio::time::timeout_at(deadline.into(), call_guest(sandbox, is_turn)) => timed.map_err(|_| None),
    };
    let mut stopped = None;
    let result = match ended {
        Ok(result) => result,
        Err(None) => {
            sandbox.store.data_mut().limiter.breach = Some(Ceiling::WallClock);
            Err(wasmtime::format_err!(
                "wall-clock ceiling reached while the guest waited in a host call"
            ))
        }
        Err(Some(why)) => {
            let e = wasmtime::format_err!("the host stopped the guest: {why}");
            stopped = Some(why);
            Err(e)
        }
    };
    let store = &mut sandbox.store;
    let defer = defer && matches!(result, Ok(Ok(())));
    let deferred_spend = meter::end_turn(&mut store.as_context_mut(), defer).unwrap_or_else(|e| {
        tracing::error!(error = %e, "settling the meter failed");
        None
    });
    let st = store.data();
    // A trap's backtrace has a frame per wasm call (a deep recursion: thousands): kept to a
    // bound, like the guest's own error message.
    let trace = result
        .as_ref()
        .err()
        .map(|e| truncate(&format!("{e:?}"), MAX_DIAGNOSIS_TRACE_BYTES));
    let outcome = match result {
        Ok(Ok(())) => RunOutcome::Returned,
        Ok(Err(message)) => RunOutcome::GuestError(truncate(&message, MAX_GUEST_MESSAGE_BYTES)),
        Err(e) => {
            // The whole error, wasm backtrace included, is for the operator's log; the event
            // log and the tool error get one line (`one_line`).
            tracing::warn!(transfer = %st.transfer(), error = ?e, "guest stopped");
            if let Some(why) = stopped.or_else(|| st.agent.lost.clone()) {
                RunOutcome::Cancelled(why)
            } else if let Some(c) = st.limiter.breach {
                RunOutcome::CeilingExceeded(c)
            } else if let Some(r) = &st.meter.refused {
                RunOutcome::Stopped(r.clone())
            } else {
                match e.downcast_ref::<Trap>() {
                    Some(Trap::OutOfFuel) if st.meter.hit_ceiling() => {
                        RunOutcome::CeilingExceeded(Ceiling::FuelPerTurn)
                    }
                    Some(Trap::OutOfFuel) => RunOutcome::BudgetExhausted,
                    Some(Trap::StackOverflow) => RunOutcome::CeilingExceeded(Ceiling::Stack),
                    Some(Trap::Interrupt) => RunOutcome::CeilingExceeded(Ceiling::WallClock),
                    _ if host_resources::is_host_resources_breach(&e) => {
                        RunOutcome::CeilingExceeded(Ceiling::HostResources)
                    }
                    _ => count_ceiling(&e).map_or_else(
                        || RunOutcome::Trapped(truncate(&one_line(&e), MAX_GUEST_MESSAGE_BYTES)),
                        RunOutcome::CeilingExceeded,
                    ),
                }
            }
        }
    };
    (outcome, st.meter.turn_consumed, trace, deferred_spend)
}

/// Instantiates the sandbox's component if this is its first run, and calls `resume` (or
/// `turn`).
async fn call_guest(sandbox: &mut Sandbox, turn: bool) -> wasmtime::Result<Result<(), String>> {
    let store = &mut sandbox.store;
    let agent = match &sandbox.agent {
        Some(a) => a,
        None => sandbox.agent.insert(sandbox.pre.instantiate_async(&mut *store).await?),
    };
    if turn {
        agent.call_turn(&mut *store).await
    } else {
        agent.call_resume(&mut *store).await
    }
}

/// Instantiation refused by the limiter's counts (wasmtime reports them as errors, not traps).
///
/// A last resort, matched on wasmtime's message as its error has no type: the counts are
/// checked before instantiating ([`ComponentCounts::breach`]), exactly for memories and tables,
/// so only core instances that the static count cannot see (the adapter modules wasmtime adds
/// between composed components, see [`counts`]) can still reach the limiter.
fn count_ceiling(e: &wasmtime::Error) -> Option<Ceiling> {
    let msg = format!("{e:#}");
    if msg.contains("instance count too high") {
        Some(Ceiling::Instances)
    } else if msg.contains("table count too high") {
        Some(Ceiling::Tables)
    } else if msg.contains("memory count too high") {
        Some(Ceiling::Memories)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::log_tail;

    #[test]
    fn the_log_tail_keeps_whole_last_lines_within_its_bound() {
        assert_eq!(log_tail(b"one\ntwo\n", 64), "one\ntwo\n");
        let log = format!("{}\nlast line\n", "x".repeat(100));
        assert_eq!(log_tail(log.as_bytes(), 20), "last line\n");
        // One line longer than the bound: its end, cut at a character.
        let long = "é".repeat(50);
        let tail = log_tail(long.as_bytes(), 11);
        assert!(tail.len() <= 11 && tail.chars().all(|c| c == 'é'), "{tail:?}");
    }
}
