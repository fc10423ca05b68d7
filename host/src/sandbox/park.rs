//! Parking: dropping the sandboxes of agents that can do without one, so a host carries far
//! more agents than it keeps sandboxes.
//!
//! A conversation agent's durable state is its checkpoint, never its sandbox: after a restart
//! its next turn runs in a fresh sandbox from the cached component, and the guest restores what
//! it needs from `checkpoint`. A *parked* agent is one whose sandbox was dropped the same way
//! while its host still carries it: it is still ready (its wakes are claimed and dispatched
//! here), and its next turn instantiates a fresh sandbox and runs `turn` — no `resume` —
//! charged like any turn. Nothing of it stays in the host's memory: the controller is told
//! ([`Carriers::parked`](crate::carrier::Carriers::parked)) and forgets its carrier, which the
//! store's rows hold. Two rules park a sandbox:
//!
//! - **Idle** ([`Parking::idle_after`]): a sandbox no run has used for that long, on the next
//!   sweep ([`Sandboxes::park_idle`], every reaper tick of `ahp serve`).
//! - **Room** ([`Parking::max_live`], and the engine's pool slots): before a sandbox is set up,
//!   the least recently used are parked until one more fits ([`Sandboxes::make_room`]).
//!
//! Only sandboxes that take turns are parked: a component built for `ahp:agent@0.1.0` only
//! resumes, and dropping it would end its agent.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Sandboxes;
use super::executor::Sandbox;

/// When a host parks its agents' sandboxes (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parking {
    /// Park a sandbox no run used for this long (`None`: never for idleness).
    pub idle_after: Option<Duration>,
    /// Most sandboxes kept or running at once; the least recently used are parked to make
    /// room. The engine's pool slots bound it too.
    pub max_live: usize,
}

impl Default for Parking {
    /// Idle for 15 minutes; no cap below the engine's pool.
    fn default() -> Self {
        Self {
            idle_after: Some(DEFAULT_IDLE_AFTER),
            max_live: usize::MAX,
        }
    }
}

/// How long a sandbox stays idle before it is parked unless the host is told otherwise.
pub const DEFAULT_IDLE_AFTER: Duration = Duration::from_secs(15 * 60);

impl Sandboxes {
    /// Sandboxes kept or running at once, at most: [`Parking::max_live`] within the engine's
    /// pool slots.
    pub fn live_cap(&self) -> usize {
        self.parking.max_live.min(self.slots)
    }

    /// Parks every turn-taking sandbox idle for at least [`Parking::idle_after`], as of `now`,
    /// and returns their transfers, least recently used first.
    pub fn park_idle(&self, now: Instant) -> Vec<String> {
        let Some(after) = self.parking.idle_after else {
            return Vec::new();
        };
        self.park_while(|_, since| now.saturating_duration_since(since) >= after)
    }

    /// Parks the least recently used turn-taking sandboxes until a sandbox for `transfer`
    /// fits within [`live_cap`](Self::live_cap), counting the sandboxes out for a run (one
    /// [reserved](Self::reserve) for `transfer` is counted once). Returns the transfers parked.
    pub fn make_room(&self, transfer: &str) -> Vec<String> {
        let cap = self.live_cap();
        let reserved = self.live().running.contains_key(transfer);
        let more = usize::from(!reserved);
        self.park_while(|holding, _| holding + more > cap)
    }

    /// Parks turn-taking sandboxes from the least recently used on while `park(sandboxes
    /// holding a slot, when this one was kept)` says so; stops at the first it declines. The
    /// sandboxes are dropped after the map's lock is released.
    fn park_while(&self, mut park: impl FnMut(usize, Instant) -> bool) -> Vec<String> {
        let mut parked: Vec<(String, Sandbox)> = Vec::new();
        {
            let mut live = self.live();
            let mut from = 0;
            while let Some((&order, transfer)) = live.order.range(from..).next() {
                from = order + 1;
                let transfer = transfer.clone();
                let kept = &live.idle[&transfer];
                if !kept.sandbox.takes_turns() {
                    continue;
                }
                if !park(live.holding_slots(), kept.since) {
                    break;
                }
                if let Some(sandbox) = live.remove(&transfer) {
                    parked.push((transfer, sandbox));
                }
            }
        }
        let count = parked.len() as u64;
        self.parked.fetch_add(count, Ordering::Relaxed);
        let parked: Vec<String> = parked
            .into_iter()
            .map(|(transfer, sandbox)| {
                drop(sandbox);
                tracing::debug!(%transfer, "parked the sandbox");
                transfer
            })
            .collect();
        if !parked.is_empty()
            && let Some(carriers) = self.carriers.get().and_then(std::sync::Weak::upgrade)
        {
            carriers.parked(&parked);
        }
        parked
    }

    /// Sandboxes parked since the host started (each park counts; a parked agent that ran
    /// again and was parked again counts twice).
    pub fn parks(&self) -> u64 {
        self.parked.load(Ordering::Relaxed)
    }
}
