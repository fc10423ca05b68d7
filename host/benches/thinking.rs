//! Agents that think at once: `examples/assistant` agents whose model takes its time, as real
//! agents' models do (the echo guests of `agents.rs` answer in a quarter of a millisecond).
//!
//! - `thinking/all_at_once` (printed): N assistants (default 1,000, `AHP_THINKING_N`), one
//!   message each posted at once, every model call answered by a local OpenAI-protocol
//!   provider after 2 s (`AHP_THINKING_MS`). Time from the first post until every reply is
//!   committed, beside the ideal (the model's delay) in the same run; the most calls the
//!   provider had in flight at once; the host's RSS then. Target: all answered within 5 s,
//!   ≥ 900 calls in flight.
//! - `thinking/four_at_a_time` (printed): the baseline, 64 assistants (`AHP_THINKING_BASELINE_N`)
//!   on the same host allowed four turns at once, what its four blocking workers allowed before
//!   turns were tasks.
//! - `thinking/parked` (printed): the same for N' assistants parked before the posts
//!   (`AHP_THINKING_PARKED_N`, default 0 = skipped): each turn instantiates its sandbox anew.
//! - `thinking/quick_beside_slow` (printed): N agents of one owner wait in 60 s model calls;
//!   then one agent of another owner, and one of the same owner, whose model answers at once
//!   is sent a message: the time to each one's reply. Target: ≤ 1 s.
//!
//! The host's database is a `StorePool` on a file, as `ahp serve` opens it; the controller
//! runs on a two-worker runtime of its own, the provider on another. Run:
//! `cargo bench -p ahp-host --bench thinking`.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_host::agents::{Agents, AgentsConfig};
use ahp_host::gateway::scripted::{Behaviour, ScriptedProvider};
use ahp_host::host::{Host, HostBuilder};
use ahp_host::shared_store::StoreLock;
use ahp_host::store::conversation::{Acting, Caller, IdempotencyKey, NewConversation, NewMessage};
use ahp_host::store::{
    DEFAULT_POOL_CONNECTIONS, StorePool, Tier, TokenKey, TokenScope, TransferOwner, issue_transfer_token,
};
use ahp_host::testing;
use serde_json::json;

const MODEL_KEY: &str = "sk-thinking-bench";

/// A slow question: its model call takes the long delay; a quick one answers at once.
const SLOW: &str = "think it over";
const QUICK: &str = "quick";

struct Bench {
    dir: tempfile::TempDir,
    key: TokenKey,
    host: Host,
    provider: ScriptedProvider,
    _provider_runtime: tokio::runtime::Runtime,
    runtime: tokio::runtime::Runtime,
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A host for `slots` live assistants whose model is the local provider, slow questions
/// answered after `delay`, running at most `running_turns` turns at once (`None`: the default).
fn bench(slots: u32, delay: Duration, running_turns: Option<usize>) -> Bench {
    let (provider_runtime, provider) = ScriptedProvider::start_on_own_runtime().unwrap();
    provider.set_responder(Arc::new(move |r| {
        let slow = r.texts().iter().any(|t| t.contains(SLOW));
        let answer = Behaviour::text("considered");
        if slow { answer.after(delay) } else { answer }
    }));
    let dir = tempfile::tempdir().unwrap();
    let vault_dir = dir.path().join("vault");
    let vault = ahp_host::vault::DirVault::open(&vault_dir).unwrap();
    std::fs::write(vault_dir.join("model-key"), MODEL_KEY).unwrap();
    let policy = testing::policy_with_model(&provider.openai_endpoint(), "model-key");
    let key = TokenKey::random();
    let pool = StorePool::open(dir.path().join("ahp.db"), DEFAULT_POOL_CONNECTIONS, |s| {
        Ok(s.with_token_key(key.clone()))
    })
    .unwrap();
    let host = HostBuilder::new(pool, dir.path())
        .policy(policy)
        .vault(Arc::new(vault))
        .agents(AgentsConfig {
            running_turns,
            ..AgentsConfig::default()
        })
        .engine(|e| {
            e.max_live_sandboxes = slots;
            e.max_memory_bytes = Tier::Small.limits().memory_bytes;
        })
        .build()
        .unwrap();
    host.sandboxes()
        .register_component(ahp_host::guests::ASSISTANT_WASM, Some("assistant"))
        .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    Bench {
        dir,
        key,
        host,
        provider,
        _provider_runtime: provider_runtime,
        runtime,
    }
}

impl Bench {
    /// An active assistant owned by `owner`; returns its agent.
    fn activate(&self, owner: &TransferOwner) -> String {
        let snap = testing::snapshot(0, json!({}));
        let t = {
            let mut db = self.host.store().locked();
            let id = db.snapshot_state_as(&snap, owner).unwrap().id;
            let token = issue_transfer_token(
                &self.key,
                &id,
                TokenScope::ProvisionRuntime,
                db.now(),
                ahp_host::store::DEFAULT_TOKEN_TTL,
            )
            .unwrap();
            db.provision_runtime(&id, Tier::Small, 1_000_000, "assistant", &token)
                .unwrap();
            db.push_state(&id, None).unwrap();
            id
        };
        let tok = testing::activate_token(&self.host.store().locked(), &self.key, &t).unwrap();
        self.host.activate(&t, &tok).unwrap().transfer.agent_id.unwrap()
    }

