//! The delegation tools against the real `ahp serve` over HTTP (`/mcp/conversations`): every
//! tool's happy path with its result checked against the output schema `tools/list` publishes,
//! idempotent replay, each scope's 403, existence hiding byte for byte between two keys, and the
//! bounds at the limit and one past it, each refusal changing nothing.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::mcp_conversations::{Surface, ahp, key, message, post, serve};

const FULL: [&str; 2] = ["communication:read", "communication:manage"];

/// The twelve delegation tools.
const TOOLS: [&str; 12] = [
    "create_agent_task",
    "list_agent_tasks",
    "get_agent_task",
    "cancel_agent_task",
    "complete_agent_task_attempt",
    "register_agent_wait",
    "read_agent_wait",
    "cancel_agent_wait",
    "create_goal",
    "get_goal",
    "checkpoint_goal",
    "complete_goal",
];

/// Each tool's `outputSchema`, from `tools/list`.
async fn output_schemas(url: &str, key: &str) -> HashMap<String, Value> {
    let r = post(url, key, "tools/list", None, json!({})).await;
    assert_eq!(r.status(), 200);
    let m = message(&r.text().await.unwrap());
    m["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_owned(), t["outputSchema"].clone()))
        .collect()
}

/// Whether `v` conforms to `schema` (the subset schemars emits: `$ref` into `$defs`, `type`
/// (possibly a list), `properties`, `required`, `items`, `anyOf`/`oneOf`, `enum`, `const`,
/// `minimum`). Stricter than JSON Schema in one way that matters here: every property of an
/// object must be declared, so a result field missing from the schema fails.
fn conforms(root: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.strip_prefix("#/$defs/").ok_or_else(|| format!("{at}: ref {r}"))?;
        return conforms(root, &root["$defs"][name], v, at);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = schema[key].as_array() {
            return alts
                .iter()
                .find_map(|s| conforms(root, s, v, at).ok())
                .ok_or_else(|| format!("{at}: {v} matches no alternative of {key}"));
        }
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(v)
    {
        return Err(format!("{at}: {v} not in {allowed:?}"));
    }
    if let Some(c) = schema.get("const")
        && c != v
    {
        return Err(format!("{at}: {v} is not {c}"));
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let is = |t: &str| match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        _ => false,
    };
    if !types.is_empty() && !types.iter().any(|t| is(t)) {
        return Err(format!("{at}: {v} is not {types:?}"));
    }
    if let (Some(min), Some(n)) = (schema["minimum"].as_f64(), v.as_f64())
        && n < min
    {
        return Err(format!("{at}: {n} < {min}"));
    }
    if let Some(o) = v.as_object() {
        let props = schema["properties"].as_object();
        for name in schema["required"].as_array().into_iter().flatten() {
            let name = name.as_str().unwrap();
            if !o.contains_key(name) {
                return Err(format!("{at}: required {name} missing"));
            }
        }
        for (k, x) in o {
            let s = props
                .and_then(|p| p.get(k))
                .ok_or_else(|| format!("{at}: {k} is not in the schema"))?;
            conforms(root, s, x, &format!("{at}.{k}"))?;
        }
    }
    if let (Some(items), Some(a)) = (schema.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            conforms(root, items, x, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// A surface whose every successful result is checked against its tool's output schema.
pub(crate) struct Checked {
    s: Surface,
    schemas: HashMap<String, Value>,
}

impl Checked {
    pub(crate) async fn new(url: &str, key: &str) -> Self {
        Self {
            s: Surface::Http {
                url: url.to_owned(),
                key: key.to_owned(),
            },
            schemas: output_schemas(url, key).await,
        }
    }

    pub(crate) async fn ok(&self, tool: &str, args: Value) -> Value {
        let v = self.s.ok(tool, args).await;
        let schema = &self.schemas[tool];
        assert!(schema.is_object(), "{tool} has no outputSchema");
        conforms(schema, schema, &v, tool).unwrap_or_else(|e| panic!("{tool}: {e}\n{v:#}"));
        v
    }

    async fn refused(&self, tool: &str, args: Value) -> String {
        self.s.refused(tool, args).await
    }
}

/// `base` with the fields of `extra` added.
fn with(base: &Value, extra: Value) -> Value {
    let mut v = base.clone();
    v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    v
}

fn id(v: &Value, field: &str) -> String {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("no {field} in {v}"))
        .to_owned()
}

/// An agent with an attached endpoint: its `agentId` and the acting arguments.
async fn agent(s: &Checked, handle: &str) -> (String, Value) {
    let a =
        s.s.ok(
            "create_agent_identity",
            json!({"handle": handle, "displayName": handle, "idempotencyKey": format!("agent-{handle}")}),
        )
        .await;
    let agent = id(&a, "agentId");
    let ep =
        s.s.ok(
            "attach_agent_endpoint",
            json!({"agentId": agent, "leaseSeconds": 600, "idempotencyKey": format!("ep-{handle}")}),
        )
        .await;
    let acting = json!({"agentId": agent, "endpointId": id(&ep, "endpointId"), "controllerGeneration": ep["controllerGeneration"]});
    (agent, acting)
}

#[tokio::test]
async fn every_delegation_tool_over_http_matches_its_output_schema() {
    let dir = tempfile::tempdir().unwrap();
    let alice = key(dir.path(), "alice", &FULL);
    let server = serve(dir.path());
    let url = format!("{}/conversations", server.url);
    let s = Checked::new(&url, &alice).await;
    assert_eq!(s.schemas.len(), 38, "{:?}", s.schemas.keys());
    for t in TOOLS {
        assert!(s.schemas.contains_key(t), "{t} is not listed");
    }
    let (boss, boss_acts) = agent(&s, "boss").await;
    let (worker, worker_acts) = agent(&s, "worker").await;

    // A goal the boss controls, created by the owner as a human.
    let goal = s
        .ok(
            "create_goal",
            json!({"title": "Q3 plan", "completionIntent": "a number", "controllerAgentId": boss,
                   "plan": [{"title": "ask", "status": "in_progress"}, {"title": "sum", "status": "pending"}],
                   "idempotencyKey": "g-1"}),
        )
        .await;
    let goal_id = id(&goal, "goalId");
    assert_eq!(
        (goal["goal"]["state"].as_str(), goal["goal"]["creatorAgentId"].is_null()),
        (Some("active"), true)
    );

    // The boss hands the worker a task of the goal: its attempt starts at once.
    let create = with(
        &boss_acts,
        json!({"assigneeAgentId": worker, "title": "forecast", "instructions": "sum 1 and 2",
               "goalId": goal_id, "idempotencyKey": "t-1"}),
    );
    let t1 = s.ok("create_agent_task", create.clone()).await;
    let task = id(&t1, "taskId");
    assert!(task.starts_with("tsk_"));
    assert_eq!(
        (
            t1["replayed"].as_bool(),
            t1["stateChanged"].as_bool(),
            t1["task"]["state"].as_str()
        ),
        (Some(false), Some(true), Some("running"))
    );
    assert_eq!(t1["task"]["creatorAgentId"], boss.as_str());
    assert_eq!(t1["task"]["goalId"], goal_id.as_str());
    let attempt = &t1["task"]["currentAttempt"];
    assert_eq!(attempt["assigneeAgentId"], worker.as_str());
    assert!(attempt["wakeId"].as_str().unwrap().starts_with("wk_"));
    let attempt_id = id(attempt, "attemptId");
    // Idempotent replay: the same task; the key with another request is a conflict.
    let again = s.ok("create_agent_task", create.clone()).await;
    assert_eq!(
        (again["replayed"].as_bool(), again["taskId"].as_str()),
        (Some(true), Some(task.as_str()))
    );
    let mut reworded = create.clone();
    reworded["instructions"] = json!("something else");
    assert_eq!(s.refused("create_agent_task", reworded).await, "conflict");

    // A second task, not started, created by the owner.
    let t2 = s
        .ok(
            "create_agent_task",
            json!({"assigneeAgentId": worker, "title": "later", "instructions": "wait", "start": false,
                   "idempotencyKey": "t-2"}),
        )
        .await;
    let task2 = id(&t2, "taskId");
    assert_eq!(t2["task"]["state"], "open");
    assert!(t2["task"]["currentAttempt"].is_null() && t2["task"]["creatorAgentId"].is_null());

    // The boss waits for the first, scoped to its goal.
    let wait = s
        .ok(
            "register_agent_wait",
            with(
                &boss_acts,
                json!({"sources": [task], "mode": "all", "goalId": goal_id, "idempotencyKey": "w-1"}),
            ),
        )
        .await;
    let wait_id = id(&wait, "waitId");
    assert_eq!(
        (wait["wait"]["state"].as_str(), wait["wait"]["agentId"].as_str()),
        (Some("waiting"), Some(boss.as_str()))
    );

    // Listings: the owner sees both, filtered by state; the worker sees both it is assigned.
    let all = s.ok("list_agent_tasks", json!({})).await;
    assert_eq!(all["tasks"].as_array().unwrap().len(), 2);
    let running = s.ok("list_agent_tasks", json!({"state": "running"})).await;
    assert_eq!(running["tasks"][0]["taskId"], task.as_str());
    assert_eq!(running["tasks"].as_array().unwrap().len(), 1);
    let assigned = s
        .ok(
            "list_agent_tasks",
            with(&worker_acts, json!({"assigneeAgentId": worker, "limit": 1})),
        )
        .await;
    assert_eq!(assigned["tasks"].as_array().unwrap().len(), 1);
    assert!(assigned["nextAfter"].is_string());
    // The boss created only the first.
    let created = s.ok("list_agent_tasks", boss_acts.clone()).await;
    assert_eq!(created["tasks"].as_array().unwrap().len(), 1);

    // The worker reads its task, then finishes the attempt; an exact retry is a replay.
    let read = s
        .ok("get_agent_task", with(&worker_acts, json!({"taskId": task})))
        .await;
    assert_eq!(read["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(read["task"]["instructions"], "sum 1 and 2");
    // The assignee may not cancel; it fails the attempt instead.
    assert_eq!(
        s.refused("cancel_agent_task", with(&worker_acts, json!({"taskId": task})))
            .await,
        "not_permitted"
    );
    let finish = with(
        &worker_acts,
        json!({"attemptId": attempt_id, "outcome": "succeeded", "result": "3"}),
    );
    let done = s.ok("complete_agent_task_attempt", finish.clone()).await;
    assert_eq!(
        (
            done["task"]["state"].as_str(),
            done["task"]["result"].as_str(),
            done["stateChanged"].as_bool()
        ),
        (Some("succeeded"), Some("3"), Some(true))
    );
    let retry = s.ok("complete_agent_task_attempt", finish.clone()).await;
    assert_eq!(
        (retry["replayed"].as_bool(), retry["stateChanged"].as_bool()),
        (Some(true), Some(false))
    );
    let mut other = finish.clone();
    other["result"] = json!("4");
    assert_eq!(s.refused("complete_agent_task_attempt", other).await, "invalid_state");
    // The boss's wait fired its one wake.
    let fired = s
        .ok("read_agent_wait", with(&boss_acts, json!({"waitId": wait_id})))
        .await;
    assert_eq!(fired["wait"]["state"], "triggered");
    assert!(fired["wait"]["wakeId"].as_str().unwrap().starts_with("wk_"));
    assert_eq!(fired["wait"]["sources"][0]["taskState"], "succeeded");

    // A wait over the second task, cancelled (desired-state), then the task cancelled.
    let w2 = s
        .ok(
            "register_agent_wait",
            with(
                &worker_acts,
                json!({"sources": [task2], "mode": "any", "idempotencyKey": "w-2"}),
            ),
        )
        .await;
    let w2_id = id(&w2, "waitId");
    let cancel = with(&worker_acts, json!({"waitId": w2_id}));
    let c = s.ok("cancel_agent_wait", cancel.clone()).await;
    assert_eq!(
        (c["wait"]["state"].as_str(), c["stateChanged"].as_bool()),
        (Some("cancelled"), Some(true))
    );
    assert_eq!(s.ok("cancel_agent_wait", cancel).await["stateChanged"], false);
    let cancelled = s.ok("cancel_agent_task", json!({"taskId": task2})).await;
    assert_eq!(cancelled["task"]["state"], "cancelled");
    assert_eq!(
        s.ok("cancel_agent_task", json!({"taskId": task2})).await["stateChanged"],
        false
    );

    // The goal: read, checkpoint (revision-fenced), complete.
    let g = s.ok("get_goal", with(&boss_acts, json!({"goalId": goal_id}))).await;
    let revision = g["goal"]["revision"].as_u64().unwrap();
    let step = json!([{"title": "ask", "status": "done"}, {"title": "sum", "status": "done"}]);
    let checkpoint = with(
        &boss_acts,
        json!({"goalId": goal_id, "expectedRevision": revision, "plan": step, "note": "both done", "idempotencyKey": "cp-1"}),
    );
    let cp = s.ok("checkpoint_goal", checkpoint.clone()).await;
    assert_eq!(cp["goal"]["revision"].as_u64(), Some(revision + 1));
    assert_eq!(cp["goal"]["plan"][1]["status"], "done");
    assert_eq!(s.ok("checkpoint_goal", checkpoint.clone()).await["replayed"], true);
    let mut stale = checkpoint.clone();
    stale["idempotencyKey"] = json!("cp-2");
    assert_eq!(s.refused("checkpoint_goal", stale).await, "conflict");
    let completed = s
        .ok("complete_goal", with(&boss_acts, json!({"goalId": goal_id})))
        .await;
    assert_eq!(completed["goal"]["state"], "completed");
    assert!(completed["goal"]["closedAt"].is_string());

    // The operator's CLI reads what the tools wrote.
    let list = ahp(dir.path(), &["task", "list"]);
    assert!(list.contains(&task) && list.contains(&task2), "{list}");
    let succeeded = ahp(dir.path(), &["task", "list", "--state", "succeeded"]);
    assert!(succeeded.contains(&task) && !succeeded.contains(&task2), "{succeeded}");
    let mine = ahp(dir.path(), &["task", "list", "--principal", "alice"]);
    assert!(mine.contains(&task), "{mine}");
    let shown = ahp(dir.path(), &["task", "show", &task]);
    assert!(
        shown.contains(&attempt_id) && shown.contains("sum 1 and 2") && shown.contains(&boss),
        "{shown}"
    );
    let goals = ahp(dir.path(), &["goal", "show", &goal_id]);
    assert!(
        goals.contains("both done") && goals.contains(&task) && goals.contains("completed"),
        "{goals}"
    );
    assert!(ahp(dir.path(), &["goal", "list"]).contains(&goal_id));
}

#[tokio::test]
async fn each_delegation_scope_is_its_own_403() {
    let dir = tempfile::tempdir().unwrap();
    let reader = key(dir.path(), "reader", &["communication:read"]);
    let manager = key(dir.path(), "manager", &["communication:manage"]);
    let server = serve(dir.path());
    let url = format!("{}/conversations", server.url);
    let missing = |p: &str| format!("{p}{}", "0".repeat(24));
    let writes = [
        (
            "create_agent_task",
            json!({"assigneeAgentId": missing("agt_"), "title": "t", "instructions": "i", "idempotencyKey": "k"}),
        ),
        ("cancel_agent_task", json!({"taskId": missing("tsk_")})),
        (
            "complete_agent_task_attempt",
            json!({"agentId": missing("agt_"), "endpointId": missing("ep_"), "controllerGeneration": 1,
                   "attemptId": missing("tka_"), "outcome": "failed"}),
        ),
        (
            "register_agent_wait",
            json!({"agentId": missing("agt_"), "endpointId": missing("ep_"), "controllerGeneration": 1,
                   "sources": [missing("tsk_")], "mode": "all", "idempotencyKey": "k"}),
        ),
        ("cancel_agent_wait", json!({"waitId": missing("wait_")})),
        (
            "create_goal",
            json!({"title": "t", "completionIntent": "c", "idempotencyKey": "k"}),
        ),
        (
            "checkpoint_goal",
            json!({"goalId": missing("goal_"), "expectedRevision": 1, "plan": [], "idempotencyKey": "k"}),
        ),
        ("complete_goal", json!({"goalId": missing("goal_")})),
    ];
    let reads = [
        ("list_agent_tasks", json!({})),
        ("get_agent_task", json!({"taskId": missing("tsk_")})),
        ("read_agent_wait", json!({"waitId": missing("wait_")})),
        ("get_goal", json!({"goalId": missing("goal_")})),
    ];
    for (writes, k, scope) in [
        (&writes[..], &reader, "communication:manage"),
        (&reads[..], &manager, "communication:read"),
    ] {
        for (tool, args) in writes {
            let r = post(
                &url,
                k,
                "tools/call",
                Some(tool),
                json!({"name": tool, "arguments": args}),
            )
            .await;
            assert_eq!(r.status(), 403, "{tool}");
            let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
            assert!(
                challenge.contains("insufficient_scope") && challenge.contains(scope),
                "{tool}: {challenge}"
            );
        }
    }
    // With the scope, the same calls reach the tool (a refusal from the store, not a 403).
    let r = post(
        &url,
        &reader,
        "tools/call",
        Some("get_agent_task"),
        json!({"name": "get_agent_task", "arguments": reads[1].1}),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        message(&r.text().await.unwrap())["result"]["structuredContent"]["kind"],
        "not_found"
    );
}

#[tokio::test]
async fn another_owners_ids_and_random_ids_are_byte_identical_over_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let alice = key(dir.path(), "alice", &FULL);
    let bob = key(dir.path(), "bob", &FULL);
    let server = serve(dir.path());
    let url = format!("{}/conversations", server.url);
    let a = Checked::new(&url, &alice).await;
    let b = Checked::new(&url, &bob).await;
    let (worker, worker_acts) = agent(&a, "worker").await;
    let (bob_agent, bob_acts) = agent(&b, "bob").await;
    let goal = id(
        &a.ok(
            "create_goal",
            json!({"title": "g", "completionIntent": "c", "controllerAgentId": worker, "idempotencyKey": "g"}),
        )
        .await,
        "goalId",
    );
    let t = a
        .ok(
            "create_agent_task",
            json!({"assigneeAgentId": worker, "title": "t", "instructions": "i", "goalId": goal, "idempotencyKey": "t"}),
        )
        .await;
    let task = id(&t, "taskId");
    let attempt = id(&t["task"]["currentAttempt"], "attemptId");
    let wait = id(
        &a.ok(
            "register_agent_wait",
            with(
                &worker_acts,
                json!({"sources": [task], "mode": "any", "idempotencyKey": "w"}),
            ),
        )
        .await,
        "waitId",
    );
    let missing = |p: &str| format!("{p}{}", "0".repeat(24));
    let probes = |agent: &str, task: &str, attempt: &str, wait: &str, goal: &str| {
        vec![
            ("get_agent_task", json!({"taskId": task})),
            ("cancel_agent_task", json!({"taskId": task})),
            (
                "create_agent_task",
                json!({"assigneeAgentId": agent, "title": "t", "instructions": "i", "idempotencyKey": format!("p-{agent}")}),
            ),
            (
                "create_agent_task",
                json!({"assigneeAgentId": bob_agent, "title": "t", "instructions": "i", "goalId": goal,
                       "idempotencyKey": format!("q-{goal}")}),
            ),
            (
                "complete_agent_task_attempt",
                with(
                    &bob_acts,
                    json!({"attemptId": attempt, "outcome": "succeeded", "result": "x"}),
                ),
            ),
            (
                "register_agent_wait",
                with(
                    &bob_acts,
                    json!({"sources": [task], "mode": "all", "idempotencyKey": format!("w-{task}")}),
                ),
            ),
            ("read_agent_wait", json!({"waitId": wait})),
            ("cancel_agent_wait", json!({"waitId": wait})),
            ("get_goal", json!({"goalId": goal})),
            (
                "checkpoint_goal",
                json!({"goalId": goal, "expectedRevision": 1, "plan": [], "idempotencyKey": format!("c-{goal}")}),
            ),
            ("complete_goal", json!({"goalId": goal})),
        ]
    };
    let foreign = probes(&worker, &task, &attempt, &wait, &goal);
    let absent = probes(
        &missing("agt_"),
        &missing("tsk_"),
        &missing("tka_"),
        &missing("wait_"),
        &missing("goal_"),
    );
    for ((tool, f), (_, m)) in foreign.into_iter().zip(absent) {
        let (url, bob) = (&url, &bob);
        let body = move |args: Value| async move {
            let r = post(
                url,
                bob,
                "tools/call",
                Some(tool),
                json!({"name": tool, "arguments": args}),
            )
            .await;
            assert_eq!(r.status(), 200);
            let text = r.text().await.unwrap();
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .find(|d| !d.is_empty())
                .unwrap_or(&text)
                .to_owned()
        };
        let (f, m) = (body(f).await, body(m).await);
        assert_eq!(f, m, "{tool}: another owner's id and a random one differ");
        assert_eq!(
            message(&f)["result"]["structuredContent"]["kind"],
            "not_found",
            "{tool}: {f}"
        );
    }
    // Bob's listing shows none of Alice's tasks; Alice's task is untouched.
    assert_eq!(b.ok("list_agent_tasks", json!({})).await["tasks"], json!([]));
    let still = a.ok("get_agent_task", json!({"taskId": task})).await;
    assert_eq!(still["task"]["state"], "running");
}

#[tokio::test]
async fn delegation_bounds_at_the_limit_and_one_past_it_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let alice = key(dir.path(), "alice", &FULL);
    let server = serve(dir.path());
    let url = format!("{}/conversations", server.url);
    let s = Checked::new(&url, &alice).await;
    let (worker, worker_acts) = agent(&s, "worker").await;
    let task = |instructions: String, key: &str| json!({"assigneeAgentId": worker, "title": "t", "instructions": instructions, "start": false, "idempotencyKey": key});
    let tasks = || async { s.ok("list_agent_tasks", json!({"limit": 200})).await };
    let goals = || ahp(dir.path(), &["goal", "list"]);

    // Instructions: 64 KiB is accepted, one byte more is refused and creates nothing.
    let at = s.ok("create_agent_task", task("x".repeat(64 * 1024), "at")).await;
    assert_eq!(at["task"]["instructions"].as_str().map(str::len), Some(64 * 1024));
    let before = tasks().await;
    assert_eq!(
        s.refused("create_agent_task", task("x".repeat(64 * 1024 + 1), "past"))
            .await,
        "invalid"
    );
    assert_eq!(
        s.refused("create_agent_task", task(String::new(), "empty")).await,
        "invalid"
    );
    assert_eq!(tasks().await, before);

    // Sources: 8 tasks are accepted, 9 and 0 are refused.
    let mut ids = vec![id(&at, "taskId")];
    for i in 0..8 {
        ids.push(id(
            &s.ok("create_agent_task", task("i".into(), &format!("t{i}"))).await,
            "taskId",
        ));
    }
    let before = tasks().await;
    let wait = |sources: &[String], key: &str| {
        with(
            &worker_acts,
            json!({"sources": sources, "mode": "all", "idempotencyKey": key}),
        )
    };
    for (sources, key) in [(&ids[..9], "nine"), (&ids[..0], "none")] {
        assert_eq!(s.refused("register_agent_wait", wait(sources, key)).await, "invalid");
    }
    assert_eq!(tasks().await, before);
    // A refused key was never recorded: it registers now.
    let eight = s.ok("register_agent_wait", wait(&ids[..8], "nine")).await;
    assert_eq!(eight["wait"]["sources"].as_array().unwrap().len(), 8);
    assert_eq!(eight["replayed"], false);

    // Plan steps: 32 are accepted, 33 refused (at creation and at a checkpoint).
    let plan = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({"title": format!("step {i}"), "status": "pending"}))
            .collect()
    };
    let goal =
        |n: usize, key: &str| json!({"title": "g", "completionIntent": "c", "plan": plan(n), "idempotencyKey": key});
    let g = s.ok("create_goal", goal(32, "g32")).await;
    assert_eq!(g["goal"]["plan"].as_array().unwrap().len(), 32);
    let goal_id = id(&g, "goalId");
    let listed = goals();
    assert_eq!(s.refused("create_goal", goal(33, "g33")).await, "invalid");
    assert_eq!(goals(), listed);
    let checkpoint = |n: usize, key: &str| json!({"goalId": goal_id, "expectedRevision": g["goal"]["revision"], "plan": plan(n), "idempotencyKey": key});
    assert_eq!(s.refused("checkpoint_goal", checkpoint(33, "c33")).await, "invalid");
    assert_eq!(s.ok("get_goal", json!({"goalId": goal_id})).await["goal"], g["goal"]);
    let cp = s.ok("checkpoint_goal", checkpoint(32, "c32")).await;
    assert_eq!(cp["goal"]["revision"], g["goal"]["revision"].as_u64().unwrap() + 1);
}

#[test]
fn the_schema_check_refuses_an_undeclared_field_a_wrong_type_and_a_missing_one() {
    let schema = json!({
        "type": "object",
        "required": ["taskId"],
        "properties": {
            "taskId": {"type": "string"},
            "attempt": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}
        },
        "$defs": {"A": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}}
    });
    let ok = |v: Value| conforms(&schema, &schema, &v, "r");
    assert!(ok(json!({"taskId": "t", "attempt": {"n": 1}})).is_ok());
    assert!(ok(json!({"taskId": "t", "attempt": null})).is_ok());
    assert!(ok(json!({"taskId": "t", "extra": 1})).is_err());
    assert!(ok(json!({"taskId": 1})).is_err());
    assert!(ok(json!({"attempt": null})).is_err());
    assert!(ok(json!({"taskId": "t", "attempt": {"n": -1}})).is_err());
}
