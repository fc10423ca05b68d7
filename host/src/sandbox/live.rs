//! The live map: sandboxes kept between runs of their transfer, taken out for each run, and
//! released (also mid-run: the map remembers, and the run's `keep` drops it instead).

use std::collections::HashMap;
use std::sync::MutexGuard;

use super::Sandboxes;
use super::run::Sandbox;
use crate::shared_store::StoreLock;

/// The live sandboxes of a host, and the transfers whose sandbox is out of the map for a run.
#[derive(Default)]
pub(super) struct Live {
    /// Sandboxes waiting for their transfer's next run, keyed by transfer id.
    pub(super) idle: HashMap<String, Sandbox>,
    /// Transfers whose sandbox is out for a run, and whether it was released meanwhile (then
    /// it is dropped when the run ends, not kept).
    pub(super) running: HashMap<String, bool>,
}

impl Sandboxes {
    /// How many sandboxes are live (resumed and kept for later runs; a sandbox out for a run
    /// is not counted).
    pub fn live_count(&self) -> usize {
        self.live().idle.len()
    }

    /// Keeps `sandbox` live for later runs of its transfer (replacing any other of it) —
    /// unless it was taken out for a run ([`take`](Self::take), [`reserve`](Self::reserve))
    /// and released ([`drop_sandbox`](Self::drop_sandbox)) while that run ran: then it is
    /// dropped, so a release mid-run is never undone. Returns whether it was kept.
    pub fn keep(&self, sandbox: Sandbox) -> bool {
        let transfer = sandbox.transfer().to_owned();
        let mut live = self.live();
        if live.running.remove(&transfer) == Some(true) {
            drop(live);
            tracing::info!(%transfer, "not keeping a sandbox released during its turn");
            return false;
        }
        live.idle.insert(transfer, sandbox);
        true
    }

    /// Takes the live sandbox of `transfer` out of the map for a run (`None` if there is none,
    /// or a run of it is running). Until the run ends with [`keep`](Self::keep) or
    /// [`end_run`](Self::end_run), a [`drop_sandbox`](Self::drop_sandbox) of it is remembered.
    pub fn take(&self, transfer: &str) -> Option<Sandbox> {
        let mut live = self.live();
        let sandbox = live.idle.remove(transfer)?;
        live.running.insert(transfer.to_owned(), false);
        Some(sandbox)
    }

    /// Marks a run of `transfer` as running in a sandbox set up fresh for it (none was live):
    /// as [`take`](Self::take) does for a live one. Returns `false` if a sandbox of it is live
    /// or out for a run already.
    pub fn reserve(&self, transfer: &str) -> bool {
        let mut live = self.live();
        if live.idle.contains_key(transfer) || live.running.contains_key(transfer) {
            return false;
        }
        live.running.insert(transfer.to_owned(), false);
        true
    }

    /// Ends a run of `transfer` whose sandbox is not kept (it was dropped, or never set up).
    pub fn end_run(&self, transfer: &str) {
        self.live().running.remove(transfer);
    }

    /// The live sandboxes (a panic elsewhere leaves the map usable).
    pub(super) fn live(&self) -> MutexGuard<'_, Live> {
        self.live.locked()
    }

    /// Drops the live sandbox of `transfer` (its Store, instance and pool slot); one out for a
    /// run is dropped when its run ends instead of being kept. Returns whether there was one.
    pub fn drop_sandbox(&self, transfer: &str) -> bool {
        let mut live = self.live();
        if live.idle.remove(transfer).is_some() {
            return true;
        }
        match live.running.get_mut(transfer) {
            Some(released) => {
                *released = true;
                true
            }
            None => false,
        }
    }

    /// What the live sandbox of `transfer` wrote to stdout and stderr (bounded by
    /// [`MAX_GUEST_LOG_BYTES`](super::MAX_GUEST_LOG_BYTES)).
    pub fn guest_log(&self, transfer: &str) -> Option<String> {
        self.live().idle.get(transfer).map(Sandbox::guest_log)
    }
}