    /// A conversation `owner` starts with `agents`; returns it and the owner as a caller.
    fn conversation(&self, owner: &TransferOwner, agents: Vec<String>, title: &str) -> (String, Caller) {
        let caller = Caller::full(&owner.subject()).unwrap();
        let new = NewConversation {
            title: title.into(),
            agents,
        };
        let cv = self
            .host
            .store()
            .locked()
            .create_conversation(&caller, &new, &format!("cv-{title}"))
            .unwrap()
            .value
            .id;
        (cv, caller)
    }

    /// An active assistant owned by `owner`, in a conversation of its own the owner started.
    fn assistant(&self, owner: &TransferOwner, title: &str) -> (String, Caller) {
        let agent = self.activate(owner);
        self.conversation(owner, vec![agent], title)
    }

    fn post(&self, agents: &Agents, (cv, caller): &(String, Caller), body: &str) {
        let new = NewMessage {
            conversation: cv.to_owned(),
            acting: Acting::Human,
            body: body.to_owned(),
            reply_to: None,
            idempotency: IdempotencyKey::Key(format!("{cv}-{}", body.len())),
        };
        ahp_host::ops::posting::post(&mut self.host.store().locked(), agents, caller, &new).unwrap();
    }

    /// Waits until `cv` (or, with `None`, every conversation) has `n` agent replies; returns
    /// when, and the highest RSS seen meanwhile.
    fn replies(&self, cv: Option<&str>, n: i64, started: Instant, limit: Duration) -> (Duration, u64) {
        let mut rss = 0;
        loop {
            rss = rss.max(common::rss_kib("VmRSS:"));
            let done = count_replies(self.dir.path(), cv);
            if done >= n {
                return (started.elapsed(), rss);
            }
            assert!(started.elapsed() < limit, "{done}/{n} replied after {limit:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn count_replies(dir: &Path, cv: Option<&str>) -> i64 {
    let db = rusqlite::Connection::open(dir.join("ahp.db")).unwrap();
    db.query_row(
        "SELECT count(*) FROM messages WHERE author_kind = 'agent' AND (?1 IS NULL OR conversation_id = ?1)",
        [cv],
        |r| r.get(0),
    )
    .unwrap()
}

/// The owner of the `i`th agent of a bench: a thousand agents an owner (an owner may have 1,000
/// open conversations), the operator first.
fn owner(i: usize) -> TransferOwner {
    match i / 1000 {
        0 => TransferOwner::Operator,
        k => TransferOwner::ApiKey(format!("prn_{k:024x}")),
    }
}

/// `n` assistants (parked first with `park`), one slow message each at once, at most
/// `running_turns` turns at once (`None`: the default, every agent's).
fn all_at_once(name: &str, n: usize, delay: Duration, park: bool, running_turns: Option<usize>) {
    // One owner's turns hold at most three quarters of the places (`agents::admission`).
    let b = bench((n as u32).div_ceil(3) * 4 + 16, delay, running_turns);
    let conversations: Vec<(String, Caller)> = (0..n).map(|i| b.assistant(&owner(i), &format!("a{i}"))).collect();
    if park {
        let parked = b
            .host
            .sandboxes()
            .park_idle(Instant::now() + Duration::from_secs(86_400));
        assert_eq!(parked.len(), n);
    }
    let rss_before = common::rss_kib("VmRSS:");
    let agents = b.host.agents().clone();
    let workers = b.runtime.spawn(agents.clone().run_workers());
    let started = Instant::now();
    for cv in &conversations {
        b.post(&agents, cv, SLOW);
    }
    let posted = started.elapsed();
    let (replied, rss) = b.replies(None, n as i64, started, Duration::from_secs(900));
    workers.abort();
    let (places, _) = agents.running_turns();
    println!(
        "{name}: {n} assistants, each model call {delay:?} (the ideal), {places} turn places: all replied \
         {replied:?} after the first post, {:?} after the last (posting from one thread took {posted:?}); \
         provider's peak calls in flight {}; host RSS {} MiB → {} MiB while thinking, peak {} MiB",
        replied - posted,
        b.provider.peak_in_flight(),
        rss_before / 1024,
        rss / 1024,
        common::rss_kib("VmHWM:") / 1024
    );
}

/// `n` agents of one owner in 60 s model calls; then the quick agents of another owner and of
/// the same one.
fn quick_beside_slow(n: usize) {
    let b = bench(n as u32 * 2 + 16, Duration::from_secs(60), None);
    let greedy = TransferOwner::Operator;
    let other = TransferOwner::ApiKey("prn_0123456789abcdef01234567".into());
    // Two slow agents a conversation: an owner may have 1,000 open conversations.
    let slow: Vec<(String, Caller)> = (0..n.div_ceil(2))
        .map(|i| {
            let pair = vec![b.activate(&greedy), b.activate(&greedy)];
            b.conversation(&greedy, pair, &format!("s{i}"))
        })
        .collect();
    let n = slow.len() * 2;
    let quick_other = b.assistant(&other, "quick-other");
    let quick_same = b.assistant(&greedy, "quick-same");
    let agents = b.host.agents().clone();
    let workers = b.runtime.spawn(agents.clone().run_workers());
    for cv in &slow {
        b.post(&agents, cv, SLOW);
    }
    // Every slow call is with the provider before the quick ones are asked.
    let waited = Instant::now();
    while b.provider.peak_in_flight() < n && waited.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let in_flight = b.provider.peak_in_flight();
    let (total, running) = agents.running_turns();
    let mut line = format!(
        "thinking/quick_beside_slow: {n} agents of one owner in 60 s model calls ({in_flight} in flight, \
         {running} of {total} turn places held)"
    );
    for (label, cv) in [("another owner's", &quick_other), ("the same owner's", &quick_same)] {
        let started = Instant::now();
        b.post(&agents, cv, QUICK);
        let (replied, _) = b.replies(Some(&cv.0), 1, started, Duration::from_secs(120));
        line.push_str(&format!("; {label} quick agent replied in {replied:?}"));
    }
    workers.abort();
    println!("{line}");
}

fn main() {
    let n = env_usize("AHP_THINKING_N", 1000);
    let delay = Duration::from_millis(env_usize("AHP_THINKING_MS", 2000) as u64);
    // The baseline: four turns at once, as the four blocking workers allowed (five places, of
    // which one owner may hold four).
    let baseline = env_usize("AHP_THINKING_BASELINE_N", 64);
    if baseline > 0 {
        all_at_once("thinking/four_at_a_time", baseline, delay, false, Some(5));
    }
    all_at_once("thinking/all_at_once", n, delay, false, None);
    let parked = env_usize("AHP_THINKING_PARKED_N", 0);
    if parked > 0 {
        all_at_once("thinking/parked", parked, delay, true, None);
    }
    quick_beside_slow(n);
}
