//! An agent author's way in: `ahp agent new` writes a project that builds with the documented
//! command, and `ahp run` runs a component locally against a snapshot, turn by turn.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `ahp ARGS` with no data directory configured (`ahp run` makes a throwaway one).
fn ahp(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ahp"))
        .args(args)
        .current_dir(cwd)
        .env_remove("AHP_TRANSFER_TOKEN_SECRET")
        .env_remove("AHP_DATA_DIR")
        .output()
        .expect("run ahp")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A snapshot file the store accepts, in `dir`.
fn snapshot(dir: &Path) -> PathBuf {
    let path = dir.join("snapshot.json");
    let snapshot = serde_json::json!({
        "sourceHost": "laptop-7",
        "systemPrompt": "You echo.",
        "messageHistory": [{ "role": "user", "content": "hi" }],
        "toolState": {},
        "mcpConfig": []
    });
    std::fs::write(&path, snapshot.to_string()).unwrap();
    path
}

#[test]
fn run_activates_then_answers_each_message_in_its_own_turn() {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot(dir.path());
    let o = ahp(
        &[
            "run",
            ahp_guests::TURN_PROBER,
            "--snapshot",
            snap.to_str().unwrap(),
            "--tier",
            "nano",
            "--message",
            "first question",
            "--message",
            "second question",
        ],
        dir.path(),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("activated tr_"), "{out}");
    let first = out.find("echo: first question").expect(&out);
    let second = out.find("echo: second question").expect(&out);
    assert!(first < second, "{out}");
    assert!(
        out.contains("[turn 1]") && out.contains("[turn 2]") && !out.contains("[turn 3]"),
        "{out}"
    );
    // Each turn's fuel against the ceiling and its spend, then the event log.
    assert!(out.contains("% of the turn's ceiling"), "{out}");
    assert!(out.contains("Event log of tr_") && out.contains("activated"), "{out}");
    // Nothing outlived the run in the working directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn run_shows_why_a_turn_failed_with_its_trace_and_exits_nonzero() {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot(dir.path());
    let snap = snap.to_str().unwrap();
    // `spin` loops on the CPU until the tier's fuel ceiling stops it.
    let o = ahp(
        &[
            "run",
            ahp_guests::TURN_PROBER,
            "--snapshot",
            snap,
            "--tier",
            "nano",
            "--message",
            "spin",
        ],
        dir.path(),
    );
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("FAILED: ceiling exceeded: fuel_per_turn"), "{out}");
    assert!(out.contains("wasm trace:") && out.contains("wasm backtrace"), "{out}");
    assert!(out.contains("ceiling_exceeded"), "{out}");
    assert!(err.contains("1 of 1 turns failed"), "{err}");
    // The guest's own `err` is shown as the guest said it.
    let o = ahp(
        &["run", ahp_guests::TURN_PROBER, "--snapshot", snap, "--message", "fail"],
        dir.path(),
    );
    let (out, _) = text(&o);
    assert!(!o.status.success());
    assert!(
        out.contains("FAILED: the turn returned an error: asked to fail"),
        "{out}"
    );
    // What the guest prints and the error it returns reach the operator's terminal escaped: no
    // control sequence (a retitle, a clipboard write, a cleared screen) gets through.
    let o = ahp(
        &[
            "run",
            ahp_guests::TURN_PROBER,
            "--snapshot",
            snap,
            "--message",
            "escape",
        ],
        dir.path(),
    );
    let (out, err) = text(&o);
    assert!(!o.status.success());
    for c in ['\x1b', '\x07', '\r', '\u{202e}'] {
        assert!(
            !out.contains(c) && !err.contains(c),
            "{c:?} got through:\n{out:?}\n{err:?}"
        );
    }
    assert!(out.contains("  | title \\u{1b}]0;owned\\u{7} clipboard"), "{out}");
    assert!(out.contains("bidi \\u{202e}"), "{out}");
    assert!(
        out.contains("FAILED: the turn returned an error: \\u{1b}[31mred\\u{1b}[0m error"),
        "{out}"
    );
}

