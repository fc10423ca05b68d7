//! The `ahp` command line: the demo, tokens, transfers and the reaper, on a real data directory.

use std::path::Path;
use std::process::{Command, Output};

use ahp_store::{McpServer, Message, SnapshotInput, Store, TransferStatus};

fn ahp(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env_remove("AHP_TRANSFER_TOKEN_SECRET")
        .env_remove("AHP_DATA_DIR")
        .output()
        .expect("run ahp")
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "ahp failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// A staged transfer created through the library on the data directory's database.
fn staged(dir: &Path) -> String {
    let mut store = Store::open(dir.join("ahp.db")).unwrap();
    let snap = SnapshotInput {
        source_host: "laptop-7".into(),
        system_prompt: "p".into(),
        message_history: vec![Message {
            role: "user".into(),
            content: "hi".into(),
        }],
        tool_state: serde_json::json!({}),
        mcp_config: vec![McpServer {
            server: "https://inv.example/mcp".into(),
            cred_ref: "inv".into(),
        }],
    };
    store.snapshot_state(&snap).unwrap().id
}

#[test]
fn demo_runs_the_whole_lifecycle_and_ends_terminated() {
    let dir = tempfile::tempdir().unwrap();
    let out = stdout(&ahp(dir.path(), &["demo", "--grace", "10ms"]));
    for step in [
        "snapshot_state",
        "provision_runtime",
        "push_state",
        "activate",
        "turn",
        "reap_insolvent",
    ] {
        assert!(out.contains(step), "demo output lacks {step}:\n{out}");
    }
    assert!(out.contains("[narrative]"));
    // The scripted model is printed as what it is.
    assert!(out.contains("LOCAL SCRIPTED model"), "{out}");
    // The agent answers from its sandbox: its model called the inventory tool over MCP, and
    // the answer quotes what the server returned; no spend is invented.
    // The scripted model answers in a sentence built from the tool's numbers.
    assert!(
        out.contains("(scripted model) From the inventory tool: SKU-3307 has 0 on hand"),
        "{out}"
    );
    assert!(
        out.contains("short of the 8 its 10-day lead time needs: reorder 8"),
        "{out}"
    );
    assert!(!out.contains("report_usage"), "{out}");
    // A story, not a log: no log line, trap or backtrace among the narrated lines; they went
    // to the log file the demo names.
    for noise in ["WARN", "INFO", "wasm backtrace", "wasm trap", "error while executing"] {
        assert!(!out.contains(noise), "{noise} in the demo's output:\n{out}");
    }
    assert!(
        out.contains(&format!("{}", dir.path().join("demo.log").display())),
        "{out}"
    );
    // It ends when the budget does: one line says how, and no turn runs after it.
    assert_eq!(out.matches("out of budget").count(), 1, "{out}");
    assert!(out.contains("budget spent"), "{out}");
    let cv = out
        .split_whitespace()
        .find(|w| w.starts_with("cv_"))
        .expect("the demo names its conversation");
    let operator = ahp_store::conversation::Caller::full(ahp_store::conversation::OPERATOR_SUBJECT).unwrap();
    let questions = Store::open(dir.path().join("ahp.db"))
        .unwrap()
        .read_transcript(&operator, &ahp_store::conversation::Acting::Human, cv, 0, 200)
        .unwrap()
        .iter()
        .filter(|m| m.author == ahp_store::conversation::Author::Human)
        .count();
    assert!((5..=40).contains(&questions), "{questions} questions asked:\n{out}");
    let mut store = Store::open(dir.path().join("ahp.db")).unwrap();
    let all = store.list_transfers(None, 10).unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].status, TransferStatus::Terminated);
    let kinds: Vec<_> = store
        .get_status(&all[0].id)
        .unwrap()
        .events
        .iter()
        .map(|e| e.kind.to_string())
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("snapshot_created"));
    assert!(kinds.contains(&"agent_bound".to_owned()), "{kinds:?}");
    assert!(kinds.contains(&"model_called".to_owned()), "{kinds:?}");
    assert!(kinds.contains(&"tool_called".to_owned()), "{kinds:?}");
    assert!(kinds.contains(&"insolvent".to_owned()), "{kinds:?}");
    // Spend never passes the allocation.
    let budget = store.get_status(&all[0].id).unwrap().budget.unwrap();
    assert!(budget.spent_micro_usd <= budget.allocated_micro_usd, "{budget:?}");
    assert_eq!(&kinds[kinds.len() - 2..], ["agent_unbound", "terminated"]);
}

