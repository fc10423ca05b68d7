//! The destination sandbox, end to end: real guest components (built by `build.rs` from
//! `examples/` and `host/tests/guests/`) activated against a real store, each hostile guest stopped by the right
//! ceiling with its audit event, and the host serving the next sandbox fine afterwards.

use crate::common;

use common::rss;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ahp_guests as guests;
use ahp_host::host::HostBuilder;
use ahp_host::policy::Policy;
use ahp_host::sandbox::{Call, Ceiling, CeilingCap, RunOutcome, RunReport, Sandboxes, host_resources};
use ahp_host::shared_store::StoreLock;
use ahp_host::store::{
    DEFAULT_TOKEN_TTL, EventKind, SnapshotInput, Store, Tier, TokenKey, TokenScope, TransferStatus,
    issue_transfer_token,
};
use ahp_host::testing::{self, inventory, snapshot};
use ahp_host::vault::DirVault;
use common::worker::{self, post, task, transcript};
use serde_json::{Value, json};

const SECRET: &str = "sk-inventory-test";

/// Hostile guests written as WAT components (`tests/guests/<name>.wat`), registered under
/// their names beside the example guests.
const WAT_GUESTS: &[&str] = &["table-bomb", "many-instances", "many-memories", "many-tables"];

fn wat_guest(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/guests/{name}.wat", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The test host's operator policy: the snapshots' inventory server, its credential bound and
/// revealed (the forecaster checks it has one).
fn default_policy() -> Policy {
    serde_json::from_value(json!({ "servers": [{
        "server": "https://inventory.example.com",
        "credential": { "credRef": "inventory-api", "reveal": true },
    }]}))
    .unwrap()
}

struct Host {
    _dir: tempfile::TempDir,
    key: TokenKey,
    host: ahp_host::host::Host,
    sandboxes: Arc<Sandboxes>,
}

fn host_with(cap: CeilingCap, data_dir: Option<PathBuf>) -> Host {
    let key = TokenKey::random();
    let db = Store::open_in_memory().unwrap().with_token_key(key.clone());
    host_on(db.into(), key, tempfile::tempdir().unwrap(), cap, data_dir, 16)
}

/// A host on a SQLite file in `dir` through a pool of two connections, whose commits its
/// group counts.
fn host_on_a_file() -> Host {
    let key = TokenKey::random();
    let dir = tempfile::tempdir().unwrap();
    let k = key.clone();
    let pool = ahp_store::StorePool::open(dir.path().join("ahp.db"), 2, |s| Ok(s.with_token_key(k.clone()))).unwrap();
    host_on(pool, key, dir, CeilingCap::default(), None, 16)
}

fn host_on(
    db: ahp_store::StorePool,
    key: TokenKey,
    dir: tempfile::TempDir,
    cap: CeilingCap,
    data_dir: Option<PathBuf>,
    max_live: u32,
) -> Host {
    let vault_dir = dir.path().join("vault");
    let vault = DirVault::open(&vault_dir).unwrap();
    std::fs::write(vault_dir.join("inventory-api"), format!("{SECRET}\n")).unwrap();
    // A secret beside the vault that no guest may reach.
    std::fs::write(dir.path().join("token-key"), "host secret").unwrap();
    // Compiled components are shared between tests (files are written atomically) unless a
    // test needs a cold cache.
    let data_dir = data_dir.unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sandbox-cache"));
    let host = HostBuilder::new(db, data_dir)
        .engine(|e| {
            e.max_live_sandboxes = max_live;
            if max_live > 16 {
                // Many slots: the nano tier's memory, so the pool's reservation stays small.
                e.max_memory_bytes = Tier::Nano.limits().memory_bytes;
            }
        })
        .cap(cap)
        .policy(default_policy())
        .vault(Arc::new(vault))
        .build()
        .unwrap();
    let sandboxes = host.sandboxes().clone();
    for (name, path) in guests::ALL {
        sandboxes.register_component_file(path, Some(name)).unwrap();
    }
    for name in WAT_GUESTS {
        sandboxes.register_component(&wat_guest(name), Some(name)).unwrap();
    }
    Host {
        _dir: dir,
        key,
        host,
        sandboxes,
    }
}

fn host() -> Host {
    host_with(CeilingCap::default(), None)
}

impl Host {
    /// The host's database.
    fn db(&self) -> ahp_store::PooledStore<'_> {
        self.host.store().locked()
    }

    /// Adds `servers` (each a policy `servers` entry) to the default policy, and makes
    /// loopback reachable if `loopback`.
    fn allow(&self, servers: Value, loopback: bool) {
        let mut policy = default_policy();
        let extra: Vec<ahp_host::policy::ServerRule> = serde_json::from_value(servers).unwrap();
        policy.servers.extend(extra);
        if loopback {
            policy.allow_networks.push("127.0.0.0/8".into());
        }
        policy.validate().unwrap();
        self.sandboxes.set_policy(policy);
    }

    /// A pushed transfer running `component` at `tier` with `budget` micro-USD.
    fn pushed(&self, snap: &SnapshotInput, tier: Tier, budget: u64, component: &str) -> String {
        testing::pushed(&mut self.db(), &self.key, snap, tier, budget, component).unwrap()
    }

    fn activate(&self, id: &str) -> RunReport {
        let tok = testing::activate_token(&self.db(), &self.key, id).unwrap();
        self.host.activate(id, &tok).unwrap()
    }

    /// A later turn that calls `resume` again.
    fn run_call(&self, id: &str) -> Result<RunReport, ahp_host::sandbox::Error> {
        self.host.agents().run_call(id, Call::Resume)
    }

    fn events(&self, id: &str, kind: EventKind) -> Vec<Value> {
        let status = self.db().get_status(id).unwrap();
        status
            .events
            .into_iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.detail)
            .collect()
    }

    /// Activates a hostile guest, checks it was stopped by `ceiling` with its audit event and
    /// the transfer left `pushed`, then checks a forecaster still activates on this host.
    fn assert_stopped_by(&self, component: &str, tier: Tier, ceiling: Ceiling) {
        let id = self.pushed(&snapshot(3, json!({})), tier, 1_000_000, component);
        let report = self.activate(&id);
        assert_eq!(report.outcome, RunOutcome::CeilingExceeded(ceiling), "{component}");
        assert_eq!(report.transfer.status, TransferStatus::Pushed);
        assert!(!report.transfer.activating);
        let breaches = self.events(&id, EventKind::CeilingExceeded);
        assert_eq!(breaches.len(), 1, "{breaches:?}");
        assert_eq!(breaches[0]["ceiling"], ceiling.as_str());
        assert_eq!(breaches[0]["tier"], tier.as_str());
        let failed = self.events(&id, EventKind::ActivationFailed);
        assert_eq!(failed[0]["reason"], format!("ceiling exceeded: {ceiling}"));
        assert_eq!(self.sandboxes.live_count(), 0, "a failed sandbox is dropped");
        self.assert_serves_a_forecaster();
    }

    /// Activates a WAT guest whose static `count` breaks the nano tier's `ceiling`: refused
    /// before instantiation, with the count in its audit event. Under the small tier, which
    /// allows that count, the same component resumes.
    fn assert_refused_by_count(&self, component: &str, ceiling: Ceiling, count: u32) {
        self.assert_stopped_by(component, Tier::Nano, ceiling);
        let id = self.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, component);
        let report = self.activate(&id);
        assert_eq!(report.outcome, RunOutcome::CeilingExceeded(ceiling));
        assert_eq!(report.fuel_consumed, 0, "no guest code ran");
        let breach = &self.events(&id, EventKind::CeilingExceeded)[0];
        let limit = match ceiling {
            Ceiling::Instances => Tier::Nano.limits().instances,
            Ceiling::Memories => Tier::Nano.limits().memories,
            _ => Tier::Nano.limits().tables,
        };
        assert_eq!(breach["limit"], limit);
        assert_eq!(breach["componentCount"], count);
        assert!(count > limit);

        let roomier = self.pushed(&snapshot(0, json!({})), Tier::Small, 1_000_000, component);
        let report = self.activate(&roomier);
        assert_eq!(report.outcome, RunOutcome::Returned, "{component} under the small tier");
        assert_eq!(report.transfer.status, TransferStatus::Active);
        assert!(self.events(&roomier, EventKind::CeilingExceeded).is_empty());
        assert!(self.sandboxes.drop_sandbox(&roomier));
    }

    /// Activates `component` (whose tool state `{"resumeFirst": true}` makes its first turn
    /// return at once), then runs a second turn, which must break `ceiling`: the sandbox is
    /// dropped and the transfer terminated, after the breach was audited.
    fn assert_later_turn_terminates(&self, component: &str, ceiling: Ceiling) {
        self.assert_later_turn_terminates_with(&snapshot(0, json!({ "resumeFirst": true })), component, ceiling);
    }

    /// [`assert_later_turn_terminates`](Self::assert_later_turn_terminates) with `snap`.
    fn assert_later_turn_terminates_with(&self, snap: &SnapshotInput, component: &str, ceiling: Ceiling) {
        let id = self.pushed(snap, Tier::Nano, 1_000_000, component);
        let first = self.activate(&id);
        assert_eq!(first.outcome, RunOutcome::Returned);
        assert_eq!(first.transfer.status, TransferStatus::Active);
        assert_eq!(self.sandboxes.live_count(), 1);

        let started = std::time::Instant::now();
        let second = self.run_call(&id).unwrap();
        assert_eq!(second.outcome, RunOutcome::CeilingExceeded(ceiling), "{component}");
        if ceiling == Ceiling::WallClock {
            assert!(
                started.elapsed() <= wall_clock_bound(Tier::Nano),
                "{:?}",
                started.elapsed()
            );
        }
        assert_eq!(second.transfer.status, TransferStatus::Terminated);
        assert_eq!(self.sandboxes.live_count(), 0, "the sandbox is dropped");
        assert!(matches!(
            self.run_call(&id),
            Err(ahp_host::sandbox::Error::NoSandbox(_))
        ));
        let events = self.db().get_status(&id).unwrap().events;
        let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
        let breach = kinds.iter().position(|k| *k == EventKind::CeilingExceeded).unwrap();
        let ended = kinds.iter().position(|k| *k == EventKind::Terminated).unwrap();
        assert!(breach < ended, "{kinds:?}");
        assert_eq!(events[breach].detail["ceiling"], ceiling.as_str());
        assert_eq!(
            events[ended].detail["reason"],
            format!("sandbox stopped: ceiling exceeded: {ceiling}")
        );
        assert_eq!(events[ended].detail["from"], "active");
        self.assert_serves_a_forecaster();
    }

    fn assert_serves_a_forecaster(&self) {
        let id = self.pushed(&snapshot(4, inventory()), Tier::Nano, 1_000_000, "forecaster");
        let report = self.activate(&id);
        assert_eq!(report.outcome, RunOutcome::Returned);
        assert_eq!(report.transfer.status, TransferStatus::Active);
        assert!(self.sandboxes.drop_sandbox(&id));
    }
}

