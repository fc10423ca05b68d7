//! The model gateway's overhead per `complete`, beside a direct call to the same provider.
//!
//! - `gateway/direct_http`: one POST of the same Chat Completions body to the scripted local
//!   provider (`ahp_host::gateway::scripted`) over a fresh loopback connection, read in full —
//!   the baseline.
//! - `gateway/complete`: `Gateway::complete` on an active transfer of a file database
//!   (`synchronous=FULL`): validation, the body's mapping, the reservation commit, the vault
//!   read, the same POST over a fresh connection, parsing, and the settlement commit (charge,
//!   release, `model_called`). What the gateway adds is the difference: mostly the two commits.
//! - `gateway/raw_sqlite_commit`: one single-row commit on the same disk, the price of each of
//!   those commits right now.
//!
//! Run: `cargo bench -p ahp-host --bench gateway` (with `--workspace` here, see the brief).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_host::gateway::scripted::{Behaviour, ScriptedProvider};
use ahp_host::gateway::{Gateway, Message, Part, Request, Role, ToolChoice, openai};
use ahp_host::policy::ModelRule;
use ahp_host::testing;
use ahp_store::{Store, Tier, TokenKey};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

fn request() -> Request {
    Request {
        model: "default".into(),
        system: "You forecast inventory.".into(),
        messages: vec![Message {
            role: Role::User,
            parts: vec![Part::Text("How many units of A-1 should we reorder?".into())],
        }],
        tools: vec![],
        tool_choice: ToolChoice::Auto,
        max_output_tokens: Some(256),
    }
}

fn bench(c: &mut Criterion) {
    let (runtime, provider) = ScriptedProvider::start_on_own_runtime().unwrap();
    provider.set_responder(Arc::new(|_| Behaviour::text("Reorder 60.")));
    let dir = tempfile::tempdir().unwrap();
    let key = TokenKey::random();
    let mut db = Store::open(dir.path().join("ahp.db"))
        .unwrap()
        .with_token_key(key.clone());
    let transfer = testing::pushed(
        &mut db,
        &key,
        &testing::snapshot(0, json!({})),
        Tier::Small,
        10_000_000_000,
        "forecaster",
    )
    .unwrap();
    let tok = testing::activate_token(&db, &key, &transfer).unwrap();
    db.begin_activation(&transfer, &tok).unwrap();
    db.complete_activation(&transfer).unwrap();
    let vault_dir = dir.path().join("vault");
    let vault = ahp_host::vault::DirVault::open(&vault_dir).unwrap();
    std::fs::write(vault_dir.join("model-key"), "sk-bench").unwrap();
    let model: ModelRule = serde_json::from_value(json!({
        "id": "default", "provider": "openai", "endpoint": provider.openai_endpoint(),
        "providerModel": "gpt-4.1-mini", "credential": { "credRef": "model-key" },
        "contextTokens": 128000, "maxOutputTokens": 4096,
        "priceMicroUsdPerMTok": { "input": 1, "output": 1, "cacheRead": 1, "cacheWrite": 1 }
    }))
    .unwrap();
    let db = ahp_host::shared_store::share(db);
    let gateway = Gateway::new(vec![model].into(), Arc::new(vault), db.clone(), transfer.clone());
    let body = openai::request_body("gpt-4.1-mini", &request(), 256);
    let url = format!("{}/chat/completions", provider.openai_endpoint());
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();

    let mut g = c.benchmark_group("gateway");
    g.measurement_time(Duration::from_secs(6)).sample_size(50);
    g.bench_function("direct_http", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let r = client
                    .post(&url)
                    .header("authorization", "Bearer sk-bench")
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                let bytes = r.bytes().await.unwrap();
                let reply = openai::parse_response(&bytes).unwrap();
                assert!(reply.usage.is_some());
            })
        })
    });
    let req = request();
    g.bench_function("complete", |b| {
        b.iter(|| {
            let deadline = Instant::now() + Duration::from_secs(30);
            let c = runtime.block_on(gateway.complete(&req, deadline)).unwrap();
            assert!(c.charged_micro_usd > 0);
        })
    });
    let raw_path = dir.path().join("raw.db");
    let raw = rusqlite::Connection::open(&raw_path).unwrap();
    raw.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
        .unwrap();
    raw.pragma_update(None, "synchronous", "FULL").unwrap();
    raw.execute_batch("CREATE TABLE t (v INTEGER)").unwrap();
    g.bench_function("raw_sqlite_commit", |b| {
        b.iter(|| raw.execute("INSERT INTO t VALUES (1)", []).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
