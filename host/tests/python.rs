//! Python guests (componentize-py, `guest-sdk-python/`) under the real host: the Python
//! assistant passes its Rust twin's conversation scenario (`common::assistant`), and hostile
//! Python guests — a CPU loop, a memory bomb, a blocking `time.sleep`, a prober of the
//! filesystem and sockets a Python component must import — are stopped by the tier's
//! ceilings (or find nothing), each with its audited error kind. The Python worker does its
//! tasks through `ahp_agent.delegation` as its Rust twin does, for the Rust coordinator.

use crate::common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_guests::{self as guests, PYTHON_ASSISTANT};
use ahp_host::gateway::scripted::Protocol;
use ahp_host::host::HostBuilder;
use ahp_host::sandbox::{Ceiling, CeilingCap, RunOutcome, RunReport};
use ahp_host::shared_store::StoreLock;
use ahp_host::store::{EventKind, Store, Tier, TokenKey, TransferStatus};
use ahp_host::testing;
use common::assistant;
use common::worker::{self, post, transcript};
use serde_json::{Value, json};

#[test]
fn python_openai_a_question_is_answered_with_a_tool_over_mcp() {
    let Ok(_) = guests::python_guests("python_openai_a_question_is_answered_with_a_tool_over_mcp") else {
        return;
    };
    assistant::a_question_is_answered_with_a_tool_over_mcp(PYTHON_ASSISTANT, "openai", Protocol::Openai);
}

#[test]
fn python_anthropic_a_question_is_answered_with_a_tool_over_mcp() {
    let Ok(_) = guests::python_guests("python_anthropic_a_question_is_answered_with_a_tool_over_mcp") else {
        return;
    };
    assistant::a_question_is_answered_with_a_tool_over_mcp(PYTHON_ASSISTANT, "claude", Protocol::Anthropic);
}

#[test]
fn python_a_model_that_never_stops_calling_tools_is_cut_at_eight_steps_and_the_agent_answers_on() {
    let Ok(_) = guests::python_guests(
        "python_a_model_that_never_stops_calling_tools_is_cut_at_eight_steps_and_the_agent_answers_on",
    ) else {
        return;
    };
    assistant::a_model_that_never_stops_calling_tools_is_cut_at_eight_steps_and_the_agent_answers_on(PYTHON_ASSISTANT);
}

#[test]
fn python_a_question_the_provider_always_fails_on_never_silences_the_assistant() {
    let Ok(_) = guests::python_guests("python_a_question_the_provider_always_fails_on_never_silences_the_assistant")
    else {
        return;
    };
    assistant::a_question_the_provider_always_fails_on_never_silences_the_assistant(PYTHON_ASSISTANT);
}

/// A host with the Python guest `guest` registered under its name, ceilings capped by `cap`
/// (one guest: a Python component takes seconds to compile the first time).
struct Host {
    _dir: tempfile::TempDir,
    key: TokenKey,
    host: ahp_host::host::Host,
}

