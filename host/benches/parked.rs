//! Parked agents at density: one host carrying far more agents than it keeps sandboxes, and
//! what each costs it.
//!
//! On a file database opened as `ahp serve` opens it (a `StorePool` sharing one group commit),
//! with the live cap at `AHP_DENSITY_LIVE` (default 15,000) and the engine's pool sized for it
//! (nano memory slots), the bench prints the host's RSS and memory mappings at each step:
//!
//! 1. **Live:** `AHP_DENSITY_LIVE` nano `turn-prober` agents activated for real (push, token,
//!    `activate` with its `resume`, bind, carrier), every sandbox kept live.
//! 2. **Parked:** `AHP_DENSITY_PARKED` (default 15,000) more activated the same way; each new
//!    sandbox needs room, so the least recently used is parked — the host then carries
//!    live + parked agents and keeps `AHP_DENSITY_LIVE` sandboxes.
//! 3. **Copies:** with `AHP_DENSITY_COPIES` = k (default 0; 33 makes 1,020,000 agents with the
//!    defaults), every agent so far is copied k times in the database — its `agents`,
//!    `transfers`, `budgets` and `agent_endpoints` rows, ids rewritten (the last 8 hex digits
//!    are the copy's number), the count with them — which is what registering them one by one
//!    leaves, in a minute instead of an hour (registering through the store costs ~2 ms an
//!    agent here: five commits). Each copy is a parked agent this host carries, with no
//!    sandbox; `AHP_DENSITY_SAMPLE` of them answer a first message, measured beside the others.
//! 4. **First answers:** a human post to each of `AHP_DENSITY_SAMPLE` (50) parked agents and as
//!    many live ones, each followed by one dispatch opportunity (`Agents::drive`): the p50 of a
//!    parked agent's first answer beside a warm one's.
//! 5. **Upkeep:** each of the reaper tick's per-agent calls (`sweep`, `renew_leases`,
//!    `schedule_all`, `repair_some_bindings` — and the whole `repair_bindings` of a takeover)
//!    timed once at this size, and the renewal of every
//!    carried agent's lease in bulk beside one commit per carrier (the baseline).
//!
//! `cargo bench -p ahp-host --bench parked` (~3 min at the defaults on this machine; past
//! about 15,000 live the kernel's `vm.max_map_count` must be raised, see `ahp serve`).

mod common;

use std::time::{Duration, Instant};

use ahp_guests as guests;
use ahp_host::host::{Host, HostBuilder};
use ahp_host::sandbox::Parking;
use ahp_host::shared_store::StoreLock;
use ahp_host::store::conversation::{
    Acting, Caller, IdempotencyKey, MAX_LEASE_RENEWALS, NewConversation, NewMessage, OPERATOR_SUBJECT,
};
use ahp_host::store::{DEFAULT_POOL_CONNECTIONS, StorePool, Tier, TokenKey};
use ahp_host::testing;
use serde_json::json;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn maps() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count())
}

/// Prints one step: what it did, how long it took, RSS and mappings now.
fn step(what: &str, took: Duration) {
    println!(
        "{what:<44} {:>9.1} s   RSS {:>6} MiB (peak {:>6} MiB)   mappings {:>6}",
        took.as_secs_f64(),
        common::rss_kib("VmRSS:") / 1024,
        common::rss_kib("VmHWM:") / 1024,
        maps()
    );
}

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// An active nano `turn-prober` transfer and its agent.
fn agent(host: &Host, key: &TokenKey) -> (String, String) {
    let snap = testing::snapshot(0, json!({}));
    let t = testing::pushed(
        &mut host.store().locked(),
        key,
        &snap,
        Tier::Nano,
        1_000_000,
        "turn-prober",
    )
    .unwrap();
    let tok = testing::activate_token(&host.store().locked(), key, &t).unwrap();
    let report = host.activate(&t, &tok).unwrap();
    let Some(agent) = report.transfer.agent_id else {
        panic!("{t} did not become an agent: {:?}", report.outcome);
    };
    (t, agent)
}