#[test]
fn forecaster() {
    let h = host();
    // 600 messages: three pages of the snapshot interface.
    let id = h.pushed(&snapshot(600, inventory()), Tier::Nano, 1_000_000, "forecaster");
    let report = h.activate(&id);
    assert_eq!(report.outcome, RunOutcome::Returned);
    assert_eq!(report.transfer.status, TransferStatus::Active);
    assert!(report.fuel_consumed > 0);
    assert!(report.compute_micro_usd >= 1, "compute is charged");

    let mut db = h.db();
    let saved: Value = serde_json::from_slice(&db.load_checkpoint(&id).unwrap().unwrap().state).unwrap();
    assert_eq!(saved["turn"], 1);
    assert_eq!(saved["messagesSeen"], 600, "resume saw the whole history");
    // A-1 sells 5/day with a 7-day lead time: 35 needed, 10 on hand → reorder 60.
    assert_eq!(saved["reorders"], json!([["A-1", 60]]));
    let status = db.get_status(&id).unwrap();
    let budget = status.budget.unwrap();
    // Only compute: the forecaster calls no model, and reports none.
    assert_eq!(budget.spent_micro_usd, report.compute_micro_usd);
    drop(db);
    let usage = h.events(&id, EventKind::UsageReported);
    assert!(usage.iter().all(|u| u["kind"] == "compute"), "{usage:?}");
    assert!(!usage.is_empty());
    let resolved = h.events(&id, EventKind::CredentialResolved);
    assert_eq!(resolved, vec![json!({ "credRef": "inventory-api" })]);
    let log = h.sandboxes.guest_log(&id).unwrap();
    assert!(log.contains(&format!("{id}: 1 reorders on turn 1")), "{log}");
    assert!(!log.contains(SECRET));

    // A later turn runs on the same live instance and sees its own checkpoint.
    let again = h.run_call(&id).unwrap();
    assert_eq!(again.outcome, RunOutcome::Returned);
    let saved: Value = serde_json::from_slice(&h.db().load_checkpoint(&id).unwrap().unwrap().state).unwrap();
    assert_eq!(saved["turn"], 2);
    assert!(h.sandboxes.drop_sandbox(&id));
    assert!(matches!(h.run_call(&id), Err(ahp_host::sandbox::Error::NoSandbox(_))));
}

#[test]
fn second_activation_of_the_same_component_does_no_compile() {
    let cold = tempfile::tempdir().unwrap();
    let h = host_with(CeilingCap::default(), Some(cold.path().to_path_buf()));
    let compiled = h.sandboxes.compiles();
    assert_eq!(
        compiled,
        (guests::ALL.len() + WAT_GUESTS.len()) as u64,
        "registration compiles each component once"
    );
    h.assert_serves_a_forecaster();
    h.assert_serves_a_forecaster();
    assert_eq!(h.sandboxes.compiles(), compiled, "activations compile nothing");
    // Even with the in-memory InstancePres gone, the on-disk cache serves the next activation.
    h.sandboxes.forget_instance_pres();
    h.assert_serves_a_forecaster();
    assert_eq!(h.sandboxes.compiles(), compiled);
    // A restarted host reuses the compiled files.
    let again = host_with(CeilingCap::default(), Some(cold.path().to_path_buf()));
    assert_eq!(again.sandboxes.compiles(), 0);
}

