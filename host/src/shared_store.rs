//! The one handle every part of a host uses to reach its database, and the one policy for a
//! lock a panicking holder poisoned.
//!
//! A host opens its [`Store`] once and shares it as a [`SharedStore`]. Every operation of the
//! store is one transaction that either commits or rolls back, so a thread that panicked while
//! holding the lock cannot have left the database half-written: the lock is recovered, not
//! propagated ([`StoreLock::locked`]). The same policy holds for every other mutex of the host.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ahp_store::Store;

/// The host's database, shared by its surfaces, its sandboxes and its controller.
pub type SharedStore = Arc<Mutex<Store>>;

/// Locking a [`SharedStore`] (or any host mutex) under the host's one poison policy.
pub trait StoreLock<T> {
    /// The guard, recovering the lock if a previous holder panicked.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T> StoreLock<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A new shared handle over `store`.
pub fn share(store: Store) -> SharedStore {
    Arc::new(Mutex::new(store))
}
