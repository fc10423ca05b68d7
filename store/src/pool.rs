//! [`StorePool`]: a host's several connections to one database, each lent to one thread at a
//! time.
//!
//! A [`Store`] is one connection, `Send` but not `Sync`. A host that shared one behind a mutex
//! made every caller wait for every other caller's whole operation, fsync included. A pool lends
//! each caller a connection of its own: reads run side by side (WAL readers never block), and
//! on SQLite the pool's connections commit through one [`GroupCommit`], so concurrent writers
//! share their fsyncs (see [`crate::group_commit`]). On PostgreSQL each connection is its own
//! session and the server batches concurrent commits itself.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::db::Store;
use crate::error::{Error, Result};
use crate::group_commit::GroupCommit;

/// Most connections one pool opens.
pub const MAX_POOL_CONNECTIONS: usize = 64;

/// Connections a host's pool opens unless told otherwise: enough for its surfaces, its
/// controller's workers and its sandboxes' host calls to proceed side by side on two cores.
pub const DEFAULT_POOL_CONNECTIONS: usize = 8;

/// Several [`Store`]s over one database, lent out one caller at a time.
#[derive(Debug)]
pub struct StorePool {
    idle: Mutex<Vec<Store>>,
    returned: Condvar,
    size: usize,
    group: Option<Arc<GroupCommit>>,
}

impl StorePool {
    /// Opens `connections` stores on the SQLite database at `path` (creating and migrating it),
    /// each passed through `configure` (clock, token key, host id), all committing through one
    /// [`GroupCommit`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] unless `1 <= connections <= MAX_POOL_CONNECTIONS`; whatever
    /// [`Store::open`] or `configure` reports.
    pub fn open(
        path: impl AsRef<Path>,
        connections: usize,
        mut configure: impl FnMut(Store) -> Result<Store>,
    ) -> Result<Self> {
        check_size(connections)?;
        let path = path.as_ref();
        let group = Arc::new(GroupCommit::new(path));
        let stores = (0..connections)
            .map(|_| configure(Store::open_grouped(path, group.clone())?))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self::with(stores, Some(group)))
    }

    /// A pool of already open stores (PostgreSQL sessions, say); they must share one database.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] unless `1 <= stores.len() <= MAX_POOL_CONNECTIONS`.
    pub fn of(stores: Vec<Store>) -> Result<Self> {
        check_size(stores.len())?;
        Ok(Self::with(stores, None))
    }

    /// A pool of one store (an in-memory database, whose connections cannot share it).
    pub fn single(store: Store) -> Self {
        Self::with(vec![store], None)
    }

    fn with(stores: Vec<Store>, group: Option<Arc<GroupCommit>>) -> Self {
        Self {
            size: stores.len(),
            idle: Mutex::new(stores),
            returned: Condvar::new(),
            group,
        }
    }

    /// A store for this caller's exclusive use until the returned guard is dropped, waiting
    /// while every one is lent out. A caller never holds two at once (it could wait forever).
    pub fn get(&self) -> PooledStore<'_> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(store) = idle.pop() {
                return PooledStore {
                    pool: self,
                    store: Some(store),
                };
            }
            idle = self.returned.wait(idle).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A store at once, or `None` when every one is lent out or (on SQLite) a commit is still
    /// on its way to disk, which the borrower's read would wait for: for a caller that would
    /// rather not block (an async task that can move the work to a blocking thread).
    pub fn try_get(&self) -> Option<PooledStore<'_>> {
        if self.group.as_ref().is_some_and(|g| !g.is_durable()) {
            return None;
        }
        let store = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop()?;
        Some(PooledStore {
            pool: self,
            store: Some(store),
        })
    }

    /// How many stores the pool has.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The group its SQLite connections commit through (`None` for other pools).
    pub fn group(&self) -> Option<&GroupCommit> {
        self.group.as_deref()
    }
}

impl From<Store> for StorePool {
    /// [`StorePool::single`].
    fn from(store: Store) -> Self {
        Self::single(store)
    }
}

fn check_size(connections: usize) -> Result<()> {
    if (1..=MAX_POOL_CONNECTIONS).contains(&connections) {
        return Ok(());
    }
    Err(Error::InvalidInput {
        field: "connections".into(),
        reason: format!("must be between 1 and {MAX_POOL_CONNECTIONS}, got {connections}"),
    })
}

/// A store lent by a [`StorePool`]; it goes back to the pool when dropped (a panicking
/// borrower's too: its open transaction, if any, was rolled back as the panic unwound).
#[derive(Debug)]
pub struct PooledStore<'p> {
    pool: &'p StorePool,
    store: Option<Store>,
}

impl std::ops::Deref for PooledStore<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.store.as_ref().expect("a lent store is present until dropped")
    }
}

impl std::ops::DerefMut for PooledStore<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        self.store.as_mut().expect("a lent store is present until dropped")
    }
}

impl Drop for PooledStore<'_> {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(store);
            self.pool.returned.notify_one();
        }
    }
}