/// Copies every agent of the database at `path` `copies` times (see the module docs), in one
/// transaction; returns the ids of the copied agents of the first copy, in the order of
/// `agents`.
fn copy_agents(path: &std::path::Path, agents: &[(String, String)], copies: usize) -> Vec<String> {
    // A copy's id: the original's with its last 8 hex digits replaced by the copy's number.
    let rewrite = |col: &str| format!("substr({col}, 1, length({col}) - 8) || printf('%08x', c.n)");
    let mut conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(60)).unwrap();
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    for (table, ids) in [
        ("agents", &["id", "handle"][..]),
        ("transfers", &["id", "agent_id"][..]),
        ("budgets", &["transfer_id"][..]),
        ("agent_endpoints", &["id", "agent_id"][..]),
    ] {
        let columns: Vec<String> = tx
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let select: Vec<String> = columns
            .iter()
            .map(|c| {
                if ids.contains(&c.as_str()) {
                    rewrite(c)
                } else {
                    c.clone()
                }
            })
            .collect();
        let copied = tx
            .execute(
                &format!(
                    "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < ?1)
                     INSERT INTO {table} ({}) SELECT {} FROM {table}, c",
                    columns.join(", "),
                    select.join(", ")
                ),
                [copies as i64],
            )
            .unwrap();
        println!("copied {copied} rows of {table}");
    }
    tx.execute("UPDATE agent_total SET agents = (SELECT count(*) FROM agents)", [])
        .unwrap();
    tx.commit().unwrap();
    agents
        .iter()
        .map(|(_, a)| format!("{}{:08x}", &a[..a.len() - 8], 1))
        .collect()
}

