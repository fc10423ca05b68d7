//! Delegation benchmarks: one coordinator fanning out to N workers.
//!
//! - `fan_out/N` (N = 2, 8, 64): the coordinator creates one task per worker with its first
//!   attempt started (N transactions: task, fenced attempt, the worker's wake, audit,
//!   idempotency record), registers `all` waits over them (⌈N/8⌉ transactions: a wait holds at
//!   most 8 sources), and every worker completes its attempt (N transactions: attempt and task
//!   terminal, wait matching; the last completion of each wait fires its one Wait-origin wake).
//!   That is 2N + ⌈N/8⌉ fsynced commits, on a file database with WAL and `synchronous=FULL`.
//! - `all_wait_firing/N`: the completion that fires an `all` wait over min(N, 8) sources, alone
//!   (the other completions happen outside the timing).
//! - `single_row_txn_floor`: one single-row transaction on an identically configured file —
//!   what one commit costs on this disk, the baseline beside them in the same run.
//!
//! Run with `cargo bench -p ahp-store --bench delegation`.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use ahp_store::Store;
use ahp_store::conversation::*;
use ahp_store::delegation::bounds::MAX_WAIT_SOURCES;
use ahp_store::delegation::{AgentTask, NewTask, NewWait, TaskCompletion, TaskOutcome, WaitMode};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

struct Team {
    store: Store,
    alice: Caller,
    boss: AgentActor,
    workers: Vec<(Agent, AgentActor)>,
    keys: u64,
}

fn card(i: usize) -> AgentCard {
    AgentCard {
        handle: format!("agent-{i}"),
        display_name: format!("Agent {i}"),
        description: "benchmark".into(),
        specialties: vec![],
    }
}

fn setup(dir: &Path, n: usize) -> Team {
    let mut store = Store::open(dir.join("bench.db")).unwrap();
    let alice = Caller::full("account:bench").unwrap();
    let attach = |store: &mut Store, i: usize| {
        let a = store
            .create_agent(&alice, &card(i), &format!("agent-{i}"))
            .unwrap()
            .value;
        let ep = store
            .attach_endpoint(&alice, &a.id, Duration::from_secs(3600), &format!("ep-{i}"))
            .unwrap()
            .value;
        (a, AgentActor::of(&ep))
    };
    let (_, boss) = attach(&mut store, 0);
    let workers = (1..=n).map(|i| attach(&mut store, i)).collect();
    Team {
        store,
        alice,
        boss,
        workers,
        keys: 0,
    }
}

impl Team {
    fn key(&mut self) -> String {
        self.keys += 1;
        format!("k-{}", self.keys)
    }

    /// Creates and starts one task per worker, and registers `all` waits over them.
    fn fan_out(&mut self) -> Vec<AgentTask> {
        let boss = Acting::Agent(self.boss.clone());
        let mut tasks = Vec::with_capacity(self.workers.len());
        for i in 0..self.workers.len() {
            let new = NewTask {
                assignee: self.workers[i].0.id.clone(),
                title: "part".into(),
                instructions: format!("compute part {i}"),
                goal: None,
                start: true,
            };
            let k = self.key();
            tasks.push(
                self.store
                    .create_agent_task(&self.alice, &boss, &new, &k)
                    .unwrap()
                    .value,
            );
        }
        for chunk in tasks.chunks(MAX_WAIT_SOURCES) {
            let new = NewWait {
                sources: chunk.iter().map(|t| t.id.clone()).collect(),
                mode: WaitMode::All,
                goal: None,
            };
            let k = self.key();
            self.store
                .register_agent_wait(&self.alice, &self.boss, &new, &k)
                .unwrap();
        }
        tasks
    }

    fn complete(&mut self, i: usize, task: &AgentTask) -> AgentTask {
        let done = TaskCompletion {
            attempt: task.current_attempt.as_ref().unwrap().id.clone(),
            outcome: TaskOutcome::Succeeded,
            result: format!("result {i}"),
        };
        let actor = self.workers[i].1.clone();
        self.store
            .complete_task_attempt(&self.alice, &actor, &done)
            .unwrap()
            .value
    }
}

fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn fan_out(c: &mut Criterion) {
    let mut g = c.benchmark_group("fan_out");
    for n in [2usize, 8, 64] {
        let dir = tmpdir();
        let mut team = setup(dir.path(), n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                let tasks = team.fan_out();
                for (i, t) in tasks.iter().enumerate() {
                    black_box(team.complete(i, t));
                }
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("all_wait_firing");
    for n in [2usize, 8, 64] {
        let dir = tmpdir();
        let mut team = setup(dir.path(), n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let tasks = team.fan_out();
                    let sources = tasks.len().min(MAX_WAIT_SOURCES);
                    for (i, t) in tasks.iter().enumerate().skip(sources) {
                        team.complete(i, t);
                    }
                    for (i, t) in tasks.iter().enumerate().take(sources - 1) {
                        team.complete(i, t);
                    }
                    let start = Instant::now();
                    black_box(team.complete(sources - 1, &tasks[sources - 1]));
                    total += start.elapsed();
                }
                total
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("baseline");
    let floor_dir = tmpdir();
    let mut floor = rusqlite::Connection::open(floor_dir.path().join("floor.db")).unwrap();
    floor
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
        .unwrap();
    floor.pragma_update(None, "synchronous", "FULL").unwrap();
    floor.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
    let mut x = 0i64;
    g.bench_function("single_row_txn_floor", |b| {
        b.iter(|| {
            x += 1;
            let tx = floor
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .unwrap();
            tx.execute("INSERT INTO t (x) VALUES (?1)", [x]).unwrap();
            tx.commit().unwrap();
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = fan_out
}
criterion_main!(benches);
