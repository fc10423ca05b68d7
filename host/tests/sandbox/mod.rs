//! The destination sandbox, end to end: real guest components (built by `build.rs` from
//! `examples/` and `host/tests/guests/`) activated against a real store, each hostile guest
//! stopped by the right ceiling with its audit event, and the host serving the next sandbox
//! fine afterwards. One module per concept; here, the test host they share and the check that
//! every guest built has a test of its own name.

mod activation;
mod ceilings;
mod credentials;
mod delegation;
mod egress;
mod hoarding;
mod live;
mod metering;
mod stress;
mod turns;

#[allow(unused_imports)]
use self::{
    activation::*, ceilings::*, credentials::*, delegation::*, egress::*, hoarding::*, live::*, metering::*, stress::*,
    turns::*,
};

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

/// `model-prober` drives the model gateway's own suite, `model_gateway.rs` (its test
/// `model_prober` is there).
mod model_prober {}

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
