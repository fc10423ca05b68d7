//! The model gateway through the real host: `host/tests/guests/model-prober` calls `ahp:agent/model`
//! against the scripted local provider (`ahp_host::gateway::scripted`), which speaks OpenAI Chat
//! Completions and Anthropic Messages faithfully.
//!
//! - `exact`: a tool loop over OpenAI and an Anthropic call with cache fields, each charged
//!   exactly from its usage at the policy's prices; what the provider saw; the key never in the
//!   guest;
//! - `budget`: a call the budget cannot pay is refused before the provider sees it; a response
//!   without usage is charged its reservation; a run that exhausts the budget never passes it;
//! - `hostile`: a hanging provider is a typed error before the turn's wall clock and the agent
//!   answers the next message; a 100 MB flood is cut at the bound with the host's memory inside
//!   its bound; the model's origin is refused to the guest's own `wasi:http`;
//! - `bounds`: calls per turn at the limit and one past; `model_tokens` is the host's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_host::gateway::scripted::{Behaviour, ScriptedPart, ScriptedProvider};
use ahp_host::host::HostBuilder;
use ahp_host::interfaces::model::MAX_COMPLETIONS_PER_TURN;
use ahp_host::policy::Policy;
use ahp_host::sandbox::{CeilingCap, RunOutcome, Sandboxes};
use ahp_host::shared_store::StoreLock;
use ahp_host::store::conversation::{Acting, Caller, IdempotencyKey, NewConversation, NewMessage, OPERATOR_SUBJECT};
use ahp_host::store::{EventKind, ModelUsage, Store, Tier, TokenKey, TransferStatus};
use ahp_host::testing::{self, snapshot};
use serde_json::{Value, json};

const MODEL_KEY: &str = "sk-model-test-123";

struct Host {
    _dir: tempfile::TempDir,
    key: TokenKey,
    host: ahp_host::host::Host,
    sandboxes: Arc<Sandboxes>,
    operator: Caller,
    provider: ScriptedProvider,
    runtime: tokio::runtime::Runtime,
}

/// The policy's two models on `provider`: `default` (OpenAI) and `claude` (Anthropic), with
/// `prices` (input, output, cache read, cache write), and the snapshot's inventory server.
fn policy(provider: &ScriptedProvider, prices: [u64; 4]) -> Policy {
    let [input, output, cache_read, cache_write] = prices;
    let price = json!({ "input": input, "output": output, "cacheRead": cache_read, "cacheWrite": cache_write });
    let mut p = testing::policy();
    p.models = serde_json::from_value(json!([
        { "id": "default", "provider": "openai", "endpoint": provider.openai_endpoint(),
          "providerModel": "gpt-4.1-mini", "credential": { "credRef": "model-key" },
          "contextTokens": 128000, "maxOutputTokens": 4096, "priceMicroUsdPerMTok": price },
        { "id": "claude", "provider": "anthropic", "endpoint": provider.anthropic_endpoint(),
          "providerModel": "claude-sonnet-4-5", "credential": { "credRef": "model-key" },
          "contextTokens": 200000, "maxOutputTokens": 8192, "priceMicroUsdPerMTok": price },
    ]))
    .unwrap();
    p
}

const PRICES: [u64; 4] = [400_000, 1_600_000, 100_000, 500_000];