/// One human post to `agent` (in a conversation of its own) and the opportunity that answers
/// it: the time of the opportunity alone.
fn first_answer(host: &Host, agent: &str, n: usize) -> Duration {
    let operator = Caller::full(OPERATOR_SUBJECT).unwrap();
    let mut db = host.store().locked();
    let new = NewConversation {
        title: format!("sample {n}"),
        agents: vec![agent.to_owned()],
    };
    let cv = db
        .create_conversation(&operator, &new, &format!("cv-{n}"))
        .unwrap()
        .value
        .id;
    let msg = NewMessage {
        conversation: cv,
        acting: Acting::Human,
        body: "echo hello".into(),
        reply_to: None,
        idempotency: IdempotencyKey::Key(format!("m-{n}")),
    };
    db.post_message(&operator, &msg).unwrap();
    drop(db);
    let started = Instant::now();
    let d = host.agents().drive(agent).unwrap();
    let took = started.elapsed();
    assert_eq!(d.consumed, 1, "the agent answered");
    took
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let live = env("AHP_DENSITY_LIVE", 15_000);
    let parked = env("AHP_DENSITY_PARKED", 15_000);
    let copies = env("AHP_DENSITY_COPIES", 0);
    let sample = env("AHP_DENSITY_SAMPLE", 50).min(parked).min(live);
    let dir = tempfile::tempdir().unwrap();
    let key = TokenKey::random();
    let pool = StorePool::open(dir.path().join("ahp.db"), DEFAULT_POOL_CONNECTIONS, |s| {
        Ok(s.with_token_key(key.clone()))
    })
    .unwrap();
    let host = HostBuilder::new(pool, dir.path())
        .policy(testing::policy())
        .engine(|e| {
            e.max_live_sandboxes = u32::try_from(live).unwrap() + 16;
            e.max_memory_bytes = Tier::Nano.limits().memory_bytes;
            e.max_table_elements = Tier::Nano.limits().table_elements;
            e.memory_image_cow = std::env::var("AHP_DENSITY_COW").is_ok_and(|v| v == "1");
        })
        .parking(Parking {
            idle_after: None,
            max_live: live,
        })
        .build()
        .unwrap();
    host.sandboxes()
        .register_component_file(guests::TURN_PROBER, Some("turn-prober"))
        .unwrap();
    println!(
        "parked: {live} live, {parked} parked beyond them; vm.max_map_count {}",
        std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .unwrap_or_default()
            .trim()
    );
    step("host built, component compiled", Duration::ZERO);

    let mut agents: Vec<(String, String)> = Vec::with_capacity(live + parked);
    let started = Instant::now();
    for i in 0..live + parked {
        agents.push(agent(&host, &key));
        if (i + 1) % 5_000 == 0 || i + 1 == live || i + 1 == live + parked {
            let s = host.sandboxes();
            step(
                &format!("{} agents: {} live, {} parked", i + 1, s.live_count(), s.parks()),
                started.elapsed(),
            );
        }
    }
    assert_eq!(host.sandboxes().live_count(), live);
    if let Ok(path) = std::env::var("AHP_DENSITY_MAPS") {
        std::fs::copy("/proc/self/maps", path).unwrap();
    }
    // A parked agent's carrier is its rows: only the live agents' are held in memory.
    println!("carriers held in memory: {}", host.agents().carrier_count());
    assert!(host.agents().carrier_count() <= live);
    drop(host.agents().drain_queue());

    let copied = if copies > 0 {
        let copying = Instant::now();
        let first_copy = copy_agents(&dir.path().join("ahp.db"), &agents, copies);
        step(
            &format!(
                "{} agents ({} copied, no sandbox)",
                agents.len() * (copies + 1),
                agents.len() * copies
            ),
            copying.elapsed(),
        );
        first_copy
    } else {
        Vec::new()
    };

    // The earliest agents were parked first; the latest are live.
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for n in 0..sample {
        let (t, a) = &agents[n];
        assert!(!host.sandboxes().is_live(t), "agent {n} is parked");
        cold.push(first_answer(&host, a, n));
        let (t, a) = &agents[agents.len() - 1 - n];
        assert!(host.sandboxes().is_live(t), "agent {} is live", agents.len() - 1 - n);
        warm.push(first_answer(&host, a, sample + n));
    }
    let mut fresh = Vec::new();
    for (n, a) in copied.iter().take(sample).enumerate() {
        fresh.push(first_answer(&host, a, 2 * sample + n));
    }
    if !fresh.is_empty() {
        println!(
            "first answer p50 over {}: a copied agent (never had a sandbox) {:.2} ms",
            fresh.len(),
            p50(fresh).as_secs_f64() * 1e3
        );
    }
    if sample > 0 {
        let (cold, warm) = (p50(cold), p50(warm));
        println!(
            "first answer p50 over {sample}: parked {:.2} ms, live {:.2} ms (+{:.2} ms)",
            cold.as_secs_f64() * 1e3,
            warm.as_secs_f64() * 1e3,
            cold.saturating_sub(warm).as_secs_f64() * 1e3
        );
    }

    let a = host.agents();
    let timed = |what: &str, f: &dyn Fn()| {
        let started = Instant::now();
        f();
        println!("upkeep {what:<16} {:>9.1} ms", started.elapsed().as_secs_f64() * 1e3);
    };
    timed("sweep", &|| drop(a.sweep().unwrap()));
    timed("renew_leases", &|| a.renew_leases());
    timed("schedule_all", &|| a.schedule_all());
    timed("repair_bindings", &|| drop(a.repair_bindings().unwrap()));
    timed("repair_some_bindings", &|| {
        drop(a.repair_some_bindings(ahp_host::agents::REPAIR_SLICE).unwrap())
    });
    // The renewal when every lease is due (the tick's renewal finds none due this early, so
    // every lease is moved back by half of it and a minute first): in bulk, and — the baseline, the path before — one commit per carrier for a thousand.
    let lease = ahp_host::agents::CARRIER_LEASE;
    let half = lease / 2;
    rusqlite::Connection::open(dir.path().join("ahp.db"))
        .unwrap()
        .execute(
            "UPDATE agent_endpoints SET lease_expires_at = lease_expires_at - ?1 WHERE state = 'attached'",
            [half.as_micros() as i64 + 60_000_000],
        )
        .unwrap();
    let renewing = Instant::now();
    let mut renewed = 0;
    loop {
        let r = host
            .store()
            .locked()
            .renew_carried_leases(lease, half, MAX_LEASE_RENEWALS)
            .unwrap();
        renewed += r.endpoints.len();
        if r.endpoints.len() < MAX_LEASE_RENEWALS {
            break;
        }
    }
    let bulk = renewing.elapsed();
    assert_eq!(renewed, (live + parked) * (copies + 1), "every carried agent's lease");
    let one_by_one = agents.len().min(1_000);
    let renewing = Instant::now();
    for (_, agent) in &agents[..one_by_one] {
        let ep = host.store().locked().carried_agent(agent).unwrap().unwrap().endpoint;
        host.store()
            .locked()
            .renew_carrier_lease(agent, &ep.id, ep.generation, lease)
            .unwrap();
    }
    let single = renewing.elapsed();
    println!(
        "renewal of all {renewed} leases in bulk {:.1} ms ({:.2} µs each); one by one {:.1} µs each (over {one_by_one})",
        bulk.as_secs_f64() * 1e3,
        bulk.as_secs_f64() * 1e6 / renewed as f64,
        single.as_secs_f64() * 1e6 / one_by_one as f64
    );
    step("after the answers and one upkeep", started.elapsed());
}
