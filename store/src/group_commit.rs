//! Group commit: the transactions of many writers made durable by one fsync.
//!
//! A store opened on its own ([`Store::open`](crate::Store::open)) commits with
//! `synchronous=FULL`: every `COMMIT` fsyncs the WAL before it returns, so concurrent writers
//! each pay one fsync, one after another, and a host's write rate is the disk's commit rate.
//!
//! Stores opened together over one database file ([`StorePool::open`](crate::StorePool::open))
//! share a [`GroupCommit`] instead, and split a commit into its two halves:
//!
//! 1. **Commit, in order.** A writer takes the group's in-process write lock before
//!    `BEGIN IMMEDIATE` (so the pool's connections never poll SQLite's busy handler for each
//!    other), runs its transaction, and commits it with `synchronous=NORMAL`: SQLite appends the
//!    transaction's frames to the WAL without an fsync. The writer takes the next commit number
//!    and releases the lock. Each transaction is still its own: a refusal or an error rolls back
//!    only that writer's transaction, and nobody waits on it.
//! 2. **Durable, together.** The writer then waits, holding no lock, until the WAL has been
//!    fsynced past its commit number. The first writer to wait becomes the leader: it fsyncs the
//!    WAL once for every commit made so far, then wakes every writer that fsync covered; writers
//!    that committed during that fsync wait for the next one, led by one of them. A lone writer
//!    leads at once, so it pays what a `FULL` commit pays (its write and one fsync) and never
//!    waits for company.
//!
//! `COMMIT` returns to the store's code only after step 2, so the contract of
//! [`Connection::commit`](ahp_store_sql::Connection::commit) holds: when a write reports
//! success, it is on disk. Why one fsync of the WAL is enough: SQLite appends frames in commit
//! order and checksums each one over every frame before it, so after a power loss recovery keeps
//! exactly a prefix of the commits; the fsync makes that prefix reach at least the leader's
//! commit number. Checkpoints under `NORMAL` fsync the WAL before copying it into the database
//! and the database after, so a checkpointed commit stays durable when the WAL restarts.
//!
//! **Readers** on the pool's other connections can see a commit in the instant between its
//! step 1 and step 2. So that nothing read is acted on before it is durable, every read also
//! ends with a wait: until the WAL is fsynced past the last commit made when the read ended. With
//! nothing pending that is one uncontended lock; under a burst of writes it is at most one fsync.
//!
//! **Failure.** If an fsync fails, the commits it was to cover are in the WAL but not known to be
//! on disk (and the kernel may have dropped the dirty pages: retrying the fsync proves nothing).
//! Every writer waiting on it, and every write and read after it, gets an error: the process must
//! restart, and SQLite's recovery then decides what survived. Nobody is told that a write
//! succeeded that might not have.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use ahp_store_sql::SqlError;

/// The shared durability of the stores of one pool over one SQLite file (see the
/// [module docs](self)).
#[derive(Debug)]
pub struct GroupCommit {
    /// The database's write-ahead log, the file each fsync makes durable.
    wal_path: PathBuf,
    /// The in-process write lock: `true` while a connection of the pool holds it.
    writing: Mutex<bool>,
    writer_free: Condvar,
    durability: Mutex<Durability>,
    synced: Condvar,
    /// A test's hold on fsyncs (see [`GroupCommit::hold_syncs`]).
    held: Mutex<bool>,
    released: Condvar,
}

#[derive(Debug, Default)]
struct Durability {
    /// The number of the last commit written to the WAL.
    committed: u64,
    /// Every commit up to this number is on disk.
    durable: u64,
    /// A leader is fsyncing now.
    syncing: bool,
    /// The open WAL handle the leaders fsync (taken by the one syncing).
    wal: Option<WalHandle>,
    /// Why the group can no longer promise durability, once an fsync failed.
    failed: Option<String>,
    /// How many fsyncs the leaders have made.
    syncs: u64,
}

#[derive(Debug)]
struct WalHandle {
    file: File,
    #[cfg(unix)]
    inode: (u64, u64),
}

/// What a [`GroupCommit`] has done so far, for benchmarks and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCommitStats {
    /// Transactions committed through the group.
    pub commits: u64,
    /// Commits known to be on disk.
    pub durable: u64,
    /// Fsyncs made to get them there.
    pub syncs: u64,
}

fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded state is a few counters updated in single statements: a panicking holder
    // cannot leave it half-written.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl GroupCommit {
    /// The group for the SQLite database at `database` (its WAL is `<database>-wal`).
    pub fn new(database: &Path) -> Self {
        let mut wal = database.as_os_str().to_owned();
        wal.push("-wal");
        Self {
            wal_path: PathBuf::from(wal),
            writing: Mutex::new(false),
            writer_free: Condvar::new(),
            durability: Mutex::new(Durability::default()),
            synced: Condvar::new(),
            held: Mutex::new(false),
            released: Condvar::new(),
        }
    }

    /// Counters of the group's commits and fsyncs.
    pub fn stats(&self) -> GroupCommitStats {
        let d = relock(&self.durability);
        GroupCommitStats {
            commits: d.committed,
            durable: d.durable,
            syncs: d.syncs,
        }
    }

    /// Whether every commit so far is on disk (or none can be any more: an fsync failed).
    pub(crate) fn is_durable(&self) -> bool {
        let d = relock(&self.durability);
        d.failed.is_none() && d.durable >= d.committed
    }

    /// Takes the in-process write lock, waiting while another connection of the pool holds it.
    pub(crate) fn lock_writer(&self) {
        let mut writing = relock(&self.writing);
        while *writing {
            writing = self.writer_free.wait(writing).unwrap_or_else(PoisonError::into_inner);
        }
        *writing = true;
    }

    /// Releases the write lock; `committed` says whether the holder just committed a change,
    /// which then takes the next commit number (returned).
    pub(crate) fn unlock_writer(&self, committed: bool) -> Option<u64> {
        let number = committed.then(|| {
            let mut d = relock(&self.durability);
            d.committed += 1;
            d.committed
        });
        *relock(&self.writing) = false;
        self.writer_free.notify_one();
        number
    }

    /// Waits until every commit up to `number` is on disk, leading an fsync when no one else is.
    ///
    /// # Errors
    ///
    /// [`SqlError::Backend`] when an fsync failed (now or before): the commit may not be durable.
    pub(crate) fn wait_durable(&self, number: u64) -> Result<(), SqlError> {
        let mut d = relock(&self.durability);
        loop {
            if let Some(why) = &d.failed {
                return Err(not_durable(why));
            }
            if d.durable >= number {
                return Ok(());
            }
            if d.syncing {
                d = self.synced.wait(d).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            // Lead: fsync once for every commit written so far (read as late as possible, so
            // that commits made while this leader got going ride along).
            d.syncing = true;
            let wal = d.wal.take();
            drop(d);
            self.wait_while_held();
            let target = relock(&self.durability).committed;
            let synced = self.sync(wal);
            d = relock(&self.durability);
            d.syncing = false;
            d.syncs += 1;
            match synced {
                Ok(handle) => {
                    d.wal = Some(handle);
                    d.durable = d.durable.max(target);
                }
                Err(e) => {
                    d.failed = Some(format!("fsync of {} failed: {e}", self.wal_path.display()));
                }
            }
            self.synced.notify_all();
        }
    }

    /// Waits until everything committed so far is on disk (the end of a read).
    ///
    /// # Errors
    ///
    /// As [`wait_durable`](Self::wait_durable).
    pub(crate) fn wait_all_durable(&self) -> Result<(), SqlError> {
        let latest = {
            let d = relock(&self.durability);
            if let Some(why) = &d.failed {
                return Err(not_durable(why));
            }
            if d.durable >= d.committed {
                return Ok(());
            }
            d.committed
        };
        self.wait_durable(latest)
    }

    /// Fsyncs the WAL through `handle`, reopening it first when it is not the file now at the
    /// WAL's path (not yet opened, or the WAL was deleted and made again since).
    fn sync(&self, handle: Option<WalHandle>) -> std::io::Result<WalHandle> {
        let handle = match handle {
            Some(h) if self.still_the_wal(&h) => h,
            _ => self.open_wal()?,
        };
        handle.file.sync_data()?;
        Ok(handle)
    }

    fn open_wal(&self) -> std::io::Result<WalHandle> {
        let file = File::open(&self.wal_path)?;
        #[cfg(unix)]
        let inode = {
            use std::os::unix::fs::MetadataExt;
            let m = file.metadata()?;
            (m.dev(), m.ino())
        };
        Ok(WalHandle {
            file,
            #[cfg(unix)]
            inode,
        })
    }

    #[cfg(unix)]
    fn still_the_wal(&self, handle: &WalHandle) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&self.wal_path).is_ok_and(|m| (m.dev(), m.ino()) == handle.inode)
    }

    #[cfg(not(unix))]
    fn still_the_wal(&self, _handle: &WalHandle) -> bool {
        false
    }

    /// Holds every fsync until [`release_syncs`](Self::release_syncs): writers commit and then
    /// wait, unanswered. A test seam for proving that no caller is answered before its batch is
    /// durable, and that a batch's writes are independent.
    #[doc(hidden)]
    pub fn hold_syncs(&self) {
        *relock(&self.held) = true;
    }

    /// Lets held fsyncs run.
    #[doc(hidden)]
    pub fn release_syncs(&self) {
        *relock(&self.held) = false;
        self.released.notify_all();
    }

    fn wait_while_held(&self) {
        let mut held = relock(&self.held);
        while *held {
            held = self.released.wait(held).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

fn not_durable(why: &str) -> SqlError {
    SqlError::Backend(format!("the write may not be durable ({why}); restart the host"))
}

#[cfg(test)]
mod tests;