fn host(cap: CeilingCap, guest: &str) -> Host {
    let dir = tempfile::tempdir().unwrap();
    let key = TokenKey::random();
    let db = Store::open_in_memory().unwrap().with_token_key(key.clone());
    // A secret beside the data the prober must not reach.
    std::fs::write(dir.path().join("token-key"), "host secret").unwrap();
    let host = HostBuilder::new(db, PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sandbox-cache"))
        .cap(cap)
        .vault(Arc::new(
            ahp_host::vault::DirVault::open(dir.path().join("vault")).unwrap(),
        ))
        .build()
        .unwrap();
    let path = guests::PYTHON.iter().find(|(n, _)| *n == guest).unwrap().1;
    host.sandboxes().register_component_file(path, Some(guest)).unwrap();
    Host { _dir: dir, key, host }
}

impl Host {
    fn activate(&self, component: &str, tier: Tier) -> (String, RunReport) {
        self.activate_with(component, tier, json!({}))
    }

    fn activate_with(&self, component: &str, tier: Tier, tool_state: Value) -> (String, RunReport) {
        let snap = testing::snapshot(2, tool_state);
        let id = testing::pushed(
            &mut self.host.store().locked(),
            &self.key,
            &snap,
            tier,
            1_000_000,
            component,
        )
        .unwrap();
        let tok = testing::activate_token(&self.host.store().locked(), &self.key, &id).unwrap();
        let report = self.host.activate(&id, &tok).unwrap();
        (id, report)
    }

    fn events(&self, id: &str, kind: EventKind) -> Vec<Value> {
        let status = self.host.store().locked().get_status(id).unwrap();
        status
            .events
            .into_iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.detail)
            .collect()
    }

    /// Activates `component` at `tier`: it must be stopped by `ceiling`, audited as such, the
    /// transfer left `pushed` and the sandbox dropped.
    fn assert_stopped_by(&self, component: &str, tier: Tier, ceiling: Ceiling) -> RunReport {
        let (id, report) = self.activate(component, tier);
        assert_eq!(
            report.outcome,
            RunOutcome::CeilingExceeded(ceiling),
            "{component}: {:?}",
            self.host.sandboxes().guest_log(&id)
        );
        assert_eq!(report.transfer.status, TransferStatus::Pushed);
        let breaches = self.events(&id, EventKind::CeilingExceeded);
        assert_eq!(breaches.len(), 1, "{breaches:?}");
        assert_eq!(breaches[0]["ceiling"], ceiling.as_str());
        let failed = self.events(&id, EventKind::ActivationFailed);
        assert_eq!(failed[0]["reason"], format!("ceiling exceeded: {ceiling}"));
        assert_eq!(self.host.sandboxes().live_count(), 0, "a failed sandbox is dropped");
        report
    }
}

#[test]
fn a_python_cpu_loop_is_stopped_by_the_fuel_ceiling() {
    let Ok(_) = guests::python_guests("a_python_cpu_loop_is_stopped_by_the_fuel_ceiling") else {
        return;
    };
    let h = host(CeilingCap::default(), "python-cpu-loop");
    let report = h.assert_stopped_by("python-cpu-loop", Tier::Nano, Ceiling::FuelPerTurn);
    assert_eq!(
        report.fuel_consumed,
        Tier::Nano.limits().fuel_per_turn,
        "every unit of the turn's fuel"
    );
}

#[test]
fn a_python_memory_bomb_is_stopped_by_the_memory_ceiling() {
    let Ok(_) = guests::python_guests("a_python_memory_bomb_is_stopped_by_the_memory_ceiling") else {
        return;
    };
    let h = host(CeilingCap::default(), "python-memory-bomb");
    h.assert_stopped_by("python-memory-bomb", Tier::Nano, Ceiling::Memory);
}

#[test]
fn a_python_time_sleep_is_stopped_by_the_wall_clock_ceiling() {
    let Ok(_) = guests::python_guests("a_python_time_sleep_is_stopped_by_the_wall_clock_ceiling") else {
        return;
    };
    let h = host(CeilingCap::default(), "python-sleeper");
    let started = Instant::now();
    h.assert_stopped_by("python-sleeper", Tier::Nano, Ceiling::WallClock);
    let took = started.elapsed();
    let ceiling = Tier::Nano.limits().wall_clock_per_turn;
    assert!(took >= ceiling, "ended early: {took:?}");
    assert!(
        took <= ceiling + ceiling / 10 + Duration::from_millis(500),
        "took {took:?}"
    );
}

