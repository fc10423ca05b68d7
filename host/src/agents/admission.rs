//! Which turns run at once: a bound on running turns, shared fairly between owners.
//!
//! A turn runs as a task on the runtime and holds no thread while its guest waits on its
//! model, its tools or a sleep, so what bounds how many run at once is what they hold: a live
//! sandbox each (a slot of the engine's pool, its memory). [`Admission`] hands out that many
//! places ([`Admission::admit`]), and shares them between the owners of the agents (their
//! communication principals):
//!
//! - **A cap per owner.** One owner's turns hold at most [`owner_cap`] of the places (three
//!   quarters, at least one): a quarter always stays for the other owners, so a ready turn of
//!   one owner never waits behind another owner's turns that are waiting on I/O.
//! - **Round robin when full.** A turn that finds no place waits in its owner's queue; each
//!   place given back goes to the next owner in turn that has a waiting turn and is under its
//!   cap (in order within one owner).
//!
//! - **None while the host is busy.** Turns share the runtime's threads: when every thread is
//!   busy running guests, instantiating sandboxes and committing, a turn that becomes ready
//!   waits to run — and its wall clock runs meanwhile. So while the runtime is under pressure
//!   (a task made ready waits more than [`PRESSURE_WAIT`] to run, probed every
//!   [`PROBE_EVERY`] by [`Admission::watch_pressure`]) no new turn is admitted; the turns
//!   running finish with the CPU to themselves, and the waiting ones are admitted, round robin,
//!   once the pressure drops. Without this, 10,000 parked agents woken at once on two cores
//!   all started, waited for the CPU past their 15 s wall clock, and 5,777 were terminated.
//!
//! A place is held by a [`Place`] and given back when it is dropped, whatever ended the turn
//! (its future dropped included).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::shared_store::StoreLock;

/// How long a task made ready may wait to run before the runtime counts as under pressure.
pub const PRESSURE_WAIT: Duration = Duration::from_millis(20);

/// How often [`Admission::watch_pressure`] probes the runtime.
pub const PROBE_EVERY: Duration = Duration::from_millis(10);

/// Calm probes in a row that end a pressure.
pub const CALM_PROBES: u32 = 3;

/// The most places one owner's turns may hold out of `total`: three quarters, at least one.
pub fn owner_cap(total: usize) -> usize {
    total.saturating_sub(total / 4).max(1)
}

/// The places for running turns. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Admission {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    total: usize,
    per_owner: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Places held.
    running: usize,
    /// Places held per owner (owners holding none are removed).
    held: HashMap<String, usize>,
    /// Turns waiting for a place, per owner, in order.
    waiting: HashMap<String, VecDeque<oneshot::Sender<Place>>>,
    /// Owners with waiting turns, in the order their next turn is served.
    turn_order: VecDeque<String>,
    /// The runtime is under pressure: no new turn is admitted.
    pressured: bool,
}

/// One place among the running turns, held until dropped.
#[derive(Debug)]
pub struct Place {
    /// `None` once the place was given back by hand (see `hand_out`).
    inner: Option<Arc<Inner>>,
    owner: String,
}

