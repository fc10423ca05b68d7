//! The host's MCP client (`ahp:agent/tools`) against a direct MCP client, side by side, both
//! calling `inventory` on the same local inventory server (`tools::inventory_server`, a real
//! rmcp server over Streamable HTTP on loopback, stateless 2026-07-28 era):
//!
//! - `tools_call/direct_rmcp_reqwest`: rmcp's own client over reqwest with the bearer header,
//!   one session — the baseline;
//! - `tools_call/toolbox`: `Toolbox::call` on a live session — name lookup, bounds, budget read,
//!   the pinned, policy-checked, counted egress path with the credential injected from the vault,
//!   and the `tool_called` audit (an in-memory database; price 0, so no spend write);
//! - `tools_session/toolbox_connect_list_call`: a fresh toolbox connecting (`server/discover`),
//!   listing and calling once — what a session per turn instead of per sandbox would cost each turn.
//!
//! Run: `cargo bench -p ahp-host --bench tools` (from the workspace: `cargo bench --workspace
//! --bench tools`).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use ahp_host::policy::Policy;
use ahp_host::testing;
use ahp_host::tools::Toolbox;
use ahp_host::tools::inventory_server::{InventoryServer, Mode};
use ahp_store::{McpServer, Store, Tier, TokenKey};
use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::json;

const SECRET: &str = "bench-inventory-secret";
const CRED_REF: &str = "inventory-api";

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(InventoryServer::start(SECRET, testing::inventory(), Mode::Honest))
        .unwrap();

    // The transfer the toolbox charges and audits: active, in an in-memory database.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("vault")).unwrap();
    std::fs::write(dir.path().join("vault").join(CRED_REF), SECRET).unwrap();
    let key = TokenKey::random();
    let mut db = Store::open_in_memory().unwrap().with_token_key(key.clone());
    let transfer = testing::pushed(
        &mut db,
        &key,
        &testing::snapshot(0, json!({})),
        Tier::Small,
        10_000_000_000,
        "forecaster",
    )
    .unwrap();
    let token = testing::activate_token(&db, &key, &transfer).unwrap();
    db.begin_activation(&transfer, &token).unwrap();
    db.complete_activation(&transfer).unwrap();
    let db = ahp_host::shared_store::share(db);
    let policy = Policy {
        servers: vec![server.policy_rule(CRED_REF, 0)],
        allow_networks: vec!["127.0.0.0/8".into()],
        models: vec![],
    };
    let mcp = vec![McpServer {
        server: server.url(),
        cred_ref: CRED_REF.into(),
    }];
    let vault: Arc<dyn ahp_host::vault::Vault> =
        Arc::new(ahp_host::vault::DirVault::open(dir.path().join("vault")).unwrap());
    let toolbox = || {
        Toolbox::open(
            &transfer,
            &mcp,
            &policy,
            vault.clone(),
            db.clone(),
            u64::MAX / 4,
            Duration::from_secs(3600),
        )
    };

    let direct = rt.block_on(async {
        let config = StreamableHttpClientTransportConfig::with_uri(server.url()).auth_header(SECRET);
        let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
        ().serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Auto {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
                legacy_version: Some(rmcp::model::ProtocolVersion::V_2025_11_25),
            },
        )
        .await
        .unwrap()
    });
    let mut live = toolbox();
    rt.block_on(live.list()).unwrap();

    let mut g = c.benchmark_group("tools_call");
    g.bench_function("direct_rmcp_reqwest", |b| {
        b.iter(|| {
            let r = rt
                .block_on(direct.call_tool(CallToolRequestParams::new("inventory")))
                .unwrap();
            black_box(r);
        });
    });
    g.bench_function("toolbox", |b| {
        b.iter(|| {
            // Reset the per-turn counts: the bench makes far more calls than one turn may.
            live.start_turn();
            let r = rt.block_on(live.call(&db, "inventory", "{}")).unwrap();
            black_box(r);
        });
    });
    g.finish();

    let mut g = c.benchmark_group("tools_session");
    g.bench_function("toolbox_connect_list_call", |b| {
        b.iter(|| {
            let mut fresh = toolbox();
            rt.block_on(async {
                fresh.list().await.unwrap();
                black_box(fresh.call(&db, "inventory", "{}").await.unwrap());
            });
        });
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50).measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