#[test]
fn python_guest_finds_no_file_and_no_socket() {
    let Ok(_) = guests::python_guests("python_guest_finds_no_file_and_no_socket") else {
        return;
    };
    let h = host(CeilingCap::default(), "python-prober");
    let (id, report) = h.activate("python-prober", Tier::Nano);
    let log = h.host.sandboxes().guest_log(&id).unwrap_or_default();
    println!("{log}"); // what each attempt raised, for `-- --nocapture`
    assert_eq!(report.outcome, RunOutcome::Returned, "{log}");
    assert_eq!(report.transfer.status, TransferStatus::Active);
    for attempt in [
        "listdir /",
        "listdir .",
        "open /etc/passwd",
        "open token-key",
        "write /tmp/x",
        "tcp socket",
        "tcp6 socket",
        "tcp connect",
        "udp socket",
        "getaddrinfo",
    ] {
        assert!(
            log.contains(&format!("{attempt}: refused")),
            "{attempt} not refused:\n{log}"
        );
    }
    // Creating a socket is refused by the host (`access-denied`, EACCES), not merely
    // unsupported by the guest's libc.
    for create in ["tcp socket", "tcp6 socket"] {
        assert!(
            log.contains(&format!("{create}: refused (PermissionError")),
            "{create}:\n{log}"
        );
    }
    // The SDK's bounds and error kinds are the host's, as a guest sees them.
    assert!(log.contains("snapshot page of MAX_PAGE: 2 messages"), "{log}");
    assert!(
        log.contains("snapshot page past MAX_PAGE: limit-too-large 256"),
        "{log}"
    );
    assert!(log.contains("getaddrinfo: refused (gaierror"), "{log}");
    assert!(log.contains("delegation outside a turn: no-wake"), "{log}");
    assert!(!log.contains("REACHED"), "{log}");
}

#[test]
fn every_python_guest_imports_only_what_the_host_links_and_has_a_test() {
    let Ok(_) = guests::python_guests("every_python_guest_imports_only_what_the_host_links_and_has_a_test") else {
        return;
    };
    let tested = [
        "python-assistant",
        "python-cpu-loop",
        "python-memory-bomb",
        "python-sleeper",
        "python-prober",
        "python-worker",
        "template-python",
    ];
    let h = host(CeilingCap::default(), "template-python");
    assert!(!guests::PYTHON.is_empty());
    for (name, path) in guests::PYTHON {
        assert!(
            tested.contains(name),
            "the Python guest {name} has no test in host/tests/python.rs"
        );
        // Registration checks every import against the allow-list (`interfaces::check_imports`)
        // and compiles through the shared cache, so each component is compiled once per cache.
        h.host.sandboxes().register_component_file(path, Some(name)).unwrap();
    }
}

#[test]
fn the_python_template_answers_out_of_the_box_and_counts_in_its_checkpoint() {
    let Ok(_) = guests::python_guests("the_python_template_answers_out_of_the_box_and_counts_in_its_checkpoint") else {
        return;
    };
    use ahp_host::store::conversation::{
        Acting, Caller, IdempotencyKey, NewConversation, NewMessage, OPERATOR_SUBJECT,
    };
    let h = host(CeilingCap::default(), "template-python");
    let (id, report) = h.activate("template-python", Tier::Nano);
    assert_eq!(report.outcome, RunOutcome::Returned);
    let agent = report.transfer.agent_id.unwrap();
    let operator = Caller::full(OPERATOR_SUBJECT).unwrap();
    let new = NewConversation {
        title: "template".into(),
        agents: vec![agent.clone()],
    };
    let cv = h
        .host
        .store()
        .locked()
        .create_conversation(&operator, &new, "cv-template")
        .unwrap()
        .value
        .id;
    for (n, question) in ["hello", "and again"].into_iter().enumerate() {
        let posted = NewMessage {
            conversation: cv.clone(),
            acting: Acting::Human,
            body: question.into(),
            reply_to: None,
            idempotency: IdempotencyKey::Key(format!("q{n}")),
        };
        let posted = h.host.store().locked().post_message(&operator, &posted).unwrap().value;
        let drive = h.host.agents().drive(&agent).unwrap();
        assert_eq!(drive.consumed, 1, "{drive:?}");
        let transcript = h
            .host
            .store()
            .locked()
            .read_transcript(&operator, &Acting::Human, &cv, 0, 100)
            .unwrap();
        let reply = transcript
            .iter()
            .find(|m| m.reply_to.as_deref() == Some(posted.id.as_str()))
            .unwrap();
        assert_eq!(
            reply.body,
            format!("#{}: you said '{question}' (no model is offered to me)", n + 1)
        );
    }
    let saved = h.host.store().locked().load_checkpoint(&id).unwrap().unwrap().state;
    assert_eq!(saved, b"2", "two answers counted");
}