#[test]
fn run_refuses_bad_flags_and_files_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot(dir.path());
    let snap = snap.to_str().unwrap();
    let probe = ahp_guests::TURN_PROBER;
    let bad_snapshot = dir.path().join("bad.json");
    std::fs::write(&bad_snapshot, r#"{"systemPrompt": "no source host"}"#).unwrap();
    let not_wasm = dir.path().join("not.wasm");
    std::fs::write(&not_wasm, b"not a component").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["run", probe], "--snapshot"),
        (&["run", probe, "--snapshot", snap, "--tier", "huge"], "huge"),
        (&["run", probe, "--snapshot", snap, "--budget", "0"], "budget"),
        (&["run", probe, "--snapshot", "missing.json"], "missing.json"),
        (
            &["run", probe, "--snapshot", bad_snapshot.to_str().unwrap()],
            "is not a snapshot",
        ),
        (&["run", not_wasm.to_str().unwrap(), "--snapshot", snap], "registering"),
        (&["run", probe, "--snapshot", snap, "--policy", snap], "is not a policy"),
        (&["agent", "new", "Bad Name"], "invalid agent name"),
        (&["agent", "new", "ok", "--lang", "cobol"], "cobol"),
    ];
    for (args, says) in cases {
        let o = ahp(args, dir.path());
        let (out, err) = text(&o);
        assert!(!o.status.success(), "{args:?} succeeded: {out}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn agent_new_refuses_a_non_empty_directory_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let taken = dir.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("keep.txt"), "mine").unwrap();
    let o = ahp(&["agent", "new", "taken"], dir.path());
    assert!(!o.status.success());
    assert!(text(&o).1.contains("is not empty"), "{}", text(&o).1);
    let entries: Vec<_> = std::fs::read_dir(&taken).unwrap().collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(std::fs::read_to_string(taken.join("keep.txt")).unwrap(), "mine");
}

/// `ahp agent new hello-agent` builds with the README's command (offline, from the cached
/// crates, in a target directory kept warm between runs) and `ahp run` of the component
/// against its own sample snapshot answers two messages. Out of the box, with no model
/// configured, the template echoes and says so.
#[test]
fn a_new_rust_agent_builds_with_the_documented_command_and_answers() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("agent-new");
    let project = root.join("hello-agent");
    let _ = std::fs::remove_dir_all(&project);
    std::fs::create_dir_all(&root).unwrap();
    let o = ahp(&["agent", "new", "hello-agent", "--lang", "rust"], &root);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("cargo build --release --target wasm32-wasip2"), "{out}");

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", root.join("target"))
        .env("CARGO_NET_OFFLINE", "true");
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
    ] {
        build.env_remove(var);
    }
    let built = build.output().unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let wasm = root.join("target/wasm32-wasip2/release/hello_agent.wasm");
    assert!(wasm.is_file());

    let o = ahp(
        &[
            "run",
            wasm.to_str().unwrap(),
            "--snapshot",
            "snapshot.json",
            "--message",
            "Hello",
            "--message",
            "What can you do?",
        ],
        &project,
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("hello-agent resumed transfer tr_"), "{out}");
    assert!(
        out.contains("echo: Hello (no model is configured for this agent)"),
        "{out}"
    );
    assert!(
        out.contains("echo: What can you do? (no model is configured for this agent)"),
        "{out}"
    );
    thinks_with_the_policy_s_model_and_reruns(&project, wasm.to_str().unwrap(), "hello-agent");
}

