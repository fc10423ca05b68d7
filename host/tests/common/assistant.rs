//! The assistant's conversation scenario, shared by its Rust twin (`agent_loop.rs`,
//! `examples/assistant`) and its Python twin (`python.rs`, `examples/python-assistant`): the
//! same host, provider script, MCP server and assertions for either component.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use ahp_host::gateway::scripted::{Behaviour, Protocol, ScriptedPart, ScriptedProvider};
use ahp_host::host::HostBuilder;
use ahp_host::policy::Policy;
use ahp_host::sandbox::{CeilingCap, RunOutcome};
use ahp_host::shared_store::StoreLock;
use ahp_host::store::conversation::{Acting, Caller, IdempotencyKey, NewConversation, NewMessage, OPERATOR_SUBJECT};
use ahp_host::store::{EventKind, McpServer, ModelUsage, SnapshotInput, Store, Tier, TokenKey, TransferStatus};
use ahp_host::testing;
use ahp_host::tools::inventory_server::{InventoryServer, Mode};
use serde_json::json;

const MODEL_KEY: &str = "sk-agent-loop-model-key";
const INVENTORY_KEY: &str = "inventory-agent-loop-secret";

/// A host carrying one assistant (the component at `component`) whose model is `model`
/// (`openai` or `claude`).
pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    _runtime: tokio::runtime::Runtime,
    host: ahp_host::host::Host,
    provider: ScriptedProvider,
    inventory: InventoryServer,
    transfer: String,
    agent: String,
    conversation: String,
    operator: Caller,
}

pub(crate) fn assistant(component: &str, model: &str) -> Fixture {
    assistant_capped(component, model, CeilingCap::default())
}

