//! The one handle every part of a host uses to reach its database, and the one policy for a
//! lock a panicking holder poisoned.
//!
//! A host opens its database once, as a [`StorePool`] (several connections on SQLite, all
//! committing through one group commit; several sessions on PostgreSQL; one connection for a
//! store handed in whole), and shares it as a [`SharedStore`]. A caller borrows one connection
//! for one piece of work with [`StoreLock::locked`] and gives it back by dropping the guard, so
//! callers no longer wait for each other's whole operations, only for the database's own write
//! lock. Every operation of the store is one transaction that either commits or rolls back: a
//! check and an action that must see the same state are one store operation, never two calls
//! under one guard.
//!
//! The same trait locks every other mutex of the host: a thread that panicked while holding one
//! cannot have left the database half-written, so the lock is recovered, not propagated.

use std::ops::DerefMut;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ahp_store::{PooledStore, Store, StorePool};

/// The host's database, shared by its surfaces, its sandboxes and its controller.
pub type SharedStore = Arc<StorePool>;

/// Borrowing a [`SharedStore`]'s connection, or locking any host mutex, under the host's one
/// poison policy.
pub trait StoreLock<T> {
    /// What [`locked`](Self::locked) lends: exclusive use of a `T` until it is dropped.
    type Guard<'a>: DerefMut<Target = T>
    where
        Self: 'a;

    /// The guard, waiting for it if every one is taken and recovering a lock a previous holder
    /// panicked with.
    fn locked(&self) -> Self::Guard<'_>;
}

impl<T> StoreLock<T> for Mutex<T> {
    type Guard<'a>
        = MutexGuard<'a, T>
    where
        T: 'a;

    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl StoreLock<Store> for StorePool {
    type Guard<'a> = PooledStore<'a>;

    fn locked(&self) -> PooledStore<'_> {
        self.get()
    }
}

/// Runs `f`, a wait of unbounded length (for a guest's seat at the database, a guest's pause),
/// without holding up the runtime's other tasks: called from a task on a worker thread of a
/// multi-thread runtime (a turn), the worker first hands its other tasks to another thread
/// for the duration (`tokio::task::block_in_place`). Anywhere else — a blocking thread, a
/// plain thread, a current-thread runtime — `f` simply runs.
///
/// A turn's ordinary store calls do not go through it: they are short (a statement, a commit
/// that shares its fsync), and handing the worker over around each of them cost more than it
/// saved (BENCHMARKS.md, "Every agent thinks at once").
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// A new shared handle over `store`: a pool as opened, or a single store as a pool of one.
pub fn share(store: impl Into<StorePool>) -> SharedStore {
    Arc::new(store.into())
}