/// The operator as the caller, and a conversation of it with `agent`.
fn conversation_with(h: &Host, agent: &str) -> (ahp_host::store::conversation::Caller, String) {
    use ahp_host::store::conversation::{Caller, NewConversation, OPERATOR_SUBJECT};
    let caller = Caller::full(OPERATOR_SUBJECT).unwrap();
    let new = NewConversation {
        title: "questions".into(),
        agents: vec![agent.to_owned()],
    };
    let cv = h
        .host
        .store()
        .locked()
        .create_conversation(&caller, &new, &format!("cv-{agent}"))
        .unwrap()
        .value
        .id;
    (caller, cv)
}

/// `examples/python-worker` through `ahp_agent.delegation`, as `host/tests/sandbox/delegation.rs`'s
/// `worker` drives its Rust twin: a task attempt's wake is done and handed in, two attempts
/// coalesced into one wake are both done (the paged task list), a task cancelled before its
/// turn hands nothing in, a human's message gets the job's result; then, beside the Rust
/// worker, it serves the Rust coordinator, whose answer is the one it gives with two Rust
/// workers, byte for byte.
#[test]
fn the_python_worker_does_its_tasks_as_its_rust_twin() {
    let Ok(_) = guests::python_guests("the_python_worker_does_its_tasks_as_its_rust_twin") else {
        return;
    };
    let h = host(CeilingCap::default(), "python-worker");
    for (name, path) in [("worker", guests::WORKER), ("coordinator", guests::COORDINATOR)] {
        h.host.sandboxes().register_component_file(path, Some(name)).unwrap();
    }
    let agents = h.host.agents();
    let (_, report) = h.activate_with("python-worker", Tier::Nano, json!({"job": "reverse"}));
    assert_eq!(report.outcome, RunOutcome::Returned);
    let py = report.transfer.agent_id.unwrap();
    let (caller, cv) = conversation_with(&h, &py);

    worker::reverses_its_tasks(&h.host, &caller, &py, &cv);

    // A job it does not know fails the activation, with the reason.
    let (_, bad) = h.activate_with("python-worker", Tier::Nano, json!({"job": "sort"}));
    assert!(
        matches!(&bad.outcome, RunOutcome::GuestError(e) if e.contains("job 'sort' is not one of count, reverse")),
        "{:?}",
        bad.outcome
    );

    // The Rust coordinator over a Rust counter and the Python reverser.
    let (_, rs) = h.activate_with("worker", Tier::Nano, json!({"job": "count"}));
    let rs = rs.transfer.agent_id.unwrap();
    let workers = [rs.clone(), py.clone()];
    let (_, coordinator) = h.activate_with(
        "coordinator",
        Tier::Nano,
        json!({"workers": workers, "waitMode": "all"}),
    );
    let coordinator = coordinator.transfer.agent_id.unwrap();
    let (_, cv) = conversation_with(&h, &coordinator);
    let question = post(&h.host, &caller, &cv, "ship A-1 first", "q-1");
    assert_eq!(agents.drive(&coordinator).unwrap().consumed, 1);
    agents.drive(&py).unwrap();
    assert_eq!(
        agents.drive(&coordinator).unwrap(),
        Default::default(),
        "a partial all makes no wake"
    );
    agents.drive(&rs).unwrap();
    assert_eq!(agents.drive(&coordinator).unwrap().consumed, 1);
    let t = transcript(&h.host, &caller, &cv);
    assert_eq!(t.len(), 2);
    assert_eq!(t[1].reply_to.as_deref(), Some(question.as_str()));
    assert_eq!(
        t[1].body,
        format!(
            "On \"ship A-1 first\":\n- {rs} (succeeded): count: 3 words, 10 letters\n- {py} (succeeded): reverse: first A-1 ship"
        )
    );
}