/// [`assistant`] on a host whose tiers are lowered to `cap`.
pub(crate) fn assistant_capped(component: &str, model: &str, cap: CeilingCap) -> Fixture {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let provider = runtime.block_on(ScriptedProvider::start()).unwrap();
    let inventory = runtime
        .block_on(InventoryServer::start(
            INVENTORY_KEY,
            testing::inventory(),
            Mode::Honest,
        ))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let vault_dir = dir.path().join("vault");
    let vault = ahp_host::vault::DirVault::open(&vault_dir).unwrap();
    std::fs::write(vault_dir.join("model-key"), MODEL_KEY).unwrap();
    std::fs::write(vault_dir.join("inventory-api"), INVENTORY_KEY).unwrap();
    let price = json!({ "input": 400_000, "output": 1_600_000, "cacheRead": 100_000, "cacheWrite": 0 });
    let policy = Policy {
        servers: vec![inventory.policy_rule("inventory-api", 3)],
        allow_networks: vec!["127.0.0.0/8".into()],
        models: serde_json::from_value(json!([
            { "id": "openai", "provider": "openai", "endpoint": provider.openai_endpoint(),
              "providerModel": "gpt-4.1-mini", "credential": { "credRef": "model-key" },
              "contextTokens": 128000, "maxOutputTokens": 1024, "priceMicroUsdPerMTok": price },
            { "id": "claude", "provider": "anthropic", "endpoint": provider.anthropic_endpoint(),
              "providerModel": "claude-sonnet-4-5", "credential": { "credRef": "model-key" },
              "contextTokens": 200000, "maxOutputTokens": 1024, "priceMicroUsdPerMTok": price },
        ]))
        .unwrap(),
    };
    policy.validate().unwrap();
    let key = TokenKey::random();
    let db = Store::open_in_memory().unwrap().with_token_key(key.clone());
    let host = HostBuilder::new(db, PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sandbox-cache"))
        .policy(policy)
        .vault(Arc::new(vault))
        .cap(cap)
        .build()
        .unwrap();
    host.sandboxes()
        .register_component_file(component, Some("assistant"))
        .unwrap();
    let snap = SnapshotInput {
        mcp_config: vec![McpServer {
            server: inventory.url(),
            cred_ref: "inventory-api".into(),
        }],
        ..testing::snapshot(2, json!({ "model": model }))
    };
    let transfer = testing::pushed(
        &mut host.store().locked(),
        &key,
        &snap,
        Tier::Small,
        1_000_000,
        "assistant",
    )
    .unwrap();
    let token = testing::activate_token(&host.store().locked(), &key, &transfer).unwrap();
    let report = host.activate(&transfer, &token).unwrap();
    assert_eq!(report.outcome, RunOutcome::Returned);
    let agent = report.transfer.agent_id.unwrap();
    let operator = Caller::full(OPERATOR_SUBJECT).unwrap();
    let conversation = host
        .store()
        .locked()
        .create_conversation(
            &operator,
            &NewConversation {
                title: "stock".into(),
                agents: vec![agent.clone()],
            },
            "cv-stock",
        )
        .unwrap()
        .value
        .id;
    Fixture {
        _dir: dir,
        _runtime: runtime,
        host,
        provider,
        inventory,
        transfer,
        agent,
        conversation,
        operator,
    }
}

impl Fixture {
    /// Posts `question`, runs the agent's turn, and returns the reply's body.
    fn ask(&self, question: &str) -> Option<String> {
        let new = NewMessage {
            conversation: self.conversation.clone(),
            acting: Acting::Human,
            body: question.to_owned(),
            reply_to: None,
            idempotency: IdempotencyKey::Key(format!("q-{}", question.len())),
        };
        let posted = self
            .host
            .store()
            .locked()
            .post_message(&self.operator, &new)
            .unwrap()
            .value;
        let drive = self.host.agents().drive(&self.agent).unwrap();
        assert_eq!(drive.consumed + drive.unknown, 1, "{drive:?}");
        self.transcript()
            .into_iter()
            .find(|m| m.reply_to.as_deref() == Some(posted.id.as_str()))
            .map(|m| m.body)
    }

    /// Posts `question` and drives the agent until it has nothing left to do (its turn, and
    /// any its end left a wake for); returns the bodies of the replies to it.
    fn ask_all(&self, question: &str) -> Vec<String> {
        let new = NewMessage {
            conversation: self.conversation.clone(),
            acting: Acting::Human,
            body: question.to_owned(),
            reply_to: None,
            idempotency: IdempotencyKey::Key(format!("q-{}", question.replace(' ', "-"))),
        };
        let posted = self
            .host
            .store()
            .locked()
            .post_message(&self.operator, &new)
            .unwrap()
            .value;
        self.host.agents().drive(&self.agent).unwrap();
        self.answers_to(&posted.id)
    }

    /// The bodies of the replies to message `id`.
    fn answers_to(&self, id: &str) -> Vec<String> {
        self.transcript()
            .into_iter()
            .filter(|m| m.reply_to.as_deref() == Some(id))
            .map(|m| m.body)
            .collect()
    }

    fn transcript(&self) -> Vec<ahp_host::store::conversation::TranscriptMessage> {
        self.host
            .store()
            .locked()
            .read_transcript(&self.operator, &Acting::Human, &self.conversation, 0, 100)
            .unwrap()
    }

    fn events(&self, kind: EventKind) -> Vec<serde_json::Value> {
        let status = self.host.store().locked().get_status(&self.transfer).unwrap();
        status
            .events
            .into_iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.detail)
            .collect()
    }
}

fn usage(input: u64, output: u64) -> ModelUsage {
    ModelUsage {
        input_tokens: input,
        output_tokens: output,
        ..ModelUsage::default()
    }
}