impl Admission {
    /// `total` places (at least one), at most [`owner_cap`] of them per owner.
    pub fn new(total: usize) -> Self {
        let total = total.max(1);
        Self {
            inner: Arc::new(Inner {
                total,
                per_owner: owner_cap(total),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// How many places there are.
    pub fn total(&self) -> usize {
        self.inner.total
    }

    /// How many places are held now.
    pub fn running(&self) -> usize {
        self.inner.state.locked().running
    }

    /// Whether the runtime is under pressure now (no new turn is admitted).
    pub fn pressured(&self) -> bool {
        self.inner.state.locked().pressured
    }

    /// Says whether the runtime is under pressure; when it no longer is, waiting turns are
    /// admitted.
    pub fn set_pressure(&self, pressured: bool) {
        let mut st = self.inner.state.locked();
        if st.pressured == pressured {
            return;
        }
        st.pressured = pressured;
        if pressured {
            tracing::info!(
                running = st.running,
                "the runtime is busy: admitting no new turn until it is not"
            );
        } else {
            self.inner.hand_out(&mut st);
        }
    }

    /// Probes the runtime it runs on every [`PROBE_EVERY`] until dropped: how long a task made
    /// ready (this one, by its timer and by yielding) waits to run; past [`PRESSURE_WAIT`] the runtime is under
    /// pressure ([`set_pressure`](Self::set_pressure)).
    pub async fn watch_pressure(self) {
        let mut calm = 0;
        loop {
            // Two waits of a task made ready: its timer's (how late it runs after it fired),
            // and a yield's (how long the tasks ready before it take).
            let due = Instant::now() + PROBE_EVERY;
            tokio::time::sleep_until(due.into()).await;
            let late = due.elapsed();
            let asked = Instant::now();
            tokio::task::yield_now().await;
            if late.max(asked.elapsed()) > PRESSURE_WAIT {
                calm = 0;
                self.set_pressure(true);
            } else {
                // Over only after a few calm probes in a row: one free moment is not a free host.
                calm += 1;
                if calm >= CALM_PROBES {
                    self.set_pressure(false);
                }
            }
        }
    }

    /// A place for a turn of an agent `owner` owns: at once if one is free, the owner is under
    /// its cap with no turn of its own waiting and the runtime is not under pressure, else when
    /// its turn comes.
    pub async fn admit(&self, owner: &str) -> Place {
        let waiting = {
            let mut st = self.inner.state.locked();
            // Turns of this owner that stopped waiting do not hold a new one back.
            if let Some(q) = st.waiting.get_mut(owner) {
                q.retain(|tx| !tx.is_closed());
            }
            let queued = st.waiting.get(owner).is_some_and(|q| !q.is_empty());
            if !queued && !st.pressured && self.inner.may_run(&st, owner) {
                return self.inner.place(&mut st, owner);
            }
            let (tx, rx) = oneshot::channel();
            if !st.waiting.contains_key(owner) {
                st.turn_order.push_back(owner.to_owned());
            }
            st.waiting.entry(owner.to_owned()).or_default().push_back(tx);
            rx
        };
        // The sender is only dropped unsent by `hand_out`, which skips closed receivers, and a
        // place sent to a receiver dropped meanwhile is given back by its own drop.
        waiting
            .await
            .expect("a waiting turn's sender is kept until it is sent its place")
    }
}

impl Inner {
    fn may_run(&self, st: &State, owner: &str) -> bool {
        st.running < self.total && st.held.get(owner).copied().unwrap_or(0) < self.per_owner
    }

    fn place(self: &Arc<Self>, st: &mut State, owner: &str) -> Place {
        st.running += 1;
        *st.held.entry(owner.to_owned()).or_insert(0) += 1;
        Place {
            inner: Some(self.clone()),
            owner: owner.to_owned(),
        }
    }

    /// Gives free places to waiting turns, one owner after another.
    fn hand_out(self: &Arc<Self>, st: &mut State) {
        let mut passed = 0;
        while st.running < self.total && !st.pressured && passed < st.turn_order.len() {
            let Some(owner) = st.turn_order.pop_front() else { break };
            if !self.may_run(st, &owner) {
                st.turn_order.push_back(owner);
                passed += 1;
                continue;
            }
            let next = st.waiting.get_mut(&owner).and_then(|q| {
                // Turns that stopped waiting (their task was dropped) are skipped.
                while let Some(tx) = q.pop_front() {
                    if !tx.is_closed() {
                        return Some(tx);
                    }
                }
                None
            });
            let Some(tx) = next else {
                st.waiting.remove(&owner);
                continue;
            };
            let place = self.place(st, &owner);
            if st.waiting.get(&owner).is_some_and(|q| !q.is_empty()) {
                st.turn_order.push_back(owner);
            } else {
                st.waiting.remove(&owner);
            }
            passed = 0;
            if let Err(mut place) = tx.send(place) {
                // Its receiver closed just now: the place comes back here (its drop would lock
                // the state again).
                Self::give_back(st, &place.owner);
                place.inner = None;
            }
        }
    }

    fn give_back(st: &mut State, owner: &str) {
        st.running -= 1;
        if let Some(n) = st.held.get_mut(owner) {
            *n -= 1;
            if *n == 0 {
                st.held.remove(owner);
            }
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            let mut st = inner.state.locked();
            Inner::give_back(&mut st, &self.owner);
            inner.hand_out(&mut st);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Admission, owner_cap};

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn an_owner_holds_at_most_three_quarters_and_another_owner_is_admitted_at_once() {
        assert_eq!(owner_cap(1), 1);
        assert_eq!(owner_cap(4), 3);
        assert_eq!(owner_cap(2000), 1500);
        rt().block_on(async {
            let a = Admission::new(4);
            let mut held = Vec::new();
            for _ in 0..3 {
                held.push(a.admit("greedy").await);
            }
            // The greedy owner's fourth turn waits although a place is free …
            let fourth = tokio::time::timeout(Duration::from_millis(20), a.admit("greedy")).await;
            assert!(fourth.is_err(), "an owner past its cap waits");
            // … which another owner's turn takes at once.
            let other = tokio::time::timeout(Duration::from_millis(20), a.admit("other")).await;
            assert!(other.is_ok(), "the other owner's turn is admitted at once");
            assert_eq!(a.running(), 4);
        });
    }

    #[test]
    fn places_given_back_go_round_robin_between_waiting_owners() {
        rt().block_on(async {
            let a = Admission::new(4);
            let mut held = vec![
                a.admit("x").await,
                a.admit("x").await,
                a.admit("x").await,
                a.admit("y").await,
            ];
            let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let mut tasks = Vec::new();
            for owner in ["x", "x", "y", "y"] {
                let (a, order) = (a.clone(), order.clone());
                tasks.push(tokio::spawn(async move {
                    let place = a.admit(owner).await;
                    order.lock().unwrap().push(owner);
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    drop(place);
                }));
                tokio::task::yield_now().await;
            }
            // Free two of x's places and y's: x may hold 3, so x, y, x, …
            for _ in 0..3 {
                held.pop();
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            }
            let served = order.lock().unwrap().clone();
            assert_eq!(served.len(), 3, "{served:?}");
            assert!(
                served.contains(&"x") && served.contains(&"y"),
                "both owners served: {served:?}"
            );
            assert!(a.running() <= a.total());
            for t in tasks {
                t.abort();
            }
        });
    }

    #[test]
    fn under_pressure_no_turn_is_admitted_until_it_drops() {
        rt().block_on(async {
            let a = Admission::new(8);
            a.set_pressure(true);
            let waiting = tokio::spawn({
                let a = a.clone();
                async move { a.admit("x").await }
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert_eq!(a.running(), 0, "free places, but the runtime is busy");
            a.set_pressure(false);
            let place = tokio::time::timeout(Duration::from_millis(100), waiting).await;
            assert!(place.is_ok(), "admitted once the pressure dropped");
            assert_eq!(a.running(), 1);
        });
    }

    #[test]
    fn a_runtime_whose_threads_are_blocked_is_found_under_pressure() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let a = Admission::new(8);
        runtime.spawn(a.clone().watch_pressure());
        std::thread::sleep(Duration::from_millis(50));
        assert!(!a.pressured(), "an idle runtime is not busy");
        // The one worker is held for 200 ms by a task that does not yield.
        runtime.spawn(async { std::thread::sleep(Duration::from_millis(200)) });
        let watched = std::time::Instant::now();
        let mut seen = false;
        while watched.elapsed() < Duration::from_millis(400) {
            seen |= a.pressured();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(seen, "the probe waited ~200 ms to run: pressure");
        std::thread::sleep(Duration::from_millis(100));
        assert!(!a.pressured(), "and the runtime is free again");
        runtime.shutdown_background();
    }

    #[test]
    fn a_waiting_turn_dropped_before_its_place_comes_takes_none() {
        rt().block_on(async {
            let a = Admission::new(1);
            let first = a.admit("x").await;
            let waiting = tokio::time::timeout(Duration::from_millis(10), a.admit("y")).await;
            assert!(waiting.is_err());
            drop(first);
            assert_eq!(a.running(), 0, "the place of a turn that stopped waiting is free");
            let again = tokio::time::timeout(Duration::from_millis(10), a.admit("z")).await;
            assert!(again.is_ok());
        });
    }
}
