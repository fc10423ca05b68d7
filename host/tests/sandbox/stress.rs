//! Fifty hostile guests beside honest activations: every honest one answers, the host's memory
//! within its documented bound.

#[allow(unused_imports)]
use super::*;

/// The hostile guests of the stress test, with the tool state that makes each misbehave.
pub(super) const HOSTILE: &[(&str, &str)] = &[
    ("sleeper", r#"{"mode": "sleep"}"#),
    ("loop-forever", "{}"),
    ("memory-bomb", "{}"),
    ("resource-hoarder", r#"{"count": 8000}"#),
    ("deep-recursion", "{}"),
];

/// The host calls the stress test's looping guests hammer (turn-prober `hammer <call>`, one
/// conversation turn each, looping on the call for as long as the turn lasts): every call the
/// `ahp:agent` interfaces serve from the database, and the in-memory snapshot read.
pub(super) const HAMMERED: &[&str] = &[
    "load",
    "save",
    "budget",
    "report",
    "consume",
    "inbox",
    "transcript",
    "messages",
];

/// Documented bound of the stress test: each of the 50 hostile `nano` guests may make the host
/// hold at most its linear memory ceiling plus its host-resource bound; 64 MiB more for the
/// honest activations, the audit rows and the allocator.
pub(super) fn stress_rss_bound(hostile: u64) -> u64 {
    let nano = Tier::Nano.limits();
    hostile * (nano.memory_bytes + host_resources::host_bytes_bound(nano)) + 64 * 1024 * 1024
}

/// Run alone in a child process (see the test below) so no other test's memory is counted.
#[test]
#[ignore = "run by fifty_hostile_guests_beside_honest_activations in its own process"]
pub(super) fn stress_probe() {
    let dir = tempfile::tempdir().unwrap();
    let key = TokenKey::random();
    // The database as `ahp serve` opens it: a file, a pool of connections, one group commit.
    let db = ahp_store::StorePool::open(dir.path().join("ahp.db"), ahp_store::DEFAULT_POOL_CONNECTIONS, |s| {
        Ok(s.with_token_key(key.clone()))
    })
    .unwrap();
    let vault = DirVault::open(dir.path().join("vault")).unwrap();
    std::fs::write(dir.path().join("vault/inventory-api"), SECRET).unwrap();
    let host = HostBuilder::new(db, PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sandbox-cache"))
        .engine(|e| e.max_live_sandboxes = 96)
        .policy(default_policy())
        .vault(Arc::new(vault))
        .build()
        .unwrap();
    let sandboxes = host.sandboxes().clone();
    for (name, path) in guests::ALL {
        sandboxes.register_component_file(path, Some(name)).unwrap();
    }
    let pushed = |tool_state: &str, tier: Tier, component: &str| {
        let snap = snapshot(2, serde_json::from_str(tool_state).unwrap());
        let id = testing::pushed(&mut host.store().locked(), &key, &snap, tier, 1_000_000, component).unwrap();
        let tok = testing::activate_token(&host.store().locked(), &key, &id).unwrap();
        (id, tok)
    };
    let hostile: Vec<(String, String, &str)> = (0..50)
        .map(|i| {
            let (component, state) = HOSTILE[i % HOSTILE.len()];
            let (id, tok) = pushed(state, Tier::Nano, component);
            (id, tok, component)
        })
        .collect();
    // Agents whose turn loops on one host call, two per call, each told so in its own
    // conversation (activated and posted to before the run starts).
    let operator =
        ahp_host::store::conversation::Caller::full(ahp_host::store::conversation::OPERATOR_SUBJECT).unwrap();
    let hammering: Vec<(String, &str)> = HAMMERED
        .iter()
        .chain(HAMMERED)
        .map(|&call| {
            let (id, tok) = pushed("{}", Tier::Nano, "turn-prober");
            let agent = host.activate(&id, &tok).unwrap().transfer.agent_id.unwrap();
            let new = ahp_host::store::conversation::NewConversation {
                title: "hammer".into(),
                agents: vec![agent.clone()],
            };
            let cv = host
                .store()
                .locked()
                .create_conversation(&operator, &new, &id)
                .unwrap()
                .value
                .id;
            let ask = ahp_host::store::conversation::NewMessage {
                conversation: cv,
                acting: ahp_host::store::conversation::Acting::Human,
                body: format!("hammer {call}"),
                reply_to: None,
                idempotency: ahp_host::store::conversation::IdempotencyKey::Key(id.clone()),
            };
            host.store().locked().post_message(&operator, &ask).unwrap();
            (agent, call)
        })
        .collect();
    let inventory = serde_json::to_string(&inventory()).unwrap();
    let before = rss::reset_peak();
    let started = std::time::Instant::now();
    let threads: Vec<_> = hostile
        .into_iter()
        .map(|(id, tok, component)| {
            let s = host.clone();
            std::thread::spawn(move || (component, s.activate(&id, &tok).unwrap().outcome))
        })
        .collect();
    let hammers: Vec<_> = hammering
        .into_iter()
        .map(|(agent, call)| {
            let agents = host.agents().clone();
            std::thread::spawn(move || (call, agents.drive(&agent).unwrap()))
        })
        .collect();
    // Honest activations (small tier: 15 s of wall clock on a shared 2-core machine) while the
    // hostile guests run, one after another on two threads.
    let honest: Vec<_> = (0..2)
        .map(|_| {
            let jobs: Vec<(String, String)> = (0..5).map(|_| pushed(&inventory, Tier::Small, "forecaster")).collect();
            let s = host.clone();
            std::thread::spawn(move || {
                jobs.into_iter()
                    .map(|(id, tok)| {
                        let r = s.activate(&id, &tok).unwrap();
                        assert!(s.sandboxes().drop_sandbox(&id) || r.outcome != RunOutcome::Returned);
                        r.outcome
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    // An orchestrator polling get_status the whole time: what MCP get_status does after its
    // transport (a store read behind the same lock the guests' metering and events take).
    let watched = pushed(&inventory, Tier::Small, "forecaster").0;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let (s, done) = (host.store().clone(), done.clone());
        std::thread::spawn(move || {
            let mut latencies = Vec::new();
            loop {
                let t = std::time::Instant::now();
                s.locked().get_status(&watched).unwrap();
                latencies.push(t.elapsed());
                if done.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            latencies
        })
    };
    for t in honest {
        for outcome in t.join().unwrap() {
            assert_eq!(outcome, RunOutcome::Returned, "an honest activation failed");
        }
    }

    for t in threads {
        let (component, outcome) = t.join().unwrap();
        assert!(
            matches!(outcome, RunOutcome::CeilingExceeded(_)),
            "{component} was not stopped by a ceiling: {outcome:?}"
        );
    }
    for t in hammers {
        let (call, drive) = t.join().unwrap();
        assert_eq!(drive.unknown, 1, "the turn hammering {call} was not stopped: {drive:?}");
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut latencies = poller.join().unwrap();
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    assert!(
        p99 < std::time::Duration::from_millis(50),
        "get_status p99 {p99:?} over 50 ms ({} reads)",
        latencies.len()
    );
    let peak = rss::peak();
    assert_eq!(sandboxes.live_count(), 0);
    println!("elapsed_ms={}", started.elapsed().as_millis());
    println!("rss_growth_bytes={}", peak.saturating_sub(before));
    println!("get_status_p99_us={} reads={}", p99.as_micros(), latencies.len());
}

#[test]
pub(super) fn fifty_hostile_guests_beside_honest_activations() {
    let stdout = rss::run_probe("sandbox::stress::stress_probe");
    let value = |key: &str| rss::probe_value(&stdout, key);
    let growth = value("rss_growth_bytes=");
    let bound = stress_rss_bound(50);
    assert!(growth <= bound, "peak RSS grew {growth} bytes; the bound is {bound}");
    eprintln!(
        "stress: 50 hostile + 16 host-call-looping + 10 honest in {} ms, peak RSS growth {} MiB (bound {} MiB), get_status p99 {} µs",
        value("elapsed_ms="),
        growth >> 20,
        bound >> 20,
        value("get_status_p99_us=")
    );
}
