//! A host claiming another that carried N agents (default 20,000, `AHP_CLAIM_N`), on
//! PostgreSQL (`AHP_TEST_PG`; without it the bench says `skipped` and stops): what the claimant
//! does, as `ahp serve` does it — the claim, in slices of `CLAIM_SLICE` transfers (each one
//! transaction re-checking the claimant's lease: the agents' endpoints retired, their transfers
//! moved, each agent bound here at the next generation, parked) — while a renewal of the
//! claimant's own lease runs every 100 ms on its own thread and session, the two sessions
//! taking turns to write as a host's pool does (`WriteTurns`). Printed: the claim's time and
//! slices, the slowest renewal begun during it, and the longest time between two renewals
//! (what the claimant's lease must outlast: it is fresh for 80 % of its length).
//!
//! Run: `eval "$(bash .ci/postgres start)"; cargo bench -p ahp-store --bench claim`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ahp_store::{
    ActivationEnd, ActivationWrites, DEFAULT_TOKEN_TTL, Store, Tier, TokenKey, TokenScope, WriteTurns,
    issue_transfer_token,
};

const LEASE: Duration = Duration::from_secs(15);
const ENDPOINT_LEASE: Duration = Duration::from_secs(3600);

fn main() {
    let Some((url, _guard)) = ahp_store_postgres::testing::fresh_database() else {
        println!("skipped: claim: AHP_TEST_PG not set (eval \"$(bash .ci/postgres start)\")");
        return;
    };
    let n: usize = std::env::var("AHP_CLAIM_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let key = TokenKey::random();
    let session = || Box::new(ahp_store_postgres::open(&url).unwrap()) as Box<dyn ahp_store::sql::Connection>;
    let store = |conn, host: &str| {
        Store::over(conn)
            .unwrap()
            .with_host_id(host)
            .unwrap()
            .with_token_key(key.clone())
    };

    // Host A carries n agents, then stops renewing.
    let mut a = store(session(), "host-a");
    let lease_a = a.join_host(ahp_store::hosts::MIN_HOST_LEASE, None).unwrap();
    let started = Instant::now();
    let snap = ahp_store::SnapshotInput {
        source_host: "bench".into(),
        system_prompt: "claim bench".into(),
        message_history: vec![],
        tool_state: serde_json::json!({}),
        mcp_config: vec![],
    };
    for _ in 0..n {
        let t = a.snapshot_state(&snap).unwrap().id;
        let tok = issue_transfer_token(&key, &t, TokenScope::ProvisionRuntime, a.now(), DEFAULT_TOKEN_TTL).unwrap();
        a.provision_runtime(&t, Tier::Nano, 1_000, "c", &tok).unwrap();
        a.push_state(&t, None).unwrap();
        let tok = issue_transfer_token(&key, &t, TokenScope::Activate, a.now(), DEFAULT_TOKEN_TTL).unwrap();
        a.begin_activation(&t, &tok).unwrap();
        a.end_activation(
            &t,
            &ActivationEnd::bound(ENDPOINT_LEASE, true),
            &ActivationWrites::default(),
        )
        .unwrap();
    }
    println!("claim: host A carries {n} agents (set up in {:?})", started.elapsed());
    drop(lease_a);

    // Host B: two sessions taking turns to write, one claiming and binding, one renewing.
    let mut turns = WriteTurns::share(vec![session(), session()]).into_iter();
    let mut b = store(turns.next().unwrap(), "host-b");
    let mut renewer = store(turns.next().unwrap(), "host-b");
    let lease_b = b.join_host(LEASE, None).unwrap();
    std::thread::sleep(ahp_store::hosts::MIN_HOST_LEASE + Duration::from_millis(200));

    let stop = Arc::new(AtomicBool::new(false));
    // Each renewal's start and end.
    let renewed = Arc::new(Mutex::new(Vec::<(Instant, Instant)>::new()));
    // Gaps are counted from here, as the renewals start with the claim.
    let joined = Instant::now();
    let renewals = {
        let (stop, renewed, lease) = (stop.clone(), renewed.clone(), lease_b.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let asked = Instant::now();
                renewer.renew_host_lease(&lease, LEASE).unwrap();
                renewed.lock().unwrap().push((asked, Instant::now()));
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };

    let claim_started = Instant::now();
    let claims = b.claim_lapsed_hosts(&lease_b, ENDPOINT_LEASE).unwrap();
    let claim_ended = Instant::now();
    assert_eq!(claims.len(), 1);
    let claim = &claims[0];
    assert_eq!((claim.transfers.len(), claim.parked), (n, n as u64));
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    renewals.join().unwrap();
    let renewed = renewed.lock().unwrap().clone();
    // The slowest renewal begun in a phase, and the longest B went without a renewal ending.
    let slowest = |from: Instant, to: Instant| {
        renewed
            .iter()
            .filter(|(asked, _)| *asked >= from && *asked < to)
            .map(|(asked, done)| *done - *asked)
            .max()
            .unwrap_or_default()
    };
    let ends: Vec<Instant> = std::iter::once(joined).chain(renewed.iter().map(|r| r.1)).collect();
    let longest_gap = ends.windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default();
    println!(
        "claim: B claimed A's {n} agents and bound each at the next generation in {:?}, {} transactions \
         (slowest renewal of B's lease begun meanwhile {:?}); {} renewals, the longest time between two \
         {longest_gap:?}; B's {LEASE:?} lease is fresh for {:?}",
        claim_ended - claim_started,
        claim.slices,
        slowest(claim_started, claim_ended),
        renewed.len(),
        LEASE.mul_f64(0.8)
    );
}