/// The question, the tool call, the answer: the same script over either protocol.
pub(crate) fn a_question_is_answered_with_a_tool_over_mcp(component: &str, model: &str, protocol: Protocol) {
    let f = assistant(component, model);
    f.provider.push(Behaviour::Answer {
        parts: vec![ScriptedPart::ToolCall {
            name: "inventory".into(),
            arguments: json!({ "sku": "A-1" }),
        }],
        usage: usage(300, 20),
    });
    f.provider.push(Behaviour::Answer {
        parts: vec![ScriptedPart::Text("A-1: 10 on hand, reorder 25.".into())],
        usage: usage(420, 12),
    });
    let answer = f.ask("How many A-1 do we have?");
    assert_eq!(answer.as_deref(), Some("A-1: 10 on hand, reorder 25."));

    // The provider saw, in the protocol's own shape, the system prompt, the snapshot's history
    // and the question, then the tool's result; with the operator's key.
    let seen = f.provider.received();
    assert_eq!(seen.len(), 2, "two model calls: the tool call, then the answer");
    assert!(seen.iter().all(|r| r.protocol == protocol));
    let first = seen[0].texts();
    for text in [
        "You forecast inventory.",
        "message 0",
        "message 1",
        "How many A-1 do we have?",
    ] {
        assert!(
            first.iter().any(|t| t == text),
            "the provider did not see {text:?}: {first:?}"
        );
    }
    assert!(
        seen[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t.to_string().contains("inventory")),
        "the model was offered the inventory tool: {}",
        seen[0].body["tools"]
    );
    let second = seen[1].texts().join("\n");
    assert!(
        second.contains("\"onHand\":10") && second.contains("A-1"),
        "the tool's result went back: {second}"
    );
    for r in &seen {
        let key = match protocol {
            Protocol::Openai => r.authorization.clone(),
            Protocol::Anthropic => r.api_key.clone(),
        };
        assert_eq!(key.as_deref().map(|k| k.trim_start_matches("Bearer ")), Some(MODEL_KEY));
    }

    // The host called the tool over MCP with the credential it injected.
    assert!(
        f.inventory.methods().iter().any(|m| m == "tools/call"),
        "{:?}",
        f.inventory.methods()
    );
    assert!(
        f.inventory
            .authorizations()
            .iter()
            .all(|a| a == &format!("Bearer {INVENTORY_KEY}"))
    );

    // Neither secret reached the guest: nothing it sent to the model, posted or saved holds one.
    let checkpoint = f
        .host
        .store()
        .locked()
        .load_checkpoint(&f.transfer)
        .unwrap()
        .map(|c| c.state)
        .unwrap_or_default();
    for secret in [MODEL_KEY, INVENTORY_KEY] {
        assert!(
            seen.iter().all(|r| !r.body.to_string().contains(secret)),
            "{secret} in a request body"
        );
        assert!(f.transcript().iter().all(|m| !m.body.contains(secret)));
        assert!(!String::from_utf8_lossy(&checkpoint).contains(secret));
    }
    // The only credential use audited is the host's own injection, never a resolution by the
    // guest.
    let uses = f.events(EventKind::CredentialResolved);
    assert_eq!(uses.len(), 1, "{uses:?}");
    assert_eq!(uses[0]["use"], "injected");
    assert_eq!(uses[0]["credRef"], "inventory-api");

    // Both model calls and the tool call were charged and audited, without their text.
    let calls = f.events(EventKind::ModelCalled);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["inputTokens"], 300);
    // 300 × 0.4 + 20 × 1.6 = 152 µUSD, then 420 × 0.4 + 12 × 1.6 = 187.2 → 188.
    assert_eq!(calls[0]["chargedMicroUsd"], 152);
    assert_eq!(calls[1]["chargedMicroUsd"], 188);
    let tools = f.events(EventKind::ToolCalled);
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["tool"], "inventory");
    assert_eq!(tools[0]["chargedMicroUsd"], 3);
    let audit = serde_json::to_string(&f.host.store().locked().get_status(&f.transfer).unwrap().events).unwrap();
    assert!(
        !audit.contains("How many A-1") && !audit.contains("reorder 25"),
        "no text in the audit"
    );
    let budget = f.host.store().locked().budget(&f.transfer).unwrap().unwrap();
    assert!(budget.spent_micro_usd >= 152 + 188 + 3, "{budget:?}");
    assert_eq!(budget.reserved_micro_usd, 0, "nothing left reserved");
}

