#![allow(dead_code)]
//! Shared setup of the sandbox benchmarks: a host over an in-memory store with the example
//! guests registered, and transfers made `active` so guests can record spend; and the real
//! `ahp serve` for the benchmarks over HTTP ([`served`]).

pub(crate) mod served;

use std::sync::Arc;

use ahp_guests as guests;
use ahp_host::host::{Host, HostBuilder};
use ahp_host::sandbox::engine::EngineConfig;
use ahp_host::sandbox::{RunOutcome, Sandboxes};
use ahp_host::shared_store::StoreLock;
use ahp_host::store::{SnapshotInput, Store, Tier, TokenKey, Transfer};
use ahp_host::testing;

pub(crate) struct Bench {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) key: TokenKey,
    pub(crate) host: Host,
    pub(crate) sandboxes: Arc<Sandboxes>,
}

pub(crate) fn host(configure: impl FnOnce(&mut EngineConfig)) -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let key = TokenKey::random();
    let db = Store::open_in_memory().unwrap().with_token_key(key.clone());
    let host = HostBuilder::new(db, dir.path().join("data"))
        .policy(testing::policy())
        .engine(configure)
        .build()
        .unwrap();
    std::fs::write(dir.path().join("data/vault/inventory-api"), "sk-bench").unwrap();
    let sandboxes = host.sandboxes().clone();
    for (name, path) in guests::ALL {
        sandboxes.register_component_file(path, Some(name)).unwrap();
    }
    Bench {
        _dir: dir,
        key,
        host,
        sandboxes,
    }
}

impl Bench {
    /// An activated transfer running `component`, its sandbox kept live unless `keep` is false.
    pub(crate) fn active(&self, snap: &SnapshotInput, component: &str, keep: bool) -> Transfer {
        let id = testing::pushed(
            &mut self.host.store().locked(),
            &self.key,
            snap,
            Tier::Small,
            10_000_000_000,
            component,
        )
        .unwrap();
        let tok = testing::activate_token(&self.host.store().locked(), &self.key, &id).unwrap();
        let report = self.host.activate(&id, &tok).unwrap();
        assert_eq!(report.outcome, RunOutcome::Returned, "{component}");
        if !keep {
            self.sandboxes.drop_sandbox(&id);
        }
        report.transfer
    }
}

/// A stateless (2026-07-28) MCP `tools/call` of `tool` at `url`, with `key` as the bearer if
/// given; returns its structured result (panics on a tool error).
pub(crate) async fn mcp_call(
    client: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    tool: &str,
    arguments: serde_json::Value,
) -> serde_json::Value {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": tool, "arguments": arguments,
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    }}});
    let mut request = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", tool)
        .json(&body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let text = request.send().await.unwrap().text().await.unwrap();
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .unwrap_or(&text);
    let m: serde_json::Value = serde_json::from_str(data).unwrap();
    assert_ne!(m["result"]["isError"], true, "{tool}: {m}");
    m["result"]["structuredContent"].clone()
}

/// A field of this process's `/proc/self/status` in KiB (`"VmRSS:"`, `"VmHWM:"`), 0 if absent.
pub(crate) fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}