/// A compiled file is native code the host maps and runs: one whose bytes no longer hash to
/// the digest written beside it (a power loss's zeros, a stray write) is compiled again and
/// replaced, never loaded — and so is one with no digest beside it.
#[test]
fn a_compiled_file_that_fails_its_digest_is_compiled_again_not_run() {
    let cold = tempfile::tempdir().unwrap();
    let all = (guests::ALL.len() + WAT_GUESTS.len()) as u64;
    assert_eq!(
        host_with(CeilingCap::default(), Some(cold.path().to_path_buf()))
            .sandboxes
            .compiles(),
        all
    );
    let compiled: Vec<PathBuf> = std::fs::read_dir(cold.path().join("compiled"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    assert_eq!(compiled.len() as u64, all);
    for (i, path) in compiled.iter().enumerate() {
        let sidecar = path.with_extension("cwasm.sha256");
        assert_eq!(std::fs::read_to_string(&sidecar).unwrap().len(), 64);
        if i == 0 {
            // No digest beside it.
            std::fs::remove_file(sidecar).unwrap();
        } else {
            // One byte changed in the middle of its code, where wasmtime's own checks of the
            // ELF framing and the engine do not look.
            let mut bytes = std::fs::read(path).unwrap();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0xff;
            std::fs::write(path, bytes).unwrap();
        }
    }
    let again = host_with(CeilingCap::default(), Some(cold.path().to_path_buf()));
    assert_eq!(again.sandboxes.compiles(), all, "every changed file compiled again");
    again.assert_serves_a_forecaster();
    // The files written again pass their check: the next host compiles nothing.
    assert_eq!(
        host_with(CeilingCap::default(), Some(cold.path().to_path_buf()))
            .sandboxes
            .compiles(),
        0
    );
}

#[test]
fn loop_forever() {
    // Nano: 0.25 CPU-s of fuel, 2 s of wall clock: the fuel ceiling bites first.
    host().assert_stopped_by("loop-forever", Tier::Nano, Ceiling::FuelPerTurn);
}

#[test]
fn wall_clock_ceiling_stops_a_spinning_guest() {
    let cap = CeilingCap {
        wall_clock_per_turn: Some(Duration::from_millis(30)),
        ..CeilingCap::default()
    };
    let h = host_with(cap, None);
    let started = std::time::Instant::now();
    h.assert_stopped_by("loop-forever", Tier::Small, Ceiling::WallClock);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn memory_bomb() {
    host().assert_stopped_by("memory-bomb", Tier::Nano, Ceiling::Memory);
}

#[test]
fn table_bomb() {
    host().assert_stopped_by("table-bomb", Tier::Nano, Ceiling::TableElements);
}

#[test]
fn many_instances() {
    host().assert_refused_by_count("many-instances", Ceiling::Instances, 18);
}

#[test]
fn many_memories() {
    host().assert_refused_by_count("many-memories", Ceiling::Memories, 2);
}

#[test]
fn many_tables() {
    host().assert_refused_by_count("many-tables", Ceiling::Tables, 5);
}

#[test]
fn a_memory_breach_on_a_later_turn_terminates_the_transfer() {
    host().assert_later_turn_terminates("memory-bomb", Ceiling::Memory);
}

#[test]
fn a_fuel_breach_on_a_later_turn_terminates_the_transfer() {
    host().assert_later_turn_terminates("loop-forever", Ceiling::FuelPerTurn);
}

#[test]
fn deep_recursion() {
    let h = host();
    h.assert_stopped_by("deep-recursion", Tier::Nano, Ceiling::Stack);
    // Its backtrace has a frame per recursive call: what the author is shown is bounded.
    let id = h.pushed(&snapshot(3, json!({})), Tier::Nano, 1_000_000, "deep-recursion");
    let report = h.activate(&id);
    let trace = report.diagnosis.and_then(|d| d.trace).expect("a trap has a trace");
    assert!(trace.len() <= ahp_host::sandbox::MAX_DIAGNOSIS_TRACE_BYTES + '…'.len_utf8());
    assert!(trace.contains("wasm backtrace") || trace.contains("stack"), "{trace}");
}

#[test]
fn credential_prober() {
    let h = host();
    let id = h.pushed(&snapshot(1, json!({})), Tier::Nano, 1_000_000, "credential-prober");
    let report = h.activate(&id);
    // The prober resumes only if every probe was refused and its own ref resolved.
    assert_eq!(report.outcome, RunOutcome::Returned);
    let denied = h.events(&id, EventKind::CredentialDenied);
    let refs: Vec<&str> = denied.iter().map(|d| d["credRef"].as_str().unwrap()).collect();
    assert_eq!(refs, ["someone-elses-key", "../token-key", "../../etc/passwd"]);
    assert!(denied[0]["reason"].as_str().unwrap().contains("not listed"));
    assert!(denied[1]["reason"].as_str().unwrap().contains("malformed"));
    let resolved = h.events(&id, EventKind::CredentialResolved);
    assert_eq!(resolved.len(), 1);
    let log = serde_json::to_string(&h.db().get_status(&id).unwrap().events).unwrap();
    assert!(
        !log.contains(SECRET) && !log.contains("host secret"),
        "no value is audited"
    );
}

#[test]
fn cpu_burn() {
    let h = host();
    let work = json!({ "rounds": 200_000 });
    let a = h.pushed(&snapshot(0, work.clone()), Tier::Nano, 1_000_000, "cpu-burn");
    let b = h.pushed(&snapshot(0, work), Tier::Nano, 1_000_000, "cpu-burn");
    let (ra, rb) = (h.activate(&a), h.activate(&b));
    assert_eq!(ra.outcome, RunOutcome::Returned);
    assert_eq!(ra.fuel_consumed, rb.fuel_consumed, "fuel is bit-exact run to run");
    assert!(ra.fuel_consumed > 200_000 * 3, "every round costs fuel");
}

#[test]
fn a_guest_out_of_budget_makes_the_transfer_insolvent_within_one_quantum() {
    let h = host();
    // Nano charges 20 micro-USD per CPU-second: 3 micro-USD buys 0.15 s, below the 0.25 s
    // per-turn ceiling, so the budget runs out first.
    let allocated = 3;
    let id = h.pushed(
        &snapshot(0, json!({ "resumeFirst": true })),
        Tier::Nano,
        allocated,
        "loop-forever",
    );
    let first = h.activate(&id);
    assert_eq!(first.outcome, RunOutcome::Returned);
    assert_eq!(first.transfer.status, TransferStatus::Active);
    let second = h.run_call(&id).unwrap();
    assert_eq!(second.outcome, RunOutcome::BudgetExhausted);
    assert_eq!(second.transfer.status, TransferStatus::Insolvent);
    let budget = h.db().get_status(&id).unwrap().budget.unwrap();
    assert!(budget.spent_micro_usd >= allocated);
    assert!(
        budget.spent_micro_usd <= allocated + 1,
        "spend {} passed the budget {allocated} by more than one metering quantum",
        budget.spent_micro_usd
    );
    assert_eq!(h.events(&id, EventKind::Insolvent).len(), 1);
    assert!(
        h.events(&id, EventKind::Terminated).is_empty(),
        "insolvent, not terminated: the reaper ends it after its grace"
    );
    assert_eq!(h.sandboxes.live_count(), 0, "an insolvent sandbox is dropped");
    h.assert_serves_a_forecaster();
}

#[test]
fn metering_ticks_while_the_guest_runs() {
    let h = host();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "loop-forever");
    let report = h.activate(&id);
    assert_eq!(report.outcome, RunOutcome::CeilingExceeded(Ceiling::FuelPerTurn));
    let compute: Vec<u64> = h
        .events(&id, EventKind::UsageReported)
        .iter()
        .filter(|u| u["kind"] == "compute")
        .map(|u| u["amountMicroUsd"].as_u64().unwrap())
        .collect();
    // 0.25 CPU-s at 20 micro-USD per CPU-s is 5 micro-USD, charged by the host without the
    // guest reporting anything, at ticks as the loop runs: fuel is handed out an interval at
    // a time (`FUEL_FLUSH_INTERVAL`), so even a call-free loop's fuel reaches the meter.
    assert!(!compute.is_empty(), "{compute:?}");
    assert_eq!(compute.iter().sum::<u64>(), 5);
    assert_eq!(report.compute_micro_usd, 5);
    assert_eq!(h.db().budget(&id).unwrap().unwrap().spent_micro_usd, 5);
}

#[test]
fn the_assistant_is_embedded_for_the_binary() {
    assert_eq!(
        ahp_host::guests::ASSISTANT_WASM,
        std::fs::read(guests::ASSISTANT).unwrap()
    );
}

#[test]
fn a_guest_out_of_budget_during_activation_fails_it() {
    let h = host();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1, "loop-forever");
    let report = h.activate(&id);
    assert_eq!(report.outcome, RunOutcome::BudgetExhausted);
    assert_eq!(report.transfer.status, TransferStatus::Pushed);
    let budget = h.db().get_status(&id).unwrap().budget.unwrap();
    assert!(budget.spent_micro_usd <= 1 + 1);
    assert!(
        h.events(&id, EventKind::CeilingExceeded).is_empty(),
        "budget is not a ceiling"
    );
}

#[test]
fn activation_is_refused_without_a_valid_token_and_changes_nothing() {
    let h = host();
    let id = h.pushed(&snapshot(1, inventory()), Tier::Nano, 1_000, "forecaster");
    assert!(h.host.activate(&id, "not-a-token").is_err());
    assert_eq!(h.db().transfer(&id).unwrap().status, TransferStatus::Pushed);
    assert_eq!(h.sandboxes.live_count(), 0);
}

#[test]
fn unregistered_or_invalid_components_are_refused() {
    let h = host();
    assert!(h.sandboxes.register_component(b"not wasm", None).is_err());
    assert!(h.sandboxes.register_component(&[], None).is_err());
    let too_big = vec![0u8; ahp_host::store::MAX_COMPONENT_BYTES as usize + 1];
    assert!(h.sandboxes.register_component(&too_big, None).is_err());
    let id = h.pushed(&snapshot(1, inventory()), Tier::Nano, 1_000, "never-registered");
    let tok = issue_transfer_token(&h.key, &id, TokenScope::Activate, h.db().now(), DEFAULT_TOKEN_TTL).unwrap();
    let err = h.host.activate(&id, &tok).unwrap_err();
    assert!(matches!(err, ahp_host::sandbox::Error::UnknownComponent(_)), "{err}");
    let t = h.db().transfer(&id).unwrap();
    assert_eq!((t.status, t.activating), (TransferStatus::Pushed, false));
    assert_eq!(h.events(&id, EventKind::ActivationFailed).len(), 1);
}

#[test]
fn a_component_importing_what_the_host_does_not_link_is_refused_at_registration() {
    let data = tempfile::tempdir().unwrap();
    let h = host_with(CeilingCap::default(), Some(data.path().to_path_buf()));
    let files = |dir: &str| std::fs::read_dir(data.path().join(dir)).unwrap().count();
    let before = (files("components"), files("compiled"), h.sandboxes.compiles());
    let err = h
        .sandboxes
        .register_component(&wat_guest("imports-keyvalue"), Some("imports-keyvalue"))
        .unwrap_err();
    assert!(matches!(err, ahp_host::sandbox::Error::InvalidComponent(_)), "{err}");
    assert!(
        err.to_string().contains("imports `wasi:keyvalue/store@0.2.0-draft`"),
        "{err}"
    );
    // Nothing changed: no record, no file left behind.
    assert!(h.db().component("imports-keyvalue").unwrap().is_none());
    assert_eq!((files("components"), files("compiled")), (before.0, before.1));
}

#[test]
fn every_example_guest_imports_only_what_the_host_links() {
    let h = host();
    let engine = h.sandboxes.engine();
    for (name, path) in guests::ALL {
        let component = wasmtime::component::Component::from_file(engine, path).unwrap();
        let imports: Vec<String> = component
            .component_type()
            .imports(engine)
            .map(|(import, _)| import.to_owned())
            .collect();
        assert!(!imports.is_empty(), "{name}");
        for import in &imports {
            assert!(
                ahp_host::interfaces::is_allowed(import),
                "{name} imports {import}, which is not on the host's allow-list"
            );
            assert!(!import.starts_with("wasi:sockets/") && !import.starts_with("wasi:filesystem/"));
        }
        eprintln!("{name}: {}", imports.join(" "));
    }
}

/// A loopback HTTP/1.1 server that answers every request with `ok` and counts the requests
/// and the body bytes it received (content-length or chunked).
struct Loopback {
    url: String,
    requests: Arc<std::sync::atomic::AtomicU64>,
    body_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// The `authorization` header of each request (empty if it had none).
    authorizations: Arc<Mutex<Vec<String>>>,
}

fn loopback() -> Loopback {
    loopback_seeing(|| {})
}

/// [`loopback`], calling `on_request` as each request arrives, before it answers.
fn loopback_seeing(on_request: impl Fn() + Send + 'static) -> Loopback {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::atomic::Ordering;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", listener.local_addr().unwrap().port());
    let requests = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let body_bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let authorizations = Arc::new(Mutex::new(Vec::new()));
    let (r, b, a) = (requests.clone(), body_bytes.clone(), authorizations.clone());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let (mut length, mut chunked, mut auth) = (0usize, false, String::new());
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                continue;
            }
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                chunked |= lower.starts_with("transfer-encoding:") && lower.contains("chunked");
                if lower.starts_with("authorization:") {
                    auth = line["authorization:".len()..].trim().to_owned();
                }
            }
            let mut got = 0usize;
            let mut sink = vec![0; 64 * 1024];
            if chunked {
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    let size = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
                    if size == 0 {
                        break;
                    }
                    let mut chunk = vec![0; size + 2];
                    if reader.read_exact(&mut chunk).is_err() {
                        break;
                    }
                    got += size;
                }
            } else {
                while got < length {
                    let n = reader.read(&mut sink[..(length - got).min(65536)]).unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    got += n;
                }
            }
            on_request();
            a.lock().unwrap().push(auth);
            r.fetch_add(1, Ordering::Relaxed);
            b.fetch_add(got as u64, Ordering::Relaxed);
            let mut conn = conn;
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    Loopback {
        url,
        requests,
        body_bytes,
        authorizations,
    }
}