/// `ahp agent new hello-py --lang python` writes a project whose README's build command
/// (run as written, from the project's directory, outside the repository) makes a component,
/// and `ahp run` of it against its own sample snapshot answers two messages, each in its own
/// turn, counting them in its checkpoint. Out of the box, with no model configured, the
/// template says so in its answer.
#[test]
fn a_new_python_agent_builds_with_the_documented_command_and_answers() {
    // The componentize-py the Python guests were built with (on `PATH`, or installed by the
    // build); without one the test says why it is skipped.
    let Ok(tool) = ahp_guests::python_guests("a_new_python_agent_builds_with_the_documented_command_and_answers")
    else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let o = ahp(&["agent", "new", "hello-py", "--lang", "python"], root.path());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let project = root.path().join("hello-py");
    let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
    // The README's one build command, the line that starts with `componentize-py`; `ahp agent
    // new` printed the same.
    let command = readme
        .lines()
        .find(|l| l.starts_with("componentize-py "))
        .unwrap_or_else(|| panic!("the README has no build command:\n{readme}"));
    assert!(out.contains(command), "{out}");
    let mut words = command.split_whitespace();
    words.next();
    let built = Command::new(tool).args(words).current_dir(&project).output().unwrap();
    assert!(
        built.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let wasm = project.join("agent.wasm");
    assert!(wasm.is_file(), "{command} wrote no agent.wasm");

    let o = ahp(
        &[
            "run",
            "agent.wasm",
            "--snapshot",
            "snapshot.json",
            "--message",
            "Hello",
            "--message",
            "What can you do?",
        ],
        &project,
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("resumed tr_") && out.contains("with 2 messages"), "{out}");
    let first = out
        .find("#1: you said 'Hello' (no model is offered to me)")
        .expect(&out);
    let second = out
        .find("#2: you said 'What can you do?' (no model is offered to me)")
        .expect(&out);
    assert!(first < second, "{out}");
    assert!(out.contains("[turn 2]") && !out.contains("[turn 3]"), "{out}");
    thinks_with_the_policy_s_model_and_reruns(&project, "agent.wasm", "hello-py");
}

/// The model a new agent's policy offers: its id is not `default`, so a template that asks
/// for `default` fails its turns.
const LOCAL_MODEL_ID: &str = "mymodel";

/// What the local model answers every call.
const LOCAL_MODEL_ANSWER: &str = "Four, says the local model.";

/// The project `name` (written by `ahp agent new`, its component at `wasm`) with a policy
/// whose only model is [`LOCAL_MODEL_ID`], a local OpenAI-protocol provider (the host's
/// scripted one): `ahp run` on a data directory answers with the model, whose request
/// carried the snapshot's system prompt, its history and the message; a second `ahp run` on
/// the same data directory works too, and loads the compiled component its first run cached.
fn thinks_with_the_policy_s_model_and_reruns(project: &Path, wasm: &str, name: &str) {
    use ahp_host::gateway::scripted::{Behaviour, ScriptedProvider};

    let (_runtime, provider) = ScriptedProvider::start_on_own_runtime().unwrap();
    provider.set_responder(std::sync::Arc::new(|_| Behaviour::text(LOCAL_MODEL_ANSWER)));
    let policy = project.join("policy.json");
    let rule = serde_json::json!({
        "models": [{
            "id": LOCAL_MODEL_ID, "provider": "openai", "endpoint": provider.openai_endpoint(),
            "providerModel": "local-model", "contextTokens": 32000, "maxOutputTokens": 256,
            "priceMicroUsdPerMTok": { "input": 1000, "output": 4000, "cacheRead": 0, "cacheWrite": 0 }
        }],
        "allowNetworks": ["127.0.0.1/32"]
    });
    std::fs::write(&policy, rule.to_string()).unwrap();
    let data = tempfile::tempdir().unwrap();
    let run = |message: &str| {
        let o = ahp(
            &[
                "run",
                wasm,
                "--snapshot",
                "snapshot.json",
                "--policy",
                "policy.json",
                "--data-dir",
                data.path().to_str().unwrap(),
                "--message",
                message,
            ],
            project,
        );
        let (out, err) = text(&o);
        assert!(o.status.success(), "{out}\n{err}");
        assert!(out.contains(&format!(": {LOCAL_MODEL_ANSWER}")), "{out}");
        assert!(!out.contains("replacing the policy"), "{out}");
        out
    };
    let compiled = || -> Vec<(PathBuf, std::time::SystemTime)> {
        let mut files: Vec<_> = std::fs::read_dir(data.path().join("compiled"))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.path(), e.metadata().unwrap().modified().unwrap())
            })
            .filter(|(p, _)| p.extension().is_some_and(|x| x == "cwasm"))
            .collect();
        files.sort();
        files
    };

    let out = run("What is 2 + 2?");
    // A Python component takes seconds to compile: the first run says so while it does.
    if wasm == "agent.wasm" {
        assert!(out.contains("compiling agent.wasm"), "{out}");
    }
    let received = provider.received();
    assert_eq!(received.len(), 1, "one model call for one message");
    assert_eq!(received[0].body["model"], "local-model");
    let texts = received[0].texts();
    let system = format!("You are {name}, a helpful agent. Answer briefly.");
    let expected = [
        system.as_str(),
        "Hello, who are you?",
        &format!("I am {name}; ask me anything."),
        "What is 2 + 2?",
    ];
    let system_of = |body: &serde_json::Value| body["messages"][0]["content"].as_str().unwrap_or_default().to_owned();
    assert_eq!(system_of(&received[0].body), system, "{texts:?}");
    for want in expected {
        assert!(
            texts.iter().any(|t| t == want),
            "the model did not see {want:?}: {texts:?}"
        );
    }
    let first = compiled();
    assert_eq!(first.len(), 1, "{first:?}");

    // The same command again: a new conversation on the same data directory, and the compiled
    // component loaded, not compiled again.
    let out = run("And 3 + 3?");
    assert!(!out.contains("compiling"), "{out}");
    assert_eq!(compiled(), first);
    let received = provider.received();
    assert_eq!(received.len(), 2);
    let texts = received[1].texts();
    assert!(texts.iter().any(|t| t == "And 3 + 3?"), "{texts:?}");
    assert!(
        !texts.iter().any(|t| t == "What is 2 + 2?"),
        "a rerun opens its own conversation: {texts:?}"
    );

    // Questions the provider always fails on — it floods, or answers without usage — never
    // silence the agent: each is tried twice, then answered with the SDK's failure notice, and
    // the question after them is answered.
    provider.set_responder(std::sync::Arc::new(|r| match r.texts().last().map(String::as_str) {
        Some("poison: flood") => Behaviour::Flood { bytes: 64 << 20 },
        Some("poison: no usage") => Behaviour::NoUsage,
        _ => Behaviour::text(LOCAL_MODEL_ANSWER),
    }));
    let o = ahp(
        &[
            "run",
            wasm,
            "--snapshot",
            "snapshot.json",
            "--policy",
            "policy.json",
            "--data-dir",
            data.path().to_str().unwrap(),
            "--message",
            "poison: flood",
            "--message",
            "poison: no usage",
            "--message",
            "What now?",
        ],
        project,
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert_eq!(
        out.matches("Sorry, I could not answer this message: ").count(),
        2,
        "{out}"
    );
    assert!(out.contains(&format!(": {LOCAL_MODEL_ANSWER}")), "{out}");
    let tried = |poison: &str| {
        provider
            .received()
            .iter()
            .filter(|r| r.texts().last().is_some_and(|t| t == poison))
            .count()
    };
    assert_eq!((tried("poison: flood"), tried("poison: no usage")), (2, 2), "{out}");

    // A provider that hangs on a question: each try ends with the model call's deadline, before
    // the turn's wall clock (14.5 s of the small tier's 15 s); the second try's turn has no time
    // left for the next question, so its end wakes the agent again, and that turn answers it.
    provider.set_responder(std::sync::Arc::new(|r| match r.texts().last().map(String::as_str) {
        Some("poison: hang") => Behaviour::Hang,
        _ => Behaviour::text(LOCAL_MODEL_ANSWER),
    }));
    let o = ahp(
        &[
            "run",
            wasm,
            "--snapshot",
            "snapshot.json",
            "--policy",
            "policy.json",
            "--data-dir",
            data.path().to_str().unwrap(),
            "--message",
            "poison: hang",
            "--message",
            "And now?",
        ],
        project,
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert_eq!(
        out.matches("Sorry, I could not answer this message: ").count(),
        1,
        "{out}"
    );
    assert!(out.contains(&format!(": {LOCAL_MODEL_ANSWER}")), "{out}");
    assert_eq!(tried("poison: hang"), 2, "{out}");
}
