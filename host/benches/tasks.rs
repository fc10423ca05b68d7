//! What a durable MCP task costs over the synchronous call, against the real `ahp serve --http`
//! with a real agent (the turn-prober, which answers each question in a turn of its sandbox),
//! in one run:
//!
//! - `ask_agent/sync`: `tools/call ask_agent` without the tasks extension — the server posts the
//!   question and waits for the agent's reply itself: latency until the reply is in hand.
//! - `ask_agent/task`: the same call declaring the extension — latency until the task is in
//!   hand (`created`), then until a client polling `tasks/get` every 10 ms sees it completed
//!   with the reply (`completed`).
//! - `activate/sync` and `activate/task`: the same for `activate` (a fresh transfer each time,
//!   snapshotted, provisioned and pushed outside the timing).
//!
//! Cases alternate (sync, task, sync, …) so both see the same machine. Run:
//! `cargo bench -p ahp-host --bench tasks` (`ASKS=…`, `ACTIVATIONS=…` change the counts).

mod common;

use std::time::{Duration, Instant};

use ahp_store::{TokenKey, TokenScope};
use common::served::serve;
use serde_json::{Value, json};

const SECRET: &str = "bench-tasks-secret-bench-tasks-secret-0123";

/// One stateless JSON-RPC request; its response message.
async fn rpc(client: &reqwest::Client, url: &str, method: &str, name: &str, mut params: Value, tasks: bool) -> Value {
    let caps = if tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": caps,
    });
    let text = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method)
        .header("Mcp-Name", name)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .unwrap_or(text.as_str())
        .to_owned();
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

async fn call(client: &reqwest::Client, url: &str, tool: &str, args: Value, tasks: bool) -> Value {
    let r = rpc(
        client,
        url,
        "tools/call",
        tool,
        json!({"name": tool, "arguments": args}),
        tasks,
    )
    .await;
    assert!(
        r["result"]["isError"] != true && r.get("error").is_none(),
        "{tool}: {r}"
    );
    r["result"].clone()
}

/// Polls `tasks/get` every 10 ms until the task ends; its result.
async fn completed(client: &reqwest::Client, url: &str, task: &str) -> Value {
    loop {
        let r = rpc(client, url, "tasks/get", task, json!({"taskId": task}), true).await;
        if r["result"]["status"] != "working" {
            assert_eq!(r["result"]["status"], "completed", "{r}");
            return r["result"]["result"].clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn token(transfer: &str, scope: TokenScope) -> String {
    let key = TokenKey::new(SECRET.as_bytes()).unwrap();
    let now = ahp_store::Clock::now(&ahp_store::SystemClock);
    ahp_store::issue_transfer_token(&key, transfer, scope, now, ahp_store::DEFAULT_TOKEN_TTL).unwrap()
}

/// A pushed turn-prober transfer; its id.
async fn pushed(client: &reqwest::Client, mcp: &str) -> String {
    let snap = ahp_host::testing::snapshot(1, ahp_host::testing::inventory());
    let staged = call(
        client,
        mcp,
        "snapshot_state",
        serde_json::to_value(&snap).unwrap(),
        false,
    )
    .await;
    let t = staged["structuredContent"]["transferId"].as_str().unwrap().to_owned();
    let provision = json!({"transferId": t, "token": token(&t, TokenScope::ProvisionRuntime),
                           "tier": "small", "budgetMicroUsd": 5_000_000, "component": "turn-prober"});
    call(client, mcp, "provision_runtime", provision, false).await;
    call(client, mcp, "push_state", json!({"transferId": t}), false).await;
    t
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |q: f64| ms(samples[((samples.len() - 1) as f64 * q).round() as usize]);
    println!(
        "{name:<28} n={:<4} p50 {:>8.2} ms   p90 {:>8.2} ms   max {:>8.2} ms",
        samples.len(),
        at(0.5),
        at(0.9),
        at(1.0)
    );
}

fn count(var: &str, default: usize) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    // `cargo test --benches` runs every bench once with `--test`: keep that cheap.
    let quick = std::env::args().any(|a| a == "--test");
    let (asks, activations) = if quick {
        (2, 1)
    } else {
        (count("ASKS", 100), count("ACTIVATIONS", 30))
    };
    let dir = tempfile::tempdir().unwrap();
    ahp_host::testing::policy().save(dir.path()).unwrap();
    std::fs::create_dir_all(dir.path().join("vault")).unwrap();
    std::fs::write(dir.path().join("vault/inventory-api"), "sk-bench").unwrap();
    let env = [("AHP_TRANSFER_TOKEN_SECRET", SECRET)];
    common::served::ahp(
        dir.path(),
        &env,
        &["component", "add", ahp_guests::TURN_PROBER, "--name", "turn-prober"],
    );
    let (_server, mcp) = serve(dir.path(), &env, &["--auth", "none"]);
    let conv = format!("{mcp}/conversations");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = reqwest::Client::new();
        let t = pushed(&client, &mcp).await;
        let a = call(
            &client,
            &mcp,
            "activate",
            json!({"transferId": t, "token": token(&t, TokenScope::Activate)}),
            false,
        )
        .await;
        let agent = a["structuredContent"]["agentId"].as_str().unwrap().to_owned();
        let cv = call(
            &client,
            &conv,
            "create_conversation",
            json!({"title": "bench", "agentIds": [agent], "idempotencyKey": "open"}),
            false,
        )
        .await["structuredContent"]["conversationId"]
            .as_str()
            .unwrap()
            .to_owned();

        let (mut sync, mut created, mut done) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..asks {
            let ask = |k: String| json!({"conversationId": cv, "body": format!("question {k}"), "idempotencyKey": k});
            let t0 = Instant::now();
            let r = call(&client, &conv, "ask_agent", ask(format!("s{i}")), false).await;
            assert!(r["structuredContent"]["reply"].is_object(), "{r}");
            sync.push(t0.elapsed());
            let t0 = Instant::now();
            let r = call(&client, &conv, "ask_agent", ask(format!("t{i}")), true).await;
            created.push(t0.elapsed());
            let task = r["taskId"].as_str().unwrap().to_owned();
            let result = completed(&client, &conv, &task).await;
            assert!(result["structuredContent"]["reply"].is_object(), "{result}");
            done.push(t0.elapsed());
        }
        report("ask_agent/sync", sync);
        report("ask_agent/task created", created);
        report("ask_agent/task completed", done);

        let (mut sync, mut created, mut done) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..activations {
            let t = pushed(&client, &mcp).await;
            let t0 = Instant::now();
            let args = json!({"transferId": t, "token": token(&t, TokenScope::Activate)});
            let r = call(&client, &mcp, "activate", args, false).await;
            assert_eq!(r["structuredContent"]["status"], "active");
            sync.push(t0.elapsed());
            let t = pushed(&client, &mcp).await;
            let t0 = Instant::now();
            let args = json!({"transferId": t, "token": token(&t, TokenScope::Activate)});
            let r = call(&client, &mcp, "activate", args, true).await;
            created.push(t0.elapsed());
            let task = r["taskId"].as_str().unwrap().to_owned();
            let result = completed(&client, &mcp, &task).await;
            assert_eq!(result["structuredContent"]["status"], "active", "{result}");
            done.push(t0.elapsed());
        }
        report("activate/sync", sync);
        report("activate/task created", created);
        report("activate/task completed", done);
    });
}