fn snapshot_for(server: &str) -> SnapshotInput {
    let mut s = snapshot(1, json!({}));
    s.mcp_config[0].server = server.to_owned();
    s
}

#[test]
fn egress_flood() {
    use std::sync::atomic::Ordering;
    let server = loopback();
    let h = host();
    h.allow(json!([{ "server": server.url }]), true);
    let id = h.pushed(&snapshot_for(&server.url), Tier::Nano, 1_000_000, "egress-flood");
    let report = h.activate(&id);
    // The flood was cut off at the ceiling (the guest resumes only once it was).
    assert_eq!(report.outcome, RunOutcome::Returned);
    let ceiling = Tier::Nano.limits().egress_bytes;
    let breaches = h.events(&id, EventKind::CeilingExceeded);
    assert_eq!(breaches.len(), 1, "{breaches:?}");
    assert_eq!(breaches[0]["ceiling"], "egress_bytes");
    assert_eq!(breaches[0]["limit"], ceiling);
    let used = breaches[0]["usedBytes"].as_u64().unwrap();
    assert!(used <= ceiling && used > ceiling / 2, "counted {used} of {ceiling}");
    let received = server.body_bytes.load(Ordering::Relaxed);
    assert!(
        received <= ceiling,
        "the server received {received} bytes, past the {ceiling} ceiling"
    );
    assert!(server.requests.load(Ordering::Relaxed) >= 8);
    assert!(h.sandboxes.guest_log(&id).unwrap().contains("cut off after"));
    // A later turn gets no more: the ceiling is over the sandbox's life.
    // (The server counts the cut-off request when its connection closes: let it settle.)
    std::thread::sleep(Duration::from_millis(300));
    let before = server.requests.load(Ordering::Relaxed);
    h.run_call(&id).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(server.requests.load(Ordering::Relaxed), before);
    assert_eq!(
        h.events(&id, EventKind::CeilingExceeded).len(),
        1,
        "one breach, audited once"
    );
}

#[test]
fn egress_denied() {
    use std::sync::atomic::Ordering;
    let server = loopback();
    let h = host();
    h.allow(json!([{ "server": server.url }]), true);
    let id = h.pushed(&snapshot_for(&server.url), Tier::Nano, 1_000_000, "egress-denied");
    let report = h.activate(&id);
    // The guest resumes only if example.com and `localhost` were refused and its own server
    // (named 127.0.0.1) answered.
    assert_eq!(report.outcome, RunOutcome::Returned, "{:?}", h.sandboxes.guest_log(&id));
    assert_eq!(server.requests.load(Ordering::Relaxed), 1);
    assert!(h.sandboxes.guest_log(&id).unwrap().contains("own server answered 200"));
}

/// The most a turn may take past its wall-clock ceiling: 10 % of it plus 100 ms.
fn wall_clock_bound(tier: Tier) -> Duration {
    let ceiling = tier.limits().wall_clock_per_turn;
    ceiling + ceiling / 10 + Duration::from_millis(100)
}

impl Host {
    /// Activates the sleeper with `tool_state` under nano, which must be stopped by the
    /// wall-clock ceiling within its bound: the transfer back in `pushed`, the breach audited.
    fn assert_wait_ends_with_the_turn(&self, snap: &SnapshotInput) {
        let id = self.pushed(snap, Tier::Nano, 1_000_000, "sleeper");
        let tok = testing::activate_token(&self.db(), &self.key, &id).unwrap();
        let started = std::time::Instant::now();
        let report = self.host.activate(&id, &tok).unwrap();
        let took = started.elapsed();
        let mode = &snap.tool_state["mode"];
        assert_eq!(
            report.outcome,
            RunOutcome::CeilingExceeded(Ceiling::WallClock),
            "{mode}: {:?}",
            self.sandboxes.guest_log(&id)
        );
        assert!(took <= wall_clock_bound(Tier::Nano), "{mode}: the turn took {took:?}");
        assert!(
            took >= Tier::Nano.limits().wall_clock_per_turn,
            "{mode}: ended early, {took:?}"
        );
        assert_eq!(report.transfer.status, TransferStatus::Pushed);
        assert!(!report.transfer.activating);
        let breaches = self.events(&id, EventKind::CeilingExceeded);
        assert_eq!(breaches.len(), 1, "{breaches:?}");
        assert_eq!(breaches[0]["ceiling"], "wall_clock_per_turn");
        assert_eq!(breaches[0]["limit"], 2_000);
        let failed = self.events(&id, EventKind::ActivationFailed);
        assert_eq!(failed[0]["reason"], "ceiling exceeded: wall_clock_per_turn");
        assert_eq!(self.sandboxes.live_count(), 0, "the sandbox is dropped");
    }
}

/// A loopback HTTP server that reads each request and then stalls: with `head`, after sending
/// a response head announcing 1,000 body bytes and 10 of them; without, before answering at
/// all. Connections stay open for a minute.
fn stalling_server(head: bool) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", listener.local_addr().unwrap().port());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                    line.clear();
                }
                if head {
                    let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n0123456789");
                }
                std::thread::sleep(Duration::from_secs(60));
            });
        }
    });
    url
}

