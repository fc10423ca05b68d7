//! MCP round trips against the real `ahp serve --stdio`, through rmcp's client.
//!
//! - `mcp_stdio/get_status`: one `tools/call get_status` on a transfer with a short event log,
//!   client → pipe → server → store → back. Target p50 ≤ 200 µs.
//! - `mcp_stdio/baseline_store_get_status`: the same read straight from the store in this
//!   process — what the MCP layer adds is the difference.
//!
//! Run: `cargo bench -p ahp-host --bench mcp`.

use std::hint::black_box;
use std::time::Duration;

use ahp_store::{McpServer, Message, SnapshotInput, Store};
use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("ahp.db")).unwrap();
    let snapshot = SnapshotInput {
        source_host: "laptop-7".into(),
        system_prompt: "You forecast inventory.".into(),
        message_history: vec![Message {
            role: "user".into(),
            content: "Forecast SKU-1.".into(),
        }],
        tool_state: serde_json::json!({ "inventory": { "SKU-1": 40 } }),
        mcp_config: vec![McpServer {
            server: "https://inventory.example.com/mcp".into(),
            cred_ref: "inventory-api".into(),
        }],
    };
    let t = store.snapshot_state(&snapshot).unwrap().id;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let client = runtime.block_on(async {
        let cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ahp")).configure(|c| {
            c.arg("--data-dir").arg(dir.path()).args(["serve", "--stdio"]);
        });
        ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap()
    });
    let args = serde_json::json!({ "transferId": t }).as_object().unwrap().clone();

    let mut g = c.benchmark_group("mcp_stdio");
    g.measurement_time(Duration::from_secs(6)).sample_size(50);
    g.bench_function("get_status", |b| {
        b.iter(|| {
            let params = CallToolRequestParams::new("get_status").with_arguments(args.clone());
            let r = runtime.block_on(client.call_tool(params)).unwrap();
            assert_ne!(r.is_error, Some(true));
            black_box(r)
        })
    });
    g.bench_function("baseline_store_get_status", |b| {
        b.iter(|| black_box(store.get_status(&t).unwrap()))
    });
    g.finish();
    runtime.block_on(async { client.cancel().await.unwrap() });
}

criterion_group!(benches, bench);
criterion_main!(benches);
