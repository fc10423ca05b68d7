//! Live sandboxes: more than wasmtime's default stack pool stay live, and those of ended transfers
//! are swept.

#[allow(unused_imports)]
use super::*;

/// Every live sandbox keeps the fiber stack of its last call, so the pool needs a stack per
/// sandbox slot: wasmtime's default of 1,000 stacks trapped the 1,001st live sandbox's calls
/// ("maximum concurrent limit of 1000 for fibers reached") whatever the pool's size.
#[test]
pub(super) fn more_sandboxes_stay_live_than_wasmtime_s_default_stack_pool() {
    let key = TokenKey::random();
    let db = Store::open_in_memory().unwrap().with_token_key(key.clone());
    let h = host_on(
        db.into(),
        key,
        tempfile::tempdir().unwrap(),
        CeilingCap::default(),
        None,
        1_010,
    );
    let ids: Vec<String> = (0..1_005)
        .map(|_| h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "turn-prober"))
        .collect();
    for (i, id) in ids.iter().enumerate() {
        let report = h.activate(id);
        assert_eq!(report.outcome, RunOutcome::Returned, "activation {i}");
    }
    assert_eq!(h.sandboxes.live_count(), 1_005);
    // Each still runs: its next call takes the stack it kept.
    let last = h.run_call(&ids[1_004]).unwrap();
    assert_eq!(last.outcome, RunOutcome::Returned);
}

#[test]
pub(super) fn sandboxes_of_transfers_no_longer_active_are_swept() {
    let h = host();
    let ended = h.pushed(&snapshot(2, inventory()), Tier::Nano, 1_000_000, "forecaster");
    let running = h.pushed(&snapshot(2, inventory()), Tier::Nano, 1_000_000, "forecaster");
    assert_eq!(h.activate(&ended).outcome, RunOutcome::Returned);
    assert_eq!(h.activate(&running).outcome, RunOutcome::Returned);
    assert_eq!(h.sandboxes.live_count(), 2);
    assert!(h.sandboxes.drop_finished().unwrap().is_empty(), "both are active");
    // Ended behind the sandbox's back, as `ahp transfer terminate` from another process does.
    h.db().terminate(&ended, "operator ended it").unwrap();
    assert_eq!(h.sandboxes.drop_finished().unwrap(), vec![ended.clone()]);
    assert_eq!(h.sandboxes.live_count(), 1);
    assert!(matches!(
        h.run_call(&ended),
        Err(ahp_host::sandbox::Error::NoSandbox(_))
    ));
    assert_eq!(h.run_call(&running).unwrap().outcome, RunOutcome::Returned);
    assert!(h.sandboxes.drop_finished().unwrap().is_empty());
    assert!(h.sandboxes.drop_sandbox(&running));
}