#[test]
fn sleeper() {
    let h = host();
    for mode in ["sleep", "poll", "block"] {
        h.assert_wait_ends_with_the_turn(&snapshot(0, json!({ "mode": mode })));
    }
    h.assert_serves_a_forecaster();
}

#[test]
fn a_guest_blocked_on_a_stalled_response_body_ends_with_the_turn() {
    let h = host();
    let url = stalling_server(true);
    h.allow(json!([{ "server": url }]), true);
    let mut snap = snapshot_for(&url);
    snap.tool_state = json!({ "mode": "stream" });
    h.assert_wait_ends_with_the_turn(&snap);
    h.assert_serves_a_forecaster();
}

#[test]
fn a_guest_waiting_for_http_responses_ends_with_the_turn() {
    let h = host();
    let url = stalling_server(false);
    h.allow(json!([{ "server": url }]), true);
    let mut snap = snapshot_for(&url);
    snap.tool_state = json!({ "mode": "http" });
    h.assert_wait_ends_with_the_turn(&snap);
    h.assert_serves_a_forecaster();
}

#[test]
fn a_blocking_wait_on_a_later_turn_terminates_the_transfer() {
    let h = host();
    let started = std::time::Instant::now();
    h.assert_later_turn_terminates_with(
        &snapshot(0, json!({ "mode": "sleep", "resumeFirst": true })),
        "sleeper",
        Ceiling::WallClock,
    );
    // Two activations and a forecaster besides the blocked turn.
    assert!(started.elapsed() < wall_clock_bound(Tier::Nano) + Duration::from_secs(2));
}

#[test]
fn resource_hoarder() {
    let h = host();
    let capacity = host_resources::table_capacity(Tier::Nano.limits());
    // At the limit: every entry the table has.
    let id = h.pushed(
        &snapshot(0, json!({ "count": capacity })),
        Tier::Nano,
        1_000_000,
        "resource-hoarder",
    );
    let report = h.activate(&id);
    assert_eq!(report.outcome, RunOutcome::Returned, "{capacity} fields fit");
    assert!(h.sandboxes.drop_sandbox(&id));
    // One past it, and the issue's 8,000.
    for count in [capacity + 1, 8_000] {
        let id = h.pushed(
            &snapshot(0, json!({ "count": count })),
            Tier::Nano,
            1_000_000,
            "resource-hoarder",
        );
        let report = h.activate(&id);
        assert_eq!(
            report.outcome,
            RunOutcome::CeilingExceeded(Ceiling::HostResources),
            "{count}"
        );
        assert_eq!(report.transfer.status, TransferStatus::Pushed);
        let breaches = h.events(&id, EventKind::CeilingExceeded);
        assert_eq!(breaches.len(), 1, "{breaches:?}");
        assert_eq!(breaches[0]["ceiling"], "host_resources");
        assert_eq!(breaches[0]["limit"], capacity);
        assert_eq!(breaches[0]["entryBytes"], host_resources::MAX_ENTRY_BYTES);
        assert_eq!(
            h.events(&id, EventKind::ActivationFailed)[0]["reason"],
            "ceiling exceeded: host_resources"
        );
    }
    assert_eq!(h.sandboxes.live_count(), 0);
    h.assert_serves_a_forecaster();
}

/// `VmRSS` or `VmHWM` of this process, in bytes.
/// Slack over a sandbox's documented host bound for the rest of the process during one
/// activation: the guest's own linear memory (the hoarder touches ~1 MiB), the audit rows,
/// allocator fragmentation.
const PROCESS_SLACK_BYTES: u64 = 8 * 1024 * 1024;

/// Run alone in a child process (see the test below) so no other test's memory is counted.
#[test]
#[ignore = "run by host_rss_stays_bounded_while_a_guest_hoards_resources in its own process"]
fn hoarder_rss_probe() {
    let h = host();
    h.assert_serves_a_forecaster();
    let id = h.pushed(
        &snapshot(0, json!({ "count": 8_000 })),
        Tier::Nano,
        1_000_000,
        "resource-hoarder",
    );
    let tok = testing::activate_token(&h.db(), &h.key, &id).unwrap();
    // Reset the peak (VmHWM) to the current RSS, then take the peak over the activation.
    let before = rss::reset_peak();
    let report = h.host.activate(&id, &tok).unwrap();
    let peak = rss::peak();
    assert_eq!(report.outcome, RunOutcome::CeilingExceeded(Ceiling::HostResources));
    println!("rss_growth_bytes={}", peak.saturating_sub(before));
}

#[test]
fn host_rss_stays_bounded_while_a_guest_hoards_resources() {
    let stdout = rss::run_probe("sandbox::hoarder_rss_probe");
    let growth = rss::probe_value(&stdout, "rss_growth_bytes=");
    let bound = host_resources::host_bytes_bound(Tier::Nano.limits()) + PROCESS_SLACK_BYTES;
    // Before the ceiling the same guest grew the host by ~940 MB.
    assert!(growth <= bound, "peak RSS grew {growth} bytes; the bound is {bound}");
    eprintln!(
        "peak RSS growth while hoarding: {} KiB (bound {} KiB)",
        growth / 1024,
        bound / 1024
    );
}

/// Whether the prober's `log` says its GET of `url` was refused with the error `code`.
fn refused_with(log: &str, url: &str, code: &str) -> bool {
    log.lines()
        .any(|l| l.starts_with(&format!("GET {url} -> refused: ")) && l.contains(code))
}

/// A snapshot listing `servers` as `(url, credRef)`.
fn snapshot_with(servers: &[(&str, &str)]) -> SnapshotInput {
    let mut s = snapshot(0, json!({}));
    s.mcp_config = servers
        .iter()
        .map(|(server, cred_ref)| ahp_host::store::McpServer {
            server: (*server).to_owned(),
            cred_ref: (*cred_ref).to_owned(),
        })
        .collect();
    s
}

impl Host {
    /// Runs the egress prober over `snap` and returns its log (it always resumes).
    fn probe(&self, snap: &SnapshotInput) -> (String, String) {
        let id = self.pushed(snap, Tier::Nano, 1_000_000, "egress-prober");
        let report = self.activate(&id);
        assert_eq!(report.outcome, RunOutcome::Returned);
        let log = self.sandboxes.guest_log(&id).unwrap();
        assert!(self.sandboxes.drop_sandbox(&id));
        (id, log)
    }
}

#[test]
fn egress_prober() {
    // Metadata, loopback (by address and by name) and private destinations are refused by
    // default, on the address the name resolves to — even though the policy lists each server.
    use std::sync::atomic::Ordering;
    let server = loopback();
    let port = server
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let by_name = format!("http://localhost:{port}/mcp");
    let targets = [
        "http://169.254.169.254/latest/meta-data",
        server.url.as_str(),
        by_name.as_str(),
        "http://10.0.0.1/mcp",
        "http://192.168.1.1/mcp",
        "http://[::1]:9/mcp",
    ];
    let h = host();
    let rules: Vec<Value> = targets.iter().map(|t| json!({ "server": t })).collect();
    h.allow(Value::Array(rules), false);
    let snap = snapshot_with(&targets.map(|t| (t, "inventory-api")));
    let (_, log) = h.probe(&snap);
    for t in targets {
        assert!(refused_with(&log, t, "DestinationIpProhibited"), "{t}: {log}");
    }
    assert_eq!(
        server.requests.load(Ordering::Relaxed),
        0,
        "nothing reached the loopback server"
    );
}

