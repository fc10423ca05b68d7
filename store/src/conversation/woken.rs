//! Whom a write woke, exactly: the agents whose wake one write's transaction created or gave a
//! cause to, collected while it runs.
//!
//! A delegation write wakes agents deep inside its transaction — an attempt started wakes its
//! assignee, a task ended fires the waits on it and the attention events of its creator and its
//! goal's controller — each through [`coalesce_cause`](super::wake::coalesce_cause), which
//! [`record`]s the agent here. The write runs inside [`collecting`], which hands the set back
//! with its result, so the store reports whom the write woke ([`Mutation::woken`]) and its
//! caller schedules exactly them, with no second read. The store is synchronous and a
//! transaction runs on one thread from begin to commit, so the set lives on the thread, open
//! only for the duration of one attempt of one write: an attempt that rolls back (and is run
//! again) leaves nothing behind.
//!
//! [`Mutation::woken`]: super::idempotency::Mutation::woken

use std::cell::RefCell;
use std::collections::BTreeSet;

thread_local! {
    /// The agents woken by the write running on this thread, while one is collecting.
    static WOKEN: RefCell<Option<BTreeSet<String>>> = const { RefCell::new(None) };
}

/// Records that the running write woke `agent` (nothing, unless a write is collecting).
pub(crate) fn record(agent: &str) {
    WOKEN.with_borrow_mut(|w| {
        if let Some(w) = w {
            w.insert(agent.to_owned());
        }
    });
}

/// Runs `write` (one attempt of one write, its transaction begun and ended inside), and
/// returns with its result the agents it woke, sorted, each once. A collection already open
/// (a write inside a write) is kept and gets this one's agents too.
pub(crate) fn collecting<T>(write: impl FnOnce() -> T) -> (T, Vec<String>) {
    let outer = WOKEN.with_borrow_mut(|w| w.replace(BTreeSet::new()));
    /// Puts the outer collection back however `write` ends (a panic included).
    struct Restore(Option<Option<BTreeSet<String>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(outer) = self.0.take() {
                WOKEN.with_borrow_mut(|w| *w = outer);
            }
        }
    }
    let mut restore = Restore(Some(outer));
    let value = write();
    let mine = WOKEN.with_borrow_mut(|w| w.take()).unwrap_or_default();
    let mut outer = restore.0.take().flatten();
    if let Some(o) = outer.as_mut() {
        o.extend(mine.iter().cloned());
    }
    WOKEN.with_borrow_mut(|w| *w = outer);
    (value, mine.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collection_sees_its_own_write_once_each_and_nothing_outside_it() {
        record("before");
        let ((), woken) = collecting(|| {
            record("b");
            record("a");
            record("b");
            let ((), inner) = collecting(|| record("c"));
            assert_eq!(inner, ["c"]);
        });
        assert_eq!(woken, ["a", "b", "c"]);
        record("after");
        let ((), none) = collecting(|| ());
        assert!(none.is_empty());
    }

    #[test]
    fn a_write_that_panics_leaves_no_collection_open() {
        let caught = std::panic::catch_unwind(|| collecting(|| -> () { panic!("mid-write") }));
        assert!(caught.is_err());
        let ((), woken) = collecting(|| ());
        assert!(woken.is_empty());
        WOKEN.with_borrow(|w| assert!(w.is_none()));
    }
}