/// A model that only ever calls tools: cut at the assistant's eight steps, no answer; the next
/// question is answered.
pub(crate) fn a_model_that_never_stops_calling_tools_is_cut_at_eight_steps_and_the_agent_answers_on(component: &str) {
    let f = assistant(component, "openai");
    f.provider.set_responder(Arc::new(|_| Behaviour::Answer {
        parts: vec![ScriptedPart::ToolCall {
            name: "inventory".into(),
            arguments: json!({}),
        }],
        usage: usage(100, 10),
    }));
    assert_eq!(f.ask("loop forever, please"), None, "no answer from a runaway loop");
    assert_eq!(f.provider.request_count(), 8, "the assistant's step cap");
    assert_eq!(
        f.events(EventKind::ToolCalled).len(),
        7,
        "a tool call between each two steps"
    );
    // The turn failed, not the transfer: the next question is answered.
    assert_eq!(
        f.host.store().locked().transfer(&f.transfer).unwrap().status,
        TransferStatus::Active
    );
    f.provider
        .set_responder(Arc::new(|_| Behaviour::text("back to normal")));
    assert_eq!(f.ask("and now?").as_deref(), Some("back to normal"));
}

/// A question the provider always fails on — it hangs (the model call ends before the turn's
/// wall clock), floods, or answers without usage — never silences the assistant: that turn
/// answers nothing and leaves it queued; the next question's turn tries it once more, answers
/// it with the SDK's failure notice, and the next question is answered (within the same drive:
/// a turn whose end left it queued wakes the agent again). Each question has one answer, the
/// poisoned one was tried twice, and the transfer stays `active`.
pub(crate) fn a_question_the_provider_always_fails_on_never_silences_the_assistant(component: &str) {
    let hostile = [
        ("hangs", Behaviour::Hang),
        ("floods", Behaviour::Flood { bytes: 64 << 20 }),
        ("answers without usage", Behaviour::NoUsage),
    ];
    for (what, behaviour) in hostile {
        // A 4 s turn: a hanging call ends at 3.5 s, not the small tier's 14.5 s.
        let cap = CeilingCap {
            wall_clock_per_turn: Some(std::time::Duration::from_secs(4)),
            ..CeilingCap::default()
        };
        let f = assistant_capped(component, "openai", cap);
        f.provider.set_responder(Arc::new(move |r| {
            let poisoned = r.texts().last().is_some_and(|t| t.contains("poison"));
            if poisoned {
                behaviour.clone()
            } else {
                Behaviour::text("fine")
            }
        }));
        assert_eq!(f.ask_all("poison pill").len(), 0, "{what}: no answer at its first try");
        assert_eq!(
            f.ask_all("and the next one?"),
            ["fine"],
            "{what}: the next question is answered"
        );
        let transcript = f.transcript();
        let poison = &transcript[0];
        let answers = f.answers_to(&poison.id);
        assert_eq!(answers.len(), 1, "{what}: {answers:?}");
        assert!(
            answers[0].starts_with("Sorry, I could not answer this message: "),
            "{what}: {answers:?}"
        );
        let tried = f
            .provider
            .received()
            .iter()
            .filter(|r| r.texts().last().is_some_and(|t| t.contains("poison")))
            .count();
        assert_eq!(tried, 2, "{what}: tried twice, then given up");
        assert_eq!(
            f.host.store().locked().transfer(&f.transfer).unwrap().status,
            TransferStatus::Active,
            "{what}"
        );
        assert_eq!(f.ask_all("and after?"), ["fine"], "{what}: the agent goes on answering");
    }
}