#[test]
fn an_activation_commits_twice_whatever_its_resume_writes() {
    // The forecaster's resume resolves a credential (audited), saves a checkpoint and burns
    // fuel (the meter settles): all of it rides in the completing commit, and so does the
    // binding of its agent with its wake carrier.
    let h = host_on_a_file();
    let id = h.pushed(&snapshot(3, inventory()), Tier::Nano, 1_000_000, "forecaster");
    let tok = testing::activate_token(&h.db(), &h.key, &id).unwrap();
    let group = || h.host.store().group().unwrap().stats().commits;
    let before = group();
    let report = h.host.activate(&id, &tok).unwrap();
    assert_eq!(report.outcome, RunOutcome::Returned, "{:?}", report.diagnosis);
    assert_eq!(group() - before, 2, "begin and complete, nothing between or after");
    let agent = report.transfer.agent_id.clone().expect("bound");
    assert!(h.host.agents().carrier(&agent).is_some(), "this host carries its turns");
    let events = h.db().get_status(&id).unwrap().events;
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    use EventKind as K;
    for k in [K::CredentialResolved, K::UsageReported, K::Activated, K::AgentBound] {
        assert!(kinds.contains(&k), "{k:?} in {kinds:?}");
    }
    let compute = events
        .iter()
        .filter(|e| e.kind == K::UsageReported && e.detail["kind"] == "compute")
        .count();
    assert_eq!(compute, 1, "the meter's settlements are one spend: {kinds:?}");
    assert!(
        h.db().load_checkpoint(&id).unwrap().is_some(),
        "the checkpoint was saved"
    );
    let budget = h.db().budget(&id).unwrap().unwrap();
    assert_eq!(
        budget.spent_micro_usd,
        report.compute_micro_usd + forecaster_model_spend(&events)
    );
}

/// The spend the forecaster reported itself (not compute), from its `usage_reported` events.
fn forecaster_model_spend(events: &[ahp_store::Event]) -> u64 {
    events
        .iter()
        .filter(|e| e.kind == EventKind::UsageReported && e.detail["kind"] != "compute")
        .map(|e| e.detail["amountMicroUsd"].as_u64().unwrap())
        .sum()
}

#[test]
fn a_revealed_credential_s_audit_is_durable_before_the_guest_s_next_request_goes_out() {
    // The activation holds its writes for its end; a guest that reads a secret and then sends
    // a request (which could carry it) must find its `credential_resolved` row already
    // committed when that request arrives. The prober GETs A, resolves A's ref (revealed),
    // then GETs B.
    use std::sync::atomic::Ordering;
    let h = host();
    let store = h.host.store().clone();
    let resolved_at_b = Arc::new(Mutex::new(Vec::new()));
    let (seen, watched) = (resolved_at_b.clone(), Arc::new(Mutex::new(String::new())));
    let transfer = watched.clone();
    let b = loopback_seeing(move || {
        let id = transfer.lock().unwrap().clone();
        let events = store.locked().get_status(&id).unwrap().events;
        // The guest's own resolution (the injection into A's request has `"use": "injected"`).
        let n = events
            .iter()
            .filter(|e| e.kind == EventKind::CredentialResolved && e.detail.get("use").is_none())
            .count();
        seen.lock().unwrap().push(n);
    });
    let a = loopback();
    h.allow(
        json!([
            { "server": a.url, "credential": { "credRef": "inventory-api", "reveal": true } },
            { "server": b.url },
        ]),
        true,
    );
    let snap = snapshot_with(&[(&a.url, "inventory-api"), (&b.url, "unbound")]);
    let id = h.pushed(&snap, Tier::Nano, 1_000_000, "egress-prober");
    *watched.lock().unwrap() = id.clone();
    let report = h.activate(&id);
    assert_eq!(report.outcome, RunOutcome::Returned);
    let log = h.sandboxes.guest_log(&id).unwrap();
    assert!(log.contains("resolve inventory-api -> revealed"), "{log}");
    assert_eq!(b.requests.load(Ordering::Relaxed), 1, "{log}");
    assert_eq!(
        *resolved_at_b.lock().unwrap(),
        [1],
        "the audit was committed before B was reached"
    );
    // And the rest of the activation's writes landed with its end: the denial of the unbound ref.
    let events = h.db().get_status(&id).unwrap().events;
    let at = |k: EventKind| events.iter().position(|e| e.kind == k).unwrap();
    assert_eq!(
        events.iter().filter(|e| e.kind == EventKind::CredentialDenied).count(),
        1
    );
    assert!(at(EventKind::CredentialDenied) < at(EventKind::Activated));
}

#[test]
fn an_injected_credential_reaches_the_server_and_never_the_guest() {
    use std::sync::atomic::Ordering;
    let server = loopback();
    let h = host();
    // The operator binds inventory-api to the loopback server, injected and not revealed, and
    // lets this test reach loopback.
    h.allow(
        json!([{ "server": server.url, "credential": { "credRef": "inventory-api" } }]),
        true,
    );
    let (id, log) = h.probe(&snapshot_with(&[(&server.url, "inventory-api")]));
    assert!(log.contains(&format!("GET {} -> 200 (2 bytes)", server.url)), "{log}");
    assert_eq!(*server.authorizations.lock().unwrap(), [format!("Bearer {SECRET}")]);
    assert!(
        log.contains("resolve inventory-api -> refused: NotAllowed(\"the operator's policy injects it"),
        "{log}"
    );
    assert!(!log.contains(SECRET), "{log}");
    let events = h.db().get_status(&id).unwrap().events;
    let injected: Vec<&Value> = events
        .iter()
        .filter(|e| e.kind == EventKind::CredentialResolved)
        .map(|e| &e.detail)
        .collect();
    assert_eq!(
        injected,
        [&json!({ "credRef": "inventory-api", "server": server.url.replace("/mcp", ""), "use": "injected" })]
    );
    assert!(!serde_json::to_string(&events).unwrap().contains(SECRET));
    assert_eq!(server.requests.load(Ordering::Relaxed), 1);
}

#[test]
fn a_snapshot_cannot_use_a_credential_the_policy_does_not_bind_to_that_server() {
    let server = loopback();
    let h = host();
    // The policy binds `crm-key` to the loopback server; the snapshot names inventory-api for
    // it (which the policy binds, and reveals, only for the inventory server), and names a
    // server the policy does not list at all.
    std::fs::write(h._dir.path().join("vault/crm-key"), "crm-secret").unwrap();
    h.allow(
        json!([{ "server": server.url, "credential": { "credRef": "crm-key", "reveal": true } }]),
        true,
    );
    let (_, log) = h.probe(&snapshot_with(&[
        (&server.url, "inventory-api"),
        ("http://127.0.0.1:9/other", "crm-key"),
    ]));
    assert!(log.contains(&format!("GET {} -> 200", server.url)), "reachable: {log}");
    assert_eq!(*server.authorizations.lock().unwrap(), [""], "no credential injected");
    assert!(
        log.contains("resolve inventory-api -> refused: NotAllowed(\"the operator's policy does not bind it"),
        "{log}"
    );
    assert!(
        refused_with(&log, "http://127.0.0.1:9/other", "HttpRequestDenied"),
        "{log}"
    );
    assert!(
        log.contains("resolve crm-key -> refused: NotAllowed(\"the operator's policy does not bind it"),
        "{log}"
    );
    assert!(!log.contains(SECRET) && !log.contains("crm-secret"));
}