fn host_with(cap: CeilingCap, prices: [u64; 4]) -> Host {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let provider = runtime.block_on(ScriptedProvider::start()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = TokenKey::random();
    let db = Store::open_in_memory().unwrap().with_token_key(key.clone());
    let vault_dir = dir.path().join("vault");
    let vault = ahp_host::vault::DirVault::open(&vault_dir).unwrap();
    std::fs::write(vault_dir.join("model-key"), format!("{MODEL_KEY}\n")).unwrap();
    let policy = policy(&provider, prices);
    policy.validate().unwrap();
    let host = HostBuilder::new(db, PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sandbox-cache"))
        .cap(cap)
        .policy(policy)
        .vault(Arc::new(vault))
        .build()
        .unwrap();
    let sandboxes = host.sandboxes().clone();
    for (name, path) in ahp_guests::ALL {
        sandboxes.register_component_file(path, Some(name)).unwrap();
    }
    Host {
        _dir: dir,
        key,
        host,
        sandboxes,
        operator: Caller::full(OPERATOR_SUBJECT).unwrap(),
        provider,
        runtime,
    }
}

fn host() -> Host {
    host_with(CeilingCap::default(), PRICES)
}

struct Agent {
    transfer: String,
    agent: String,
    conversation: String,
}

impl Host {
    /// An activated model-prober with `budget` micro-USD, its agent and a conversation with it.
    fn prober(&self, budget: u64) -> Agent {
        let id = testing::pushed(
            &mut self.host.store().locked(),
            &self.key,
            &snapshot(2, json!({})),
            Tier::Small,
            budget,
            "model-prober",
        )
        .unwrap();
        let tok = testing::activate_token(&self.host.store().locked(), &self.key, &id).unwrap();
        let report = self.host.activate(&id, &tok).unwrap();
        assert_eq!(report.outcome, RunOutcome::Returned);
        let agent = report.transfer.agent_id.unwrap();
        let new = NewConversation {
            title: "model".into(),
            agents: vec![agent.clone()],
        };
        let conversation = self
            .host
            .store()
            .locked()
            .create_conversation(&self.operator, &new, &format!("cv-{id}"))
            .unwrap()
            .value
            .id;
        Agent {
            transfer: id,
            agent,
            conversation,
        }
    }

    /// Posts `body` to the agent, runs its turn, and returns its reply.
    fn ask(&self, a: &Agent, body: &str) -> String {
        let new = NewMessage {
            conversation: a.conversation.clone(),
            acting: Acting::Human,
            body: body.to_owned(),
            reply_to: None,
            idempotency: IdempotencyKey::Key(format!("{}-{}", body.len(), ahp_host::store::id::new_id("k_"))),
        };
        let question = self
            .host
            .store()
            .locked()
            .post_message(&self.operator, &new)
            .unwrap()
            .value
            .id;
        let drive = self.host.agents().drive(&a.agent).unwrap();
        assert_eq!(drive.consumed, 1, "{body}: {drive:?}");
        self.host
            .store()
            .locked()
            .read_transcript(&self.operator, &Acting::Human, &a.conversation, 0, 200)
            .unwrap()
            .into_iter()
            .find(|m| m.reply_to.as_deref() == Some(&question))
            .map(|m| m.body)
            .expect("a reply")
    }

    fn events(&self, transfer: &str, kind: EventKind) -> Vec<Value> {
        let status = self.host.store().locked().get_status(transfer).unwrap();
        status
            .events
            .into_iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.detail)
            .collect()
    }

    fn budget(&self, transfer: &str) -> ahp_host::store::Budget {
        self.host.store().locked().budget(transfer).unwrap().unwrap()
    }

    fn status(&self, transfer: &str) -> TransferStatus {
        self.host.store().locked().get_status(transfer).unwrap().transfer.status
    }
}

/// `ceil(Σ tokens × price / 1e6)` at [`PRICES`].
fn cost(u: ModelUsage) -> u64 {
    let [i, o, r, w] = PRICES;
    (u.input_tokens * i + u.output_tokens * o + u.cache_read_tokens * r + u.cache_write_tokens * w).div_ceil(1_000_000)
}

fn usage(input: u64, cache_read: u64, cache_write: u64, output: u64) -> ModelUsage {
    ModelUsage {
        input_tokens: input,
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
        output_tokens: output,
    }
}

/// The number after `word` in `line`.
fn number_after(line: &str, word: &str) -> u64 {
    let rest = line
        .split(word)
        .nth(1)
        .unwrap_or_else(|| panic!("{word:?} in {line:?}"));
    rest.trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    kb * 1024
}

#[test]
fn model_prober() {
    let h = host();
    let a = h.prober(1_000_000);
    assert_eq!(h.ask(&a, "models"), "default,claude");
    assert!(h.ask(&a, "ask absent hi").starts_with("error unknown-model"));
    assert_eq!(h.provider.request_count(), 0);
}

mod exact {
    use super::*;

    #[test]
    fn an_openai_tool_loop_is_charged_exactly_and_the_provider_sees_the_whole_session() {
        let h = host();
        let a = h.prober(1_000_000);
        let first = usage(1_200, 800, 0, 30);
        let second = usage(400, 1_600, 0, 12);
        h.provider.push(Behaviour::Answer {
            parts: vec![ScriptedPart::ToolCall {
                name: "inventory".into(),
                arguments: json!({ "sku": "A-1" }),
            }],
            usage: first,
        });
        h.provider.push(Behaviour::Answer {
            parts: vec![ScriptedPart::Text("41 units in stock.".into())],
            usage: second,
        });
        let before = h.budget(&a.transfer).spent_micro_usd;
        let reply = h.ask(&a, "tool default How many A-1?");
        assert!(reply.starts_with("answer 41 units in stock. | "), "{reply}");
        assert_eq!(number_after(&reply, "charged"), cost(second));
        assert!(reply.ends_with("usage 400 1600 0 12"), "{reply}");

        let seen = h.provider.received();
        assert_eq!(seen.len(), 2);
        for r in &seen {
            assert_eq!(r.authorization.as_deref(), Some(&*format!("Bearer {MODEL_KEY}")));
            assert_eq!(r.body["model"], "gpt-4.1-mini");
        }
        let texts = seen[0].texts();
        assert_eq!(
            texts,
            ["You forecast inventory.", "message 0", "message 1", "How many A-1?"]
        );
        assert_eq!(seen[0].body["tools"][0]["function"]["name"], "inventory");
        let m = seen[1].body["messages"].as_array().unwrap();
        assert_eq!(m[m.len() - 2]["tool_calls"][0]["function"]["name"], "inventory");
        assert_eq!(
            m[m.len() - 1],
            json!({ "role": "tool", "tool_call_id": "call_0", "content": "41 units" })
        );

        let called = h.events(&a.transfer, EventKind::ModelCalled);
        assert_eq!(called.len(), 2);
        let charged: Vec<u64> = called.iter().map(|c| c["chargedMicroUsd"].as_u64().unwrap()).collect();
        assert_eq!(charged, [cost(first), cost(second)]);
        assert_eq!(called[0]["cacheReadTokens"], 800);
        assert!(
            called
                .iter()
                .all(|c| c["reservedMicroUsd"].as_u64() > c["chargedMicroUsd"].as_u64())
        );
        assert!(called.iter().all(|c| !c.to_string().contains("A-1")), "never the text");
        let model_spend: u64 = h
            .events(&a.transfer, EventKind::UsageReported)
            .iter()
            .filter(|u| u["kind"] == "model_tokens")
            .map(|u| u["amountMicroUsd"].as_u64().unwrap())
            .sum();
        assert_eq!(model_spend, cost(first) + cost(second));
        let b = h.budget(&a.transfer);
        assert_eq!(b.reserved_micro_usd, 0, "every reservation released");
        assert!(b.spent_micro_usd >= before + model_spend);
        let calls = h.host.store().locked().model_calls(&a.transfer, 10).unwrap();
        assert_eq!(calls.len(), 2);
        assert!(calls.iter().all(|c| c.outcome.as_deref() == Some("completed")));
        // The key never entered the sandbox.
        assert!(
            !h.sandboxes
                .guest_log(&a.transfer)
                .unwrap_or_default()
                .contains(MODEL_KEY)
        );
        assert!(!reply.contains(MODEL_KEY));
    }

    #[test]
    fn anthropic_cache_reads_and_writes_are_charged_at_their_prices() {
        let h = host();
        let a = h.prober(1_000_000);
        let u = usage(50, 3_000, 1_000, 80);
        h.provider.push(Behaviour::Answer {
            parts: vec![ScriptedPart::Text("Hello.".into())],
            usage: u,
        });
        let reply = h.ask(&a, "ask claude Hi there");
        // 50 × 0.4 + 3,000 × 0.1 + 1,000 × 0.5 + 80 × 1.6 = 20 + 300 + 500 + 128 = 948.
        assert_eq!(cost(u), 948);
        assert_eq!(reply, "answer Hello. | charged 948 | usage 50 3000 1000 80");
        let r = &h.provider.received()[0];
        assert_eq!(r.api_key.as_deref(), Some(MODEL_KEY));
        assert_eq!(r.authorization, None);
        assert_eq!(r.anthropic_version.as_deref(), Some("2023-06-01"));
        assert_eq!(r.body["system"], "You forecast inventory.");
        assert_eq!(r.body["model"], "claude-sonnet-4-5");
        assert_eq!(r.texts().last().map(String::as_str), Some("Hi there"));
    }

    #[test]
    fn a_provider_echoing_the_key_in_its_error_does_not_hand_it_to_the_guest() {
        let h = host();
        let a = h.prober(1_000_000);
        h.provider.push(Behaviour::EchoCredential { status: 401 });
        let reply = h.ask(&a, "ask default hi");
        assert!(reply.starts_with("error provider-error charged 0: HTTP 401"), "{reply}");
        assert!(!reply.contains(MODEL_KEY), "{reply}");
        h.provider.push(Behaviour::RateLimited);
        assert!(h.ask(&a, "ask claude hi").starts_with("error rate-limited charged 0"));
        assert_eq!(h.budget(&a.transfer).reserved_micro_usd, 0);
    }
}

mod budget {
    use super::*;

    #[test]
    fn a_call_the_budget_cannot_pay_is_refused_before_the_provider_sees_it() {
        // The input bound alone (over 1,024 tokens at 1,000 USD per million) costs more than
        // the whole budget.
        let h = host_with(CeilingCap::default(), [1_000_000_000, 1_600_000, 100_000, 500_000]);
        let a = h.prober(1_000_000);
        let reply = h.ask(&a, "ask default hi");
        assert!(reply.starts_with("error insufficient-budget"), "{reply}");
        assert!(h.ask(&a, "estimate default").starts_with("error insufficient-budget"));
        assert_eq!(h.provider.request_count(), 0, "the provider never saw it");
        assert!(h.events(&a.transfer, EventKind::ModelCalled).is_empty());
        assert!(h.host.store().locked().model_calls(&a.transfer, 10).unwrap().is_empty());
    }

    #[test]
    fn a_response_without_usage_or_with_a_malformed_body_is_charged_its_reservation() {
        let h = host();
        let a = h.prober(1_000_000);
        let estimate = h.ask(&a, "estimate default");
        let reserve = number_after(&estimate, "reserve");
        h.provider.push(Behaviour::NoUsage);
        let reply = h.ask(&a, "ask default hi");
        assert!(reply.starts_with("error provider-error"), "{reply}");
        let charged = number_after(&reply, "charged");
        assert!(charged > 0 && charged.abs_diff(reserve) < 64, "{charged} vs {reserve}");
        h.provider.push(Behaviour::Malformed);
        let reply = h.ask(&a, "ask default hi");
        assert!(reply.starts_with("error provider-error"), "{reply}");
        assert!(number_after(&reply, "charged") > 0);
        let calls = h.host.store().locked().model_calls(&a.transfer, 10).unwrap();
        assert!(calls.iter().all(|c| c.outcome.as_deref() == Some("unknown")
            && c.charged_micro_usd == Some(c.reservation.reserved_micro_usd)));
    }

    #[test]
    fn a_run_that_exhausts_the_budget_never_passes_the_allocation() {
        let h = host();
        // The provider always bills the worst case it may: the whole output cap it was sent.
        h.provider.set_responder(Arc::new(|r| Behaviour::Answer {
            parts: vec![ScriptedPart::Text("more".into())],
            usage: usage(r.bytes as u64, 0, 0, r.body["max_tokens"].as_u64().unwrap()),
        }));
        let allocation = 30_000;
        let a = h.prober(allocation);
        let reply = h.ask(&a, "loop default 64");
        let calls: u64 = reply.split(' ').next().unwrap().parse().unwrap();
        assert!(calls >= 3, "{reply}");
        assert!(
            reply.ends_with("then insufficient-budget") || reply.ends_with("then insolvent"),
            "{reply}"
        );
        let b = h.budget(&a.transfer);
        assert!(b.spent_micro_usd <= allocation, "{b:?}");
        assert_eq!(b.reserved_micro_usd, 0);
        // The caps sent shrank to what the budget paid for.
        let caps: Vec<u64> = h
            .provider
            .received()
            .iter()
            .map(|r| r.body["max_tokens"].as_u64().unwrap())
            .collect();
        assert_eq!(caps[0], 4096);
        assert!(caps.last().unwrap() < &4096, "{caps:?}");
    }
}

mod hostile {
    use super::*;

    #[test]
    fn a_hanging_provider_is_a_typed_error_before_the_wall_clock_and_the_agent_answers_next() {
        let wall = Duration::from_secs(3);
        let h = host_with(
            CeilingCap {
                wall_clock_per_turn: Some(wall),
                ..CeilingCap::default()
            },
            PRICES,
        );
        let a = h.prober(1_000_000);
        h.provider.push(Behaviour::Hang);
        let started = Instant::now();
        let reply = h.ask(&a, "ask default hi");
        assert!(started.elapsed() < wall, "{:?}", started.elapsed());
        assert!(reply.starts_with("error unavailable charged"), "{reply}");
        assert!(number_after(&reply, "charged") > 0, "sent, no usage: the reservation");
        assert_eq!(h.status(&a.transfer), TransferStatus::Active);
        assert_eq!(h.budget(&a.transfer).reserved_micro_usd, 0);
        h.provider.push(Behaviour::text("back"));
        assert!(h.ask(&a, "ask default again").starts_with("answer back"));
        // A trickle ends the same way.
        h.provider.push(Behaviour::Trickle {
            every: Duration::from_millis(200),
        });
        assert!(h.ask(&a, "ask default hi").starts_with("error unavailable"));
    }

    #[test]
    fn a_flood_is_cut_at_the_bound_and_the_host_stays_inside_its_memory_bound() {
        let h = host();
        let a = h.prober(1_000_000);
        let before = rss_bytes();
        h.provider.push(Behaviour::Flood { bytes: 100 << 20 });
        let reply = h.ask(&a, "ask default hi");
        let growth = rss_bytes().saturating_sub(before);
        assert!(reply.starts_with("error provider-error"), "{reply}");
        assert!(reply.contains("larger than 8388608 bytes"), "{reply}");
        assert!(number_after(&reply, "charged") > 0);
        // The bound: the response bound (8 MiB) and the allocator's slack, far below 100 MB.
        assert!(growth < 40 << 20, "RSS grew {} MiB", growth >> 20);
        h.provider.push(Behaviour::text("still here"));
        assert!(h.ask(&a, "ask default again").starts_with("answer still here"));
        assert_eq!(h.status(&a.transfer), TransferStatus::Active);
    }

    #[test]
    fn a_guest_cannot_reach_a_model_endpoints_origin_through_wasi_http() {
        let h = host();
        let other = h.runtime.block_on(ScriptedProvider::start()).unwrap();
        // The operator's policy lists the model's origin as a server too (built in code, so never
        // validated, which would refuse it), and loopback is reachable.
        let mut policy = policy(&h.provider, PRICES);
        policy
            .servers
            .push(serde_json::from_value(json!({ "server": h.provider.openai_endpoint() })).unwrap());
        policy
            .servers
            .push(serde_json::from_value(json!({ "server": other.openai_endpoint() })).unwrap());
        policy.allow_networks.push("127.0.0.0/8".into());
        assert!(policy.validate().is_err(), "validation refuses it");
        h.sandboxes.set_policy(policy);
        let mut snap = snapshot(0, json!({}));
        for url in [
            format!("{}/chat/completions", h.provider.openai_endpoint()),
            format!("{}/chat/completions", other.openai_endpoint()),
        ] {
            snap.mcp_config.push(ahp_host::store::McpServer {
                server: url,
                cred_ref: "model-key".into(),
            });
        }
        let id = testing::pushed(
            &mut h.host.store().locked(),
            &h.key,
            &snap,
            Tier::Nano,
            1_000_000,
            "egress-prober",
        )
        .unwrap();
        let tok = testing::activate_token(&h.host.store().locked(), &h.key, &id).unwrap();
        assert_eq!(h.host.activate(&id, &tok).unwrap().outcome, RunOutcome::Returned);
        let log = h.sandboxes.guest_log(&id).unwrap();
        let line = |origin: String| {
            log.lines()
                .find(|l| l.starts_with(&format!("GET {origin}")))
                .unwrap()
                .to_owned()
        };
        let model = line(h.provider.openai_endpoint());
        assert!(model.contains("refused"), "{log}");
        assert_eq!(h.provider.request_count(), 0, "the model's server saw nothing");
        // The control: another loopback server the policy lists is reached (it answers GET 405).
        let control = line(other.openai_endpoint());
        assert!(control.contains("-> 405"), "{log}");
    }
}

mod bounds {
    use super::*;

    #[test]
    fn complete_calls_per_turn_hold_at_the_limit_and_one_past() {
        let h = host();
        let a = h.prober(1_000_000);
        let reply = h.ask(&a, &format!("loop default {}", MAX_COMPLETIONS_PER_TURN));
        assert!(
            reply.starts_with(&format!("{MAX_COMPLETIONS_PER_TURN} calls")) && reply.ends_with("then nothing"),
            "{reply}"
        );
        let reply = h.ask(&a, &format!("loop default {}", MAX_COMPLETIONS_PER_TURN + 1));
        assert!(
            reply.starts_with(&format!("{MAX_COMPLETIONS_PER_TURN} calls")),
            "{reply}"
        );
        assert!(reply.ends_with("then invalid-request"), "{reply}");
        assert_eq!(h.provider.request_count(), 2 * MAX_COMPLETIONS_PER_TURN as usize);
    }

    #[test]
    fn model_tokens_are_the_hosts_to_meter() {
        let h = host();
        let a = h.prober(1_000_000);
        let reply = h.ask(&a, "report");
        assert!(reply.starts_with("refused InvalidKind"), "{reply}");
        assert!(
            h.events(&a.transfer, EventKind::UsageReported)
                .iter()
                .all(|u| u["kind"] == "compute")
        );
    }
}
