//! `post_message` over MCP Streamable HTTP against the real `ahp serve --http`, beside the same
//! post straight into the store in this process, in one run.
//!
//! - `http_sequential`: one client, one `tools/call post_message` at a time (stateless
//!   2026-07-28 era, bearer key): p50 and p99 latency.
//! - `http_16_clients`: sixteen concurrent clients posting to the same conversation: p50
//!   latency and posts per second.
//! - `in_process`: `Store::post_message` on an identically configured file database in this
//!   process: the MCP layer's cost is `http_sequential` minus this.
//! - `raw_sqlite_commit`: one single-row commit on the same disk — the fsync price right now.
//!
//! Every post is a human message to a conversation with one agent participant: one message,
//! one delivery, one coalesced wake, one audit event and one idempotency record, fsynced.
//!
//! Run: `cargo bench -p ahp-host --bench conversations` (`POSTS=…` changes the count per case).

mod common;

use std::time::{Duration, Instant};

use ahp_store::Store;
use ahp_store::conversation::{Acting, AgentCard, Caller, IdempotencyKey, NewConversation, NewMessage};
use common::served::{ahp, serve};
use serde_json::{Value, json};

async fn call(client: &reqwest::Client, url: &str, key: &str, tool: &str, args: Value) -> Value {
    common::mcp_call(client, url, Some(key), tool, args).await
}

/// One human post; returns its latency.
async fn post(client: reqwest::Client, url: String, key: String, cv: String, i: String) -> Duration {
    let t0 = Instant::now();
    let r = call(
        &client,
        &url,
        &key,
        "post_message",
        json!({"conversationId": cv, "body": "How much stock for Q3?", "idempotencyKey": i}),
    )
    .await;
    assert_eq!(r["stateChanged"], true);
    t0.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn report(name: &str, mut lat: Vec<Duration>, wall: Duration) {
    lat.sort();
    println!(
        "{name:<20} n={:<6} p50={:>8.1?} p99={:>8.1?} throughput={:>8.0}/s",
        lat.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.len() as f64 / wall.as_secs_f64()
    );
}

fn main() {
    let posts: usize = std::env::var("POSTS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    // Over HTTP.
    let dir = tempfile::tempdir().unwrap();
    let key = ahp(
        dir.path(),
        &[],
        &[
            "principal",
            "add",
            "bench",
            "--scope",
            "communication:read",
            "--scope",
            "communication:manage",
        ],
    );
    let (_server, mcp) = serve(dir.path(), &[], &[]);
    let url = format!("{mcp}/conversations");
    let client = reqwest::Client::new();
    let cv = runtime.block_on(async {
        let agent = call(
            &client,
            &url,
            &key,
            "create_agent_identity",
            json!({"handle": "bench", "displayName": "Bench", "idempotencyKey": "a"}),
        )
        .await["agentId"]
            .clone();
        call(
            &client,
            &url,
            &key,
            "create_conversation",
            json!({"title": "bench", "agentIds": [agent], "idempotencyKey": "c"}),
        )
        .await["conversationId"]
            .as_str()
            .unwrap()
            .to_owned()
    });
    // Warm up connections and caches.
    runtime.block_on(async {
        for i in 0..50 {
            post(client.clone(), url.clone(), key.clone(), cv.clone(), format!("w{i}")).await;
        }
    });
    let t0 = Instant::now();
    let lat: Vec<Duration> = runtime.block_on(async {
        let mut out = Vec::with_capacity(posts);
        for i in 0..posts {
            out.push(post(client.clone(), url.clone(), key.clone(), cv.clone(), format!("s{i}")).await);
        }
        out
    });
    report("http_sequential", lat, t0.elapsed());
    let t0 = Instant::now();
    let lat: Vec<Duration> = runtime.block_on(async {
        let tasks: Vec<_> = (0..16)
            .map(|c| {
                let (client, url, key, cv) = (reqwest::Client::new(), url.clone(), key.clone(), cv.clone());
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    for i in 0..posts / 16 {
                        out.push(
                            post(
                                client.clone(),
                                url.clone(),
                                key.clone(),
                                cv.clone(),
                                format!("c{c}-{i}"),
                            )
                            .await,
                        );
                    }
                    out
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all
    });
    report("http_16_clients", lat, t0.elapsed());

    // In process, on an identically configured file database.
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("ahp.db")).unwrap();
    let me = Caller::full("bench").unwrap();
    let card = AgentCard {
        handle: "bench".into(),
        display_name: "Bench".into(),
        description: String::new(),
        specialties: vec![],
    };
    let agent = store.create_agent(&me, &card, "a").unwrap().value;
    let new = NewConversation {
        title: "bench".into(),
        agents: vec![agent.id],
    };
    let cv = store.create_conversation(&me, &new, "c").unwrap().value.id;
    let mut lat = Vec::with_capacity(posts);
    let t0 = Instant::now();
    for i in 0..posts {
        let m = NewMessage {
            conversation: cv.clone(),
            acting: Acting::Human,
            body: "How much stock for Q3?".into(),
            reply_to: None,
            idempotency: IdempotencyKey::Key(format!("p{i}")),
        };
        let t = Instant::now();
        store.post_message(&me, &m).unwrap();
        lat.push(t.elapsed());
    }
    report("in_process", lat, t0.elapsed());

    // The floor: one single-row commit on the same disk.
    let raw = rusqlite::Connection::open(dir.path().join("raw.db")).unwrap();
    raw.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL);",
    )
    .unwrap();
    let mut lat = Vec::with_capacity(posts);
    let t0 = Instant::now();
    for _ in 0..posts {
        let t = Instant::now();
        raw.execute_batch("BEGIN IMMEDIATE; INSERT INTO t (v) VALUES ('x'); COMMIT;")
            .unwrap();
        lat.push(t.elapsed());
    }
    report("raw_sqlite_commit", lat, t0.elapsed());
}