/// The hostile guests of the stress test, with the tool state that makes each misbehave.
const HOSTILE: &[(&str, &str)] = &[
    ("sleeper", r#"{"mode": "sleep"}"#),
    ("loop-forever", "{}"),
    ("memory-bomb", "{}"),
    ("resource-hoarder", r#"{"count": 8000}"#),
    ("deep-recursion", "{}"),
];

/// The host calls the stress test's looping guests hammer (turn-prober `hammer <call>`, one
/// conversation turn each, looping on the call for as long as the turn lasts): every call the
/// `ahp:agent` interfaces serve from the database, and the in-memory snapshot read.
const HAMMERED: &[&str] = &[
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
fn stress_rss_bound(hostile: u64) -> u64 {
    let nano = Tier::Nano.limits();
    hostile * (nano.memory_bytes + host_resources::host_bytes_bound(nano)) + 64 * 1024 * 1024
}

/// Run alone in a child process (see the test below) so no other test's memory is counted.
#[test]
#[ignore = "run by fifty_hostile_guests_beside_honest_activations in its own process"]
fn stress_probe() {
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
fn fifty_hostile_guests_beside_honest_activations() {
    let stdout = rss::run_probe("sandbox::stress_probe");
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

/// `model-prober` drives the model gateway's own suite, `model_gateway.rs` (its test
/// `model_prober` is there).
mod model_prober {}

#[test]
fn worker() {
    let h = host();
    let id = h.pushed(&snapshot(0, json!({"job": "reverse"})), Tier::Nano, 1_000_000, "worker");
    assert_eq!(h.activate(&id).outcome, RunOutcome::Returned);
    let (agent, cv, caller) = conversation_with(&h, &id);

    worker::reverses_its_tasks(&h.host, &caller, &agent, &cv);

    // A tool state it cannot follow fails the activation, with the reason.
    let bad = h.pushed(
        &snapshot(0, json!({"delayMs": 120_001})),
        Tier::Nano,
        1_000_000,
        "worker",
    );
    let report = h.activate(&bad);
    assert!(
        matches!(&report.outcome, RunOutcome::GuestError(e) if e.contains("delayMs 120001 is over 120000")),
        "{:?}",
        report.outcome
    );
    let edge = h.pushed(
        &snapshot(0, json!({"delayMs": 120_000})),
        Tier::Nano,
        1_000_000,
        "worker",
    );
    assert_eq!(
        h.activate(&edge).outcome,
        RunOutcome::Returned,
        "the bound itself is allowed"
    );
}

#[test]
fn coordinator() {
    use ahp_host::store::delegation::{Acting, TaskState};
    let h = host();
    let agents = h.host.agents();
    let mut workers = Vec::new();
    for job in ["count", "reverse"] {
        let id = h.pushed(&snapshot(0, json!({"job": job})), Tier::Nano, 1_000_000, "worker");
        assert_eq!(h.activate(&id).outcome, RunOutcome::Returned);
        workers.push(h.db().transfer(&id).unwrap().agent_id.unwrap());
    }
    let state = json!({"workers": workers, "waitMode": "all"});
    let id = h.pushed(&snapshot(0, state), Tier::Nano, 1_000_000, "coordinator");
    assert_eq!(h.activate(&id).outcome, RunOutcome::Returned);
    let (agent, cv, caller) = conversation_with(&h, &id);

    // The question: one task per worker, one wait, no answer yet.
    let question = post(&h.host, &caller, &cv, "ship A-1 first", "q-1");
    assert_eq!(agents.drive(&agent).unwrap().consumed, 1);
    let listed = h
        .db()
        .list_agent_tasks(&caller, &Acting::Human, &Default::default(), 10)
        .unwrap();
    assert_eq!(listed.len(), 2);
    assert!(
        listed
            .iter()
            .all(|t| t.instructions == "ship A-1 first" && t.creator_agent_id.as_deref() == Some(agent.as_str()))
    );
    assert_eq!(transcript(&h.host, &caller, &cv).len(), 1);

    // The first worker's result alone fires nothing (all); the second's fires the wait.
    agents.drive(&workers[0]).unwrap();
    assert_eq!(
        agents.drive(&agent).unwrap(),
        Default::default(),
        "a partial all makes no wake"
    );
    agents.drive(&workers[1]).unwrap();
    assert_eq!(agents.drive(&agent).unwrap().consumed, 1);
    let t = transcript(&h.host, &caller, &cv);
    assert_eq!(t.len(), 2);
    assert_eq!(t[1].reply_to.as_deref(), Some(question.as_str()));
    assert_eq!(
        t[1].body,
        format!(
            "On \"ship A-1 first\":\n- {} (succeeded): count: 3 words, 10 letters\n- {} (succeeded): reverse: first A-1 ship",
            workers[0], workers[1]
        )
    );
    assert!(
        listed
            .iter()
            .all(|t| task(&h.host, &caller, &t.id).state == TaskState::Succeeded)
    );
    // Nothing is left to do: no second answer.
    assert_eq!(agents.drive(&agent).unwrap(), Default::default());

    // A tool state it cannot follow fails the activation: 9 workers, or one twice.
    let nine: Vec<String> = (0..9).map(|i| format!("agt_{i:026}")).collect();
    for (workers, why) in [
        (json!(nine), "9 workers, at most 8"),
        (json!([workers[0], workers[0]]), "a worker is listed twice"),
    ] {
        let bad = h.pushed(
            &snapshot(0, json!({"workers": workers})),
            Tier::Nano,
            1_000_000,
            "coordinator",
        );
        let report = h.activate(&bad);
        assert!(
            matches!(&report.outcome, RunOutcome::GuestError(e) if e.contains(why)),
            "{:?}",
            report.outcome
        );
    }

    // Without workers, a question gets an answer saying so.
    let lone = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "coordinator");
    assert_eq!(h.activate(&lone).outcome, RunOutcome::Returned);
    let (lone_agent, lone_cv, _) = conversation_with(&h, &lone);
    post(&h.host, &caller, &lone_cv, "anyone?", "q-2");
    agents.drive(&lone_agent).unwrap();
    let t = transcript(&h.host, &caller, &lone_cv);
    assert_eq!(t[1].body, "I have no workers to ask (toolState.workers is empty).");
}

/// Every guest built from `examples/` and `host/tests/guests/` has a test of its own name in this file.
mod every_guest_is_tested {
    macro_rules! assert_tested {
        ($name:ident, $path:expr) => {
            #[allow(unused_imports)]
            use super::$name as _;
        };
    }
    ahp_guests::foreach_guest!(assert_tested);
}

/// Every live sandbox keeps the fiber stack of its last call, so the pool needs a stack per
/// sandbox slot: wasmtime's default of 1,000 stacks trapped the 1,001st live sandbox's calls
/// ("maximum concurrent limit of 1000 for fibers reached") whatever the pool's size.
#[test]
fn more_sandboxes_stay_live_than_wasmtime_s_default_stack_pool() {
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
fn sandboxes_of_transfers_no_longer_active_are_swept() {
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

/// The owner's conversation with the agent of `transfer` (an operator-created transfer: the
/// operator owns its agent), and the caller that owns it.
fn conversation_with(h: &Host, transfer: &str) -> (String, String, ahp_host::store::conversation::Caller) {
    use ahp_host::store::conversation::{Caller, NewConversation, OPERATOR_SUBJECT};
    let caller = Caller::full(OPERATOR_SUBJECT).unwrap();
    let agent = h
        .db()
        .transfer(transfer)
        .unwrap()
        .agent_id
        .expect("bound at activation");
    let cv = h
        .db()
        .create_conversation(
            &caller,
            &NewConversation {
                title: "questions".into(),
                agents: vec![agent.clone()],
            },
            &format!("cv-{transfer}"),
        )
        .unwrap()
        .value;
    (agent, cv.id, caller)
}

fn spent(h: &Host, transfer: &str) -> u64 {
    h.db().budget(transfer).unwrap().unwrap().spent_micro_usd
}

#[test]
fn turn_prober() {
    use ahp_host::store::conversation::Author;
    let h = host();
    let agents = h.host.agents();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "turn-prober");
    let report = h.activate(&id);
    assert_eq!(report.outcome, RunOutcome::Returned);
    let agent = report.transfer.agent_id.clone().expect("activate returns the agentId");
    let carrier = agents.carrier(&agent).expect("this host carries the agent");
    let endpoint = h
        .host
        .store()
        .locked()
        .get_endpoint(&carrier.caller, &agent, &carrier.actor.endpoint)
        .unwrap();
    assert!(ahp_host::carrier::Carriers::holds(agents.as_ref(), &endpoint));
    let (_, cv, caller) = conversation_with(&h, &id);

    // A reply, authored by the agent, answering the message; the turn's fuel is charged.
    let before = spent(&h, &id);
    let question = post(&h.host, &caller, &cv, "echo hello", "p1");
    let drive = agents.drive(&agent).unwrap();
    assert_eq!(drive.consumed, 1, "{drive:?}");
    assert!(drive.fuel_consumed > 0);
    let t = transcript(&h.host, &caller, &cv);
    assert_eq!(t.len(), 2);
    assert_eq!(t[1].body, "echo: echo hello");
    assert_eq!(t[1].reply_to.as_deref(), Some(question.as_str()));
    assert!(matches!(&t[1].author, Author::Agent { agent_id, .. } if *agent_id == agent));
    let compute = Tier::Nano.limits().compute_cost_micro_usd(drive.fuel_consumed);
    assert!(spent(&h, &id) + 1 >= before + compute, "the turn's compute is charged");
    // Nothing pending: another opportunity runs no turn.
    assert_eq!(agents.drive(&agent).unwrap(), Default::default());

    // A burst of 50 posts: one wake, a bounded number of turns, every message answered once.
    for i in 0..50 {
        post(&h.host, &caller, &cv, &format!("echo {i}"), &format!("burst-{i}"));
    }
    let drive = agents.drive(&agent).unwrap();
    assert_eq!(drive.consumed, 1, "the burst coalesced into one wake: {drive:?}");
    let t = transcript(&h.host, &caller, &cv);
    let replies: Vec<_> = t.iter().filter(|m| m.body.starts_with("echo: echo ")).collect();
    assert_eq!(replies.len(), 51);
    let mut answered: Vec<_> = replies.iter().filter_map(|m| m.reply_to.clone()).collect();
    answered.sort();
    answered.dedup();
    assert_eq!(answered.len(), 51, "each message answered exactly once");

    // The prober acts on its first queued message, which a failed turn leaves queued: consume
    // it as the agent, so the next mode is read.
    let handled = |msg: &str| {
        h.db().consume_delivery(&carrier.caller, &carrier.actor, msg).unwrap();
    };
    // Flooding replies stops at the per-wake bound.
    let flood = post(&h.host, &caller, &cv, "flood", "flood");
    let drive = agents.drive(&agent).unwrap();
    assert_eq!(drive.unknown, 1, "flood returns an error: {drive:?}");
    let floods = transcript(&h.host, &caller, &cv)
        .iter()
        .filter(|m| m.body.starts_with("flood "))
        .count();
    assert_eq!(floods, 64, "a wake's replies stop at its bound");
    assert_eq!(h.db().transfer(&id).unwrap().status, TransferStatus::Active);
    handled(&flood);

    // A turn that fails keeps its sandbox and transfer; the wake is delivery_unknown.
    let fail = post(&h.host, &caller, &cv, "fail", "fail");
    let drive = agents.drive(&agent).unwrap();
    assert_eq!(drive.unknown, 1);
    assert_eq!(h.db().transfer(&id).unwrap().status, TransferStatus::Active);
    assert_eq!(h.sandboxes.live_count(), 1, "the sandbox lives on");
    handled(&fail);

    // A turn that spins is stopped by a ceiling, and its transfer ends with its sandbox.
    post(&h.host, &caller, &cv, "spin", "spin");
    let started = std::time::Instant::now();
    let drive = agents.drive(&agent).unwrap();
    assert!(
        started.elapsed() <= wall_clock_bound(Tier::Nano),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(drive.unknown, 1);
    let t = h.db().transfer(&id).unwrap();
    assert_eq!(t.status, TransferStatus::Terminated);
    assert!(agents.carrier(&agent).is_none(), "the carrier is released");
    assert_eq!(h.sandboxes.live_count(), 0);
    assert!(!h.events(&id, EventKind::CeilingExceeded).is_empty());
}

#[test]
fn a_reply_past_the_body_bound_is_refused() {
    let h = host();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "turn-prober");
    let agent = h.activate(&id).transfer.agent_id.unwrap();
    let (_, cv, caller) = conversation_with(&h, &id);
    post(&h.host, &caller, &cv, "big", "big");
    assert_eq!(h.host.agents().drive(&agent).unwrap().unknown, 1);
    assert_eq!(transcript(&h.host, &caller, &cv).len(), 1, "nothing was posted");
}

#[test]
fn an_insolvent_transfer_gets_no_more_turns() {
    let h = host();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "turn-prober");
    let agent = h.activate(&id).transfer.agent_id.unwrap();
    let (_, cv, caller) = conversation_with(&h, &id);
    let left = 1_000_000 - spent(&h, &id);
    h.db().report_usage(&id, left, "model_tokens").unwrap();
    assert_eq!(h.db().transfer(&id).unwrap().status, TransferStatus::Insolvent);
    post(&h.host, &caller, &cv, "echo late", "late");
    assert_eq!(h.host.agents().drive(&agent).unwrap(), Default::default());
    assert_eq!(
        transcript(&h.host, &caller, &cv).len(),
        1,
        "no reply from an insolvent agent"
    );
    assert!(h.host.agents().carrier(&agent).is_none());
}

#[test]
fn assistant() {
    // With no model in the host's policy the assistant cannot think: its model call fails with
    // the gateway's `unknown-model`, its answering loop leaves the message queued for one more
    // try (counted), and the turn ends well.
    let h = host();
    let id = h.pushed(&snapshot(2, json!({})), Tier::Nano, 1_000_000, "assistant");
    let report = h.activate(&id);
    assert_eq!(report.outcome, RunOutcome::Returned);
    let agent = report.transfer.agent_id.expect("bound at activation");
    let (_, cv, caller) = conversation_with(&h, &id);
    post(&h.host, &caller, &cv, "what is in stock?", "assistant-1");
    let drive = h.host.agents().drive(&agent).unwrap();
    assert_eq!((drive.consumed, drive.unknown), (1, 0), "{drive:?}");
    assert_eq!(transcript(&h.host, &caller, &cv).len(), 1, "no answer without a model");
    let waiting = h.db().queued_deliveries(&caller, &agent, 0, 10).unwrap();
    assert_eq!(waiting.iter().map(|d| d.tries).collect::<Vec<_>>(), [1], "tried once");
    assert_eq!(h.db().transfer(&id).unwrap().status, TransferStatus::Active);
}

#[test]
fn turns_v0_2() {
    let h = host();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "turns-v0-2");
    let report = h.activate(&id);
    assert_eq!(
        report.outcome,
        RunOutcome::Returned,
        "a 0.2.0 component still activates"
    );
    let agent = report.transfer.agent_id.expect("bound at activation");
    let (_, cv, caller) = conversation_with(&h, &id);
    for (i, body) in ["hello old friend", "and again"].into_iter().enumerate() {
        post(&h.host, &caller, &cv, body, &format!("v02-{i}"));
        assert_eq!(h.host.agents().drive(&agent).unwrap().consumed, 1, "and takes turns");
        let t = transcript(&h.host, &caller, &cv);
        assert_eq!(t.last().unwrap().body, format!("0.2.0 heard: {body}"));
    }
}

#[test]
fn legacy_agent() {
    let h = host();
    let id = h.pushed(&snapshot(3, json!({})), Tier::Nano, 1_000_000, "legacy-agent");
    let report = h.activate(&id);
    assert_eq!(
        report.outcome,
        RunOutcome::Returned,
        "a 0.1.0 component still activates"
    );
    assert_eq!(report.transfer.status, TransferStatus::Active);
    assert!(
        h.sandboxes
            .guest_log(&id)
            .unwrap()
            .contains("legacy agent resumed after 3 messages")
    );
    let agent = report.transfer.agent_id.expect("bound like any other");
    assert!(
        h.host.agents().carrier(&agent).is_none(),
        "but no carrier: it takes no turns"
    );
    assert!(h.db().load_checkpoint(&id).unwrap().is_some());
}

/// `aliasing-caller` is tested with 16 MiB strings, and the host's memory measured, in
/// `turns.rs` (`aliasing::*`); here, small aliased lists one past their bounds: nine wait
/// sources, and two copies of 3 MB of text (6 MB, over the 4 MiB a request may hold).
#[test]
fn aliasing_caller() {
    let h = host();
    let agents = h.host.agents();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "aliasing-caller");
    assert_eq!(h.activate(&id).outcome, RunOutcome::Returned);
    let (agent, cv, caller) = conversation_with(&h, &id);
    for (i, (body, want)) in [
        (
            "alias register-wait 9 100",
            "register-wait x9: refused Invalid(\"sources: must name 1 to 8 tasks\")",
        ),
        (
            "alias estimate 2 3000000",
            "estimate x2: refused TooLarge(\"over 4194304 bytes of text in all\")",
        ),
        ("hello", "echo: hello"),
    ]
    .into_iter()
    .enumerate()
    {
        post(&h.host, &caller, &cv, body, &format!("ac{i}"));
        assert_eq!(agents.drive(&agent).unwrap().consumed, 1);
        let t = transcript(&h.host, &caller, &cv);
        assert_eq!(t.last().unwrap().body, want);
    }
}

/// `tool-prober` is tested against real MCP servers in `mcp_tools.rs`; here, under this file's
/// policy (which allows only `https://inventory.example.com`, unreachable from here), a server
/// that fails is left out of the list and a call names no tool.
#[test]
fn tool_prober() {
    let h = host();
    let agents = h.host.agents();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1_000_000, "tool-prober");
    assert_eq!(h.activate(&id).outcome, RunOutcome::Returned);
    let (agent, cv, caller) = conversation_with(&h, &id);
    post(&h.host, &caller, &cv, "call inventory {}", "tp1");
    assert_eq!(agents.drive(&agent).unwrap().consumed, 1);
    let t = transcript(&h.host, &caller, &cv);
    assert!(t[1].body.starts_with("error unknown-tool: "), "{}", t[1].body);
}
