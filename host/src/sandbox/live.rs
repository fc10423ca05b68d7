//! The live map: sandboxes kept between runs of their transfer, taken out for each run, and
//! released (also mid-run: the map remembers, and the run's `keep` drops it instead). The map
//! also remembers the order sandboxes were last kept in, for [parking](super::park).

use std::collections::{BTreeMap, HashMap};
use std::sync::MutexGuard;
use std::time::Instant;

use super::Sandboxes;
use super::executor::Sandbox;
use crate::shared_store::StoreLock;

/// The live sandboxes of a host, and the transfers whose sandbox is out of the map for a run.
#[derive(Default)]
pub(super) struct Live {
    /// Sandboxes waiting for their transfer's next run, keyed by transfer id.
    pub(super) idle: HashMap<String, Kept>,
    /// The same sandboxes by when they were last kept, least recently first (the key is a
    /// counter: unique, and ordered as the keeps were).
    pub(super) order: BTreeMap<u64, String>,
    next: u64,
    /// Transfers whose sandbox is out for a run, and whether it was released meanwhile (then
    /// it is dropped when the run ends, not kept).
    pub(super) running: HashMap<String, bool>,
}

/// A sandbox in the live map, with when it was put there.
pub(super) struct Kept {
    pub(super) sandbox: Sandbox,
    /// When its last run ended.
    pub(super) since: Instant,
    /// Its key in [`Live::order`].
    order: u64,
}

impl Live {
    /// Puts `sandbox` in the map as the most recently used (replacing any other of it).
    fn insert(&mut self, transfer: String, sandbox: Sandbox) {
        self.remove(&transfer);
        let order = self.next;
        self.next += 1;
        self.order.insert(order, transfer.clone());
        let since = Instant::now();
        self.idle.insert(transfer, Kept { sandbox, since, order });
    }

    /// Takes the sandbox of `transfer` out of the map.
    pub(super) fn remove(&mut self, transfer: &str) -> Option<Sandbox> {
        let kept = self.idle.remove(transfer)?;
        self.order.remove(&kept.order);
        Some(kept.sandbox)
    }

    /// Sandboxes in the map and out for a run: what holds a slot of the engine's pool.
    pub(super) fn holding_slots(&self) -> usize {
        self.idle.len() + self.running.len()
    }
}

impl Sandboxes {
    /// How many sandboxes are live (resumed and kept for later runs; a sandbox out for a run
    /// is not counted).
    pub fn live_count(&self) -> usize {
        self.live().idle.len()
    }

    /// Whether `transfer` has a sandbox on this host, kept or out for a run: an agent without
    /// one is *parked* (its state is its checkpoint; its next turn starts a fresh sandbox).
    pub fn is_live(&self, transfer: &str) -> bool {
        let live = self.live();
        live.idle.contains_key(transfer) || live.running.contains_key(transfer)
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
        live.insert(transfer, sandbox);
        true
    }

    /// Takes the live sandbox of `transfer` out of the map for a run (`None` if there is none,
    /// or a run of it is running). Until the run ends with [`keep`](Self::keep) or
    /// [`end_run`](Self::end_run), a [`drop_sandbox`](Self::drop_sandbox) of it is remembered.
    pub fn take(&self, transfer: &str) -> Option<Sandbox> {
        let mut live = self.live();
        let sandbox = live.remove(transfer)?;
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
        if live.remove(transfer).is_some() {
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
        self.live().idle.get(transfer).map(|k| k.sandbox.guest_log())
    }
}