#[test]
fn token_issue_prints_only_a_token_that_the_store_accepts_once() {
    let dir = tempfile::tempdir().unwrap();
    // The first command creates the key file; the transfer is created after it exists.
    let t = staged(dir.path());
    let out = stdout(&ahp(
        dir.path(),
        &["token", "issue", "--transfer", &t, "--scope", "provision_runtime"],
    ));
    let token = out.trim_end_matches('\n');
    assert!(!token.contains('\n') && token.starts_with("ahp2."), "{out:?}");
    let key = ahp_store::TokenKey::from_env_or_file(dir.path()).unwrap();
    let mut store = Store::open(dir.path().join("ahp.db")).unwrap().with_token_key(key);
    store
        .provision_runtime(&t, ahp_store::Tier::Nano, 10, "forecaster", token)
        .unwrap();
    assert!(
        store
            .provision_runtime(&t, ahp_store::Tier::Nano, 10, "forecaster", token)
            .is_err()
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("transfer-token.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn token_issue_refuses_bad_input_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let t = staged(dir.path());
    let cases: [(&[&str], &str); 4] = [
        (
            &["token", "issue", "--transfer", &t, "--scope", "terminate"],
            "invalid value 'terminate'",
        ),
        (
            &["token", "issue", "--transfer", &t, "--scope", "activate", "--ttl", "2h"],
            "ttl",
        ),
        (
            &[
                "token",
                "issue",
                "--transfer",
                &t,
                "--scope",
                "activate",
                "--ttl",
                "soon",
            ],
            "--ttl",
        ),
        (
            &[
                "token",
                "issue",
                "--transfer",
                "tr_ffffffffffffffffffffffff",
                "--scope",
                "activate",
            ],
            "not found",
        ),
    ];
    for (args, needle) in cases {
        let o = ahp(dir.path(), args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(o.stdout.is_empty(), "{args:?} printed to stdout");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let short = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .args([
            "--data-dir",
            dir.path().to_str().unwrap(),
            "token",
            "issue",
            "--transfer",
            &t,
            "--scope",
            "activate",
        ])
        .env("AHP_TRANSFER_TOKEN_SECRET", "too-short")
        .output()
        .unwrap();
    assert!(!short.status.success());
    assert!(String::from_utf8_lossy(&short.stderr).contains("at least 32"));
}

#[test]
fn issued_tokens_bind_what_the_operator_fixed() {
    use ahp_store::{Bound, Error, Tier, TokenRefusal};
    let dir = tempfile::tempdir().unwrap();
    let t = staged(dir.path());
    let issue = |extra: &[&str]| {
        let mut args = vec!["token", "issue", "--transfer", t.as_str()];
        args.extend_from_slice(extra);
        stdout(&ahp(dir.path(), &args)).trim().to_owned()
    };
    let provision = issue(&[
        "--scope",
        "provision_runtime",
        "--tier",
        "nano",
        "--max-budget",
        "500",
        "--component",
        "forecaster",
    ]);
    let activate = issue(&["--scope", "activate"]);
    let free = issue(&["--scope", "activate", "--any-checksum"]);
    let key = ahp_store::TokenKey::from_env_or_file(dir.path()).unwrap();
    let mut store = Store::open(dir.path().join("ahp.db")).unwrap().with_token_key(key);
    let checksum = store.transfer(&t).unwrap().checksum;
    assert!(activate.contains(&format!(".checksum={checksum}.")), "{activate}");
    assert!(free.contains(".-."), "{free}");
    let refused = store
        .provision_runtime(&t, Tier::Small, 500, "forecaster", &provision)
        .unwrap_err();
    assert!(
        matches!(refused, Error::Token(TokenRefusal::Binding(Bound::Tier))),
        "{refused:?}"
    );
    store
        .provision_runtime(&t, Tier::Nano, 500, "forecaster", &provision)
        .unwrap();
    // Flags of the other scope are refused, printing nothing.
    for args in [
        &["--scope", "activate", "--tier", "nano"][..],
        &["--scope", "provision_runtime", "--any-checksum"][..],
        &["--scope", "provision_runtime", "--max-budget", "0"][..],
    ] {
        let mut all = vec!["token", "issue", "--transfer", t.as_str()];
        all.extend_from_slice(args);
        let o = ahp(dir.path(), &all);
        assert!(!o.status.success() && o.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn transfers_can_be_listed_shown_and_terminated() {
    let dir = tempfile::tempdir().unwrap();
    let t = staged(dir.path());
    let list = stdout(&ahp(dir.path(), &["transfer", "list"]));
    assert!(
        list.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with(&t) && l.contains("staged")),
        "{list}"
    );
    assert_eq!(
        stdout(&ahp(dir.path(), &["transfer", "list", "--status", "active"]))
            .lines()
            .count(),
        1
    );
    let show = stdout(&ahp(dir.path(), &["transfer", "show", &t]));
    assert!(show.contains("snapshot_created"), "{show}");
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&ahp(dir.path(), &["transfer", "show", &t, "--json"]))).unwrap();
    assert_eq!(json["transfer"]["status"], "staged");
    assert_eq!(json["events"][0]["kind"], "snapshot_created");

    let out = stdout(&ahp(
        dir.path(),
        &["transfer", "terminate", &t, "--reason", "operator request"],
    ));
    assert_eq!(out.trim(), format!("{t} terminated"));
    let again = ahp(dir.path(), &["transfer", "terminate", &t, "--reason", "again"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("it is terminated"));
    let bad = ahp(dir.path(), &["transfer", "list", "--limit", "0"]);
    assert!(!bad.status.success());
}

#[test]
fn reap_prints_what_it_ended_and_nothing_the_second_time() {
    let dir = tempfile::tempdir().unwrap();
    let t = staged(dir.path());
    std::thread::sleep(std::time::Duration::from_millis(20));
    let out = stdout(&ahp(dir.path(), &["reap", "--ttl", "10ms"]));
    assert_eq!(out.trim(), format!("{t} expired (not activated within the TTL)"));
    assert_eq!(stdout(&ahp(dir.path(), &["reap", "--ttl", "10ms"])), "");
}

/// Two agents of one principal on the data directory's database, a goal the first controls and
/// two tasks of it for the second: one finished, one open. Returns (goal, finished, open,
/// attempt, creator).
fn delegated(dir: &Path) -> (String, String, String, String, String) {
    use ahp_store::conversation::{AgentActor, AgentCard, Caller, OPERATOR_SUBJECT};
    use ahp_store::delegation::{Acting, NewGoal, NewTask, PlanStep, StepStatus, TaskCompletion, TaskOutcome};
    let mut store = Store::open(dir.join("ahp.db")).unwrap();
    let op = Caller::full(OPERATOR_SUBJECT).unwrap();
    let card = |h: &str| AgentCard {
        handle: h.into(),
        display_name: h.into(),
        description: String::new(),
        specialties: vec![],
    };
    let boss = store.create_agent(&op, &card("boss"), "a-1").unwrap().value;
    let worker = store.create_agent(&op, &card("worker"), "a-2").unwrap().value;
    let lease = std::time::Duration::from_secs(600);
    let boss_ep = AgentActor::of(&store.attach_endpoint(&op, &boss.id, lease, "e-1").unwrap().value);
    let worker_ep = AgentActor::of(&store.attach_endpoint(&op, &worker.id, lease, "e-2").unwrap().value);
    let goal = NewGoal {
        title: "Q3 <plan>".into(),
        completion_intent: "one number".into(),
        plan: vec![
            PlanStep {
                title: "ask".into(),
                status: StepStatus::Done,
            },
            PlanStep {
                title: "sum".into(),
                status: StepStatus::Pending,
            },
        ],
        controller: Some(boss.id.clone()),
    };
    let goal = store.create_goal(&op, &Acting::Human, &goal, "g-1").unwrap().value;
    let task = |title: &str, start: bool| NewTask {
        assignee: worker.id.clone(),
        title: title.into(),
        instructions: format!("{title}: line one\nline two"),
        goal: Some(goal.id.clone()),
        start,
    };
    let boss_acts = Acting::Agent(boss_ep.clone());
    let done = store
        .create_agent_task(&op, &boss_acts, &task("forecast", true), "t-1")
        .unwrap()
        .value;
    let open = store
        .create_agent_task(&op, &boss_acts, &task("later", false), "t-2")
        .unwrap()
        .value;
    let attempt = done.current_attempt.clone().unwrap().id;
    let finish = TaskCompletion {
        attempt: attempt.clone(),
        outcome: TaskOutcome::Succeeded,
        result: "55 units".into(),
    };
    store.complete_task_attempt(&op, &worker_ep, &finish).unwrap();
    (goal.id, done.id, open.id, attempt, boss.id)
}

#[test]
fn task_and_goal_list_and_show_as_the_operator() {
    let dir = tempfile::tempdir().unwrap();
    let (goal, done, open, attempt, boss) = delegated(dir.path());
    let all = stdout(&ahp(dir.path(), &["task", "list"]));
    assert!(all.starts_with("id "), "{all}");
    assert!(
        all.contains(&done) && all.contains(&open) && all.contains(&boss),
        "{all}"
    );
    let succeeded = stdout(&ahp(dir.path(), &["task", "list", "--state", "succeeded"]));
    assert!(succeeded.contains(&done) && !succeeded.contains(&open), "{succeeded}");
    let one = stdout(&ahp(dir.path(), &["task", "list", "--limit", "1"]));
    assert_eq!(one.lines().count(), 2, "{one}");
    let next = stdout(&ahp(
        dir.path(),
        &[
            "task",
            "list",
            "--after",
            one.lines().nth(1).unwrap().split(' ').next().unwrap(),
        ],
    ));
    assert_eq!(next.lines().count(), 2, "{next}");
    // The principal filter: a key principal without tasks sees none.
    stdout(&ahp(
        dir.path(),
        &["principal", "add", "alice", "--scope", "communication:read"],
    ));
    let alices = stdout(&ahp(dir.path(), &["task", "list", "--principal", "alice"]));
    assert_eq!(alices.lines().count(), 1, "{alices}");

    let shown = stdout(&ahp(dir.path(), &["task", "show", &done]));
    for want in [
        attempt.as_str(),
        "succeeded",
        "55 units",
        "line two",
        boss.as_str(),
        goal.as_str(),
    ] {
        assert!(shown.contains(want), "task show lacks {want}:\n{shown}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&ahp(dir.path(), &["task", "show", &open, "--json"]))).unwrap();
    assert_eq!(
        (
            json["task"]["state"].as_str(),
            json["attempts"].as_array().map(Vec::len)
        ),
        (Some("open"), Some(0))
    );

    let goals = stdout(&ahp(dir.path(), &["goal", "list"]));
    assert!(
        goals.contains(&goal) && goals.contains("1/2") && goals.contains("Q3 <plan>"),
        "{goals}"
    );
    let g = stdout(&ahp(dir.path(), &["goal", "show", &goal]));
    for want in [
        "one number",
        "[done] ask",
        "[pending] sum",
        "revision    1",
        done.as_str(),
        open.as_str(),
    ] {
        assert!(g.contains(want), "goal show lacks {want}:\n{g}");
    }
}

#[test]
fn task_and_goal_flags_are_validated_with_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    delegated(dir.path());
    let missing = format!("tsk_{}", "0".repeat(24));
    let cases: [(&[&str], &str); 8] = [
        (
            &["task", "list", "--state", "done"],
            "unknown task state \"done\" (one of open, running",
        ),
        (&["task", "list", "--limit", "0"], "0 is not in 1..=200"),
        (&["task", "list", "--limit", "201"], "201 is not in 1..=200"),
        (
            &["task", "list", "--principal", "nobody"],
            "no principal named \"nobody\"",
        ),
        (&["task", "list", "--after", "nope"], "invalid taskId"),
        (&["task", "show", &missing], "not found"),
        (&["goal", "list", "--limit", "201"], "201 is not in 1..=200"),
        (&["goal", "show", "goal_x"], "invalid goalId"),
    ];
    for (args, want) in cases {
        let out = ahp(dir.path(), args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{args:?}: {err}");
    }
    // At the limit it is accepted.
    stdout(&ahp(dir.path(), &["task", "list", "--limit", "200"]));
    stdout(&ahp(dir.path(), &["goal", "list", "--limit", "200"]));
}

/// A valid component (it exports `resume`) of exactly `size` bytes: a minimal agent followed by
/// one custom section of padding, which validation and compilation skip.
fn component_of(size: usize) -> Vec<u8> {
    let wat = r#"(component
      (core module $m
        (memory (export "memory") 1)
        (func (export "resume") (result i32) (i32.const 16))
        (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 1024)))
      (core instance $i (instantiate $m))
      (func (export "resume") (result (result (error string)))
        (canon lift (core func $i "resume") (memory (core memory $i "memory")) (realloc (core func $i "realloc")))))"#;
    let mut bytes = wat::parse_str(wat).unwrap();
    let leb = |mut n: usize| {
        let mut out = Vec::new();
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            out.push(if n == 0 { byte } else { byte | 0x80 });
            if n == 0 {
                return out;
            }
        }
    };
    let name = b"padding";
    // A section is its id, its size (LEB128), then the name (length-prefixed) and the payload.
    let mut payload = size - bytes.len() - 1 - 5 - 1 - name.len();
    loop {
        let body = 1 + name.len() + payload;
        let total = bytes.len() + 1 + leb(body).len() + body;
        if total == size {
            break;
        }
        payload += size - total;
    }
    bytes.push(0);
    bytes.extend(leb(1 + name.len() + payload));
    bytes.push(name.len() as u8);
    bytes.extend(name);
    bytes.resize(bytes.len() + payload, 0);
    assert_eq!(bytes.len(), size);
    bytes
}

/// `ahp component add` is how a component reaches a host (MCP tools only name one by digest
/// or name, so the MCP body bound is no component bound): it takes a component of exactly
/// `MAX_COMPONENT_BYTES` (32 MiB, room for a ~19 MiB Python agent) and refuses one byte more,
/// saying so and registering nothing.
#[test]
fn component_add_takes_a_component_at_the_size_limit_and_refuses_one_byte_more() {
    let dir = tempfile::tempdir().unwrap();
    let limit = ahp_store::MAX_COMPONENT_BYTES as usize;
    let at = dir.path().join("at-limit.wasm");
    std::fs::write(&at, component_of(limit)).unwrap();
    let digest = stdout(&ahp(
        dir.path(),
        &["component", "add", at.to_str().unwrap(), "--name", "at-limit"],
    ));
    assert!(digest.trim().starts_with("sha256:"), "{digest}");
    let past = dir.path().join("past-limit.wasm");
    std::fs::write(&past, component_of(limit + 1)).unwrap();
    let o = ahp(
        dir.path(),
        &["component", "add", past.to_str().unwrap(), "--name", "past-limit"],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{} bytes; the limit is {limit}", limit + 1)),
        "{err}"
    );
    let mut db = Store::open(dir.path().join("ahp.db")).unwrap();
    let record = db.component("at-limit").unwrap().unwrap();
    assert_eq!(
        (record.digest.as_str(), record.size_bytes),
        (digest.trim(), limit as u64)
    );
    assert!(db.component("past-limit").unwrap().is_none());
    assert_eq!(std::fs::read_dir(dir.path().join("components")).unwrap().count(), 1);
}

#[test]
fn serve_refuses_parking_flags_out_of_bounds_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 7] = [
        (&["--goal-quiet-period", "999ms"], "must be 1s to 24h"),
        (&["--goal-quiet-period", "86401s"], "must be 1s to 24h"),
        (&["--park-after", "0s"], "longer than zero"),
        (&["--park-after", "soon"], "--park-after"),
        (&["--max-live", "0"], "--max-live"),
        (&["--max-live", "50001"], "--max-live"),
        (&["--max-live", "many"], "--max-live"),
    ];
    for (flags, needle) in cases {
        let mut args = vec!["serve", "--http", "127.0.0.1:0", "--auth", "none"];
        args.extend_from_slice(flags);
        let o = ahp(dir.path(), &args);
        assert!(!o.status.success(), "{flags:?} succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{flags:?}: {err}");
    }
    assert!(
        !dir.path().join("ahp.db").exists(),
        "a refused serve opened no database"
    );
}

/// `ahp agent inbox` lists what waits for an agent with each message's tries; `ahp agent
/// skip` consumes the one it is stuck on (once: again, nothing to skip); a foreign message,
/// a malformed id or an unknown agent is refused clearly and changes nothing.
#[test]
fn agent_inbox_shows_what_waits_and_skip_clears_a_stuck_message() {
    use ahp_store::conversation::{
        Acting, AgentCard, Caller, IdempotencyKey, NewConversation, NewMessage, OPERATOR_SUBJECT,
    };
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("ahp.db")).unwrap();
    let op = Caller::full(OPERATOR_SUBJECT).unwrap();
    let card = AgentCard {
        handle: "stuck".into(),
        display_name: "Stuck".into(),
        description: String::new(),
        specialties: Vec::new(),
    };
    let agent = store.create_agent(&op, &card, "a").unwrap().value.id;
    let new = NewConversation {
        title: "t".into(),
        agents: vec![agent.clone()],
    };
    let cv = store.create_conversation(&op, &new, "cv").unwrap().value.id;
    let post = |store: &mut Store, body: &str| {
        let m = NewMessage {
            conversation: cv.clone(),
            acting: Acting::Human,
            body: body.into(),
            reply_to: None,
            idempotency: IdempotencyKey::Key(format!("k-{}", body.len())),
        };
        store.post_message(&op, &m).unwrap().value.id
    };
    let stuck = post(&mut store, "the poison one");
    let next = post(&mut store, "the next one");
    drop(store);

    let out = stdout(&ahp(dir.path(), &["agent", "inbox", &agent]));
    assert!(out.contains(&stuck) && out.contains(&next), "{out}");
    assert!(out.contains("tries"), "{out}");
    assert!(out.contains("the poison one"), "{out}");

    let out = stdout(&ahp(dir.path(), &["agent", "skip", &agent, &stuck]));
    assert!(out.contains(&format!("skipped {stuck}")), "{out}");
    let out = stdout(&ahp(dir.path(), &["agent", "inbox", &agent]));
    assert!(!out.contains(&stuck) && out.contains(&next), "{out}");
    let out = stdout(&ahp(dir.path(), &["agent", "skip", &agent, &stuck]));
    assert!(out.contains("already handled"), "{out}");

    for (args, says) in [
        (vec!["agent", "skip", &agent, "msg_nope"], "messageId"),
        (vec!["agent", "skip", "agt_0123456789abcdef01234567", &next], "agent"),
        (vec!["agent", "inbox", &agent, "--limit", "201"], "201"),
    ] {
        let o = ahp(dir.path(), &args);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let out = stdout(&ahp(dir.path(), &["agent", "inbox", &agent]));
    assert!(out.contains(&next), "the refusals changed nothing: {out}");
}

/// `ahp auth issuer add|list|remove`: what is added is listed and accepted over HTTP (the
/// metadata names it); bad input is refused clearly and changes nothing; `serve` refuses a
/// public URL that is not an origin before it opens anything.
#[test]
fn auth_issuers_are_added_listed_and_removed_and_bad_ones_refused() {
    let dir = tempfile::tempdir().unwrap();
    let added = stdout(&ahp(
        dir.path(),
        &[
            "auth",
            "issuer",
            "add",
            "https://login.example.com/t",
            "--algorithm",
            "ES256",
            "--scope",
            "communication:read",
        ],
    ));
    assert_eq!(added.trim(), "https://login.example.com/t added");
    let refused: [(&[&str], &str); 5] = [
        (&["add", "http://login.example.com"], "https"),
        (&["add", "https://login.example.com/t"], "already"),
        (
            &["add", "https://b.example", "--algorithm", "HS256"],
            "the algorithms are",
        ),
        (
            &["add", "https://b.example", "--scope", "transfer:admin"],
            "not a scope",
        ),
        (&["remove", "https://nobody.example"], "no issuer"),
    ];
    for (args, needle) in refused {
        let o = ahp(dir.path(), &[&["auth", "issuer"][..], args].concat());
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let list = stdout(&ahp(dir.path(), &["auth", "issuer", "list"]));
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(
        list.contains("https://login.example.com/t") && list.contains("ES256") && list.contains("(from its metadata)"),
        "{list}"
    );
    assert_eq!(
        stdout(&ahp(
            dir.path(),
            &["auth", "issuer", "remove", "https://login.example.com/t"]
        ))
        .trim(),
        "https://login.example.com/t removed"
    );
    assert_eq!(stdout(&ahp(dir.path(), &["auth", "issuer", "list"])).lines().count(), 1);

    let fresh = tempfile::tempdir().unwrap();
    for bad in [
        "https://ahp.example/prefix",
        "ftp://ahp.example",
        "https://u:p@ahp.example",
    ] {
        let o = ahp(fresh.path(), &["serve", "--http", "127.0.0.1:0", "--public-url", bad]);
        assert!(!o.status.success(), "{bad} accepted");
        assert!(String::from_utf8_lossy(&o.stderr).contains("origin"), "{bad}");
    }
    // --allow-origin: exact origins only, and at most MAX_ORIGINS of them.
    for bad in [
        "*",
        "null",
        "https://*.example.com",
        "http://localhost:6274/inspector",
        "localhost:6274",
    ] {
        let o = ahp(fresh.path(), &["serve", "--http", "127.0.0.1:0", "--allow-origin", bad]);
        assert!(!o.status.success(), "{bad} accepted");
        assert!(String::from_utf8_lossy(&o.stderr).contains("is not an origin"), "{bad}");
    }
    let max = ahp_host::mcp::cors::MAX_ORIGINS;
    let origins: Vec<String> = (0..=max).map(|i| format!("http://localhost:{}", 6000 + i)).collect();
    // MAX_ORIGINS distinct origins and a repeat pass (the check after it, a zero --poll-every,
    // is what refuses the start) …
    let mut args = vec!["serve", "--http", "127.0.0.1:0", "--poll-every", "0s"];
    for origin in origins[..max].iter().chain(&origins[..1]) {
        args.extend(["--allow-origin", origin.as_str()]);
    }
    let err = String::from_utf8_lossy(&ahp(fresh.path(), &args).stderr).into_owned();
    assert!(err.contains("--poll-every must be longer than zero"), "{err}");
    // … one more distinct origin does not, and the repeat is not counted.
    args.extend(["--allow-origin", origins[max].as_str()]);
    let o = ahp(fresh.path(), &args);
    assert!(!o.status.success(), "{} origins accepted", max + 1);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("at most {max} --allow-origin, not {}", max + 1)),
        "{err}"
    );
    assert!(
        !fresh.path().join("ahp.db").exists(),
        "a refused serve opened no database"
    );
}
