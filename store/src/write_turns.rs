//! [`WriteTurns`]: the connections of one pool taking turns to write, for a backend on which
//! writers of one process would only conflict with each other.
//!
//! On PostgreSQL a write transaction is `SERIALIZABLE`, and two that touch the same rows (an
//! agent's open wake, a conversation's `next_seq`, a transfer's budget) fail one of them with
//! `40001`; the store retries it, a few times. One host's sessions writing side by side gained
//! nothing from that race and lost posts to it (the retries ran out under a steady load). So a
//! host's sessions take one in-process lock for each write transaction, as a pool's SQLite
//! connections take their group's write lock: reads still run side by side, and only writers
//! of *different* hosts meet in the database, where the retry belongs.

use std::any::Any;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use ahp_store_sql::{Begin, Connection, Dialect, Row, SqlResult, ValueRef};

/// One lock for the writers of a pool, served first come, first served: a writer that gives
/// the turn back and asks again at once waits behind those already waiting (a plain lock let
/// a host binding thousands of agents back to back keep its own lease renewal waiting 2.3 s:
/// BENCHMARKS.md, "A host claiming another that carried 20,000 agents").
#[derive(Debug, Default)]
struct Turn {
    tickets: Mutex<Tickets>,
    free: Condvar,
}

/// The next ticket to hand out, and the ticket whose holder may write.
#[derive(Debug, Default)]
struct Tickets {
    next: u64,
    serving: u64,
}

impl Turn {
    fn state(&self) -> MutexGuard<'_, Tickets> {
        self.tickets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take(&self) {
        let mut t = self.state();
        let mine = t.next;
        t.next += 1;
        while t.serving != mine {
            t = self.free.wait(t).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn give_back(&self) {
        self.state().serving += 1;
        // Every waiter: only the next ticket's holder goes on.
        self.free.notify_all();
    }
}

/// A connection that writes only in its turn among the connections it was made with (see the
/// [module docs](self)).
pub struct WriteTurns {
    inner: Box<dyn Connection>,
    turn: Arc<Turn>,
    /// This connection holds the turn (a write transaction is open).
    holding: bool,
}

impl WriteTurns {
    /// Wraps `connections` so that at most one of them has a write transaction open at a time.
    pub fn share(connections: Vec<Box<dyn Connection>>) -> Vec<Box<dyn Connection>> {
        let turn = Arc::new(Turn::default());
        connections
            .into_iter()
            .map(|inner| {
                Box::new(Self {
                    inner,
                    turn: turn.clone(),
                    holding: false,
                }) as Box<dyn Connection>
            })
            .collect()
    }

    fn release(&mut self) {
        if std::mem::take(&mut self.holding) {
            self.turn.give_back();
        }
    }
}

impl Drop for WriteTurns {
    fn drop(&mut self) {
        self.release();
    }
}

impl Connection for WriteTurns {
    fn dialect(&self) -> Dialect {
        self.inner.dialect()
    }

    fn begin(&mut self, begin: Begin) -> SqlResult<()> {
        if begin == Begin::Write && !self.holding {
            self.turn.take();
            self.holding = true;
        }
        let begun = self.inner.begin(begin);
        if begun.is_err() {
            self.release();
        }
        begun
    }

    fn commit(&mut self) -> SqlResult<()> {
        let committed = self.inner.commit();
        self.release();
        committed
    }

    fn rollback(&mut self) -> SqlResult<()> {
        let rolled_back = self.inner.rollback();
        self.release();
        rolled_back
    }

    fn execute(&mut self, sql: &str, params: &[ValueRef<'_>]) -> SqlResult<u64> {
        self.inner.execute(sql, params)
    }

    fn query(
        &mut self,
        sql: &str,
        params: &[ValueRef<'_>],
        row: &mut dyn FnMut(Row) -> SqlResult<bool>,
    ) -> SqlResult<()> {
        self.inner.query(sql, params, row)
    }

    fn execute_batch(&mut self, sql: &str) -> SqlResult<()> {
        self.inner.execute_batch(sql)
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self.inner.as_any_mut()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A backend that counts how many of its connections are inside a write at once.
    struct Counting {
        inside: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
    }

    impl Connection for Counting {
        fn dialect(&self) -> Dialect {
            Dialect::Postgres
        }
        fn begin(&mut self, _: Begin) -> SqlResult<()> {
            let n = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(n, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(2));
            Ok(())
        }
        fn commit(&mut self) -> SqlResult<()> {
            self.inside.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
        fn rollback(&mut self) -> SqlResult<()> {
            self.commit()
        }
        fn execute(&mut self, _: &str, _: &[ValueRef<'_>]) -> SqlResult<u64> {
            Ok(0)
        }
        fn query(&mut self, _: &str, _: &[ValueRef<'_>], _: &mut dyn FnMut(Row) -> SqlResult<bool>) -> SqlResult<()> {
            Ok(())
        }
        fn execute_batch(&mut self, _: &str) -> SqlResult<()> {
            Ok(())
        }
        fn as_any_mut(&mut self) -> &mut dyn Any {
            self
        }
    }

    /// `n` counting connections taking turns, and the counters they share.
    fn counting(n: usize) -> (Vec<Box<dyn Connection>>, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let (inside, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let conns = (0..n)
            .map(|_| {
                Box::new(Counting {
                    inside: inside.clone(),
                    most: most.clone(),
                }) as Box<dyn Connection>
            })
            .collect();
        (WriteTurns::share(conns), inside, most)
    }

    #[test]
    fn writers_take_turns_and_a_dropped_writer_gives_its_turn_back() {
        let (mut conns, inside, most) = counting(4);
        // A connection dropped inside its write (a panic mid-transaction) must not keep the turn.
        let mut dropped = conns.pop().unwrap();
        dropped.begin(Begin::Write).unwrap();
        drop(dropped);
        inside.store(0, Ordering::SeqCst);
        std::thread::scope(|s| {
            for mut c in conns {
                s.spawn(move || {
                    for i in 0..10 {
                        c.begin(Begin::Write).unwrap();
                        if i % 2 == 0 { c.commit() } else { c.rollback() }.unwrap();
                    }
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 1, "never two writers at once");
    }

    #[test]
    fn a_writer_asking_again_waits_behind_the_one_already_waiting() {
        let (mut conns, _inside, _most) = counting(2);
        let mut waiting = conns.pop().unwrap();
        let mut first = conns.pop().unwrap();
        first.begin(Begin::Write).unwrap();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            let o = order.clone();
            s.spawn(move || {
                waiting.begin(Begin::Write).unwrap();
                o.lock().unwrap().push("waiting");
                std::thread::sleep(Duration::from_millis(20));
                waiting.commit().unwrap();
            });
            // The other is queued before the first gives the turn back and asks again at once.
            std::thread::sleep(Duration::from_millis(50));
            first.commit().unwrap();
            first.begin(Begin::Write).unwrap();
            order.lock().unwrap().push("first again");
            first.commit().unwrap();
        });
        assert_eq!(*order.lock().unwrap(), ["waiting", "first again"]);
    }

    #[test]
    fn readers_do_not_wait_for_a_writer() {
        let (mut conns, _inside, most) = counting(2);
        conns[0].begin(Begin::Write).unwrap();
        // The other reads while the first holds the turn (it would wait forever otherwise).
        conns[1].begin(Begin::Read).unwrap();
        assert_eq!(most.load(Ordering::SeqCst), 2);
        conns[1].commit().unwrap();
        conns[0].commit().unwrap();
    }
}
