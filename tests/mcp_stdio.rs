//! The MCP transfer server over stdio, driven by rmcp's client against the real `ahp` binary.

use std::path::Path;

use ahp_store::{DEFAULT_TOKEN_TTL, Store, TokenKey, TokenScope, issue_transfer_token};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

async fn connect(dir: &Path) -> Client {
    let cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ahp")).configure(|c| {
        c.arg("--data-dir")
            .arg(dir)
            .args(["serve", "--stdio"])
            .env_remove("AHP_TRANSFER_TOKEN_SECRET");
    });
    ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap()
}

async fn call(client: &Client, tool: &'static str, args: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone());
    client.call_tool(params).await.unwrap()
}

/// The structured result of a successful call.
async fn ok(client: &Client, tool: &'static str, args: Value) -> Value {
    let r = call(client, tool, args).await;
    assert_ne!(r.is_error, Some(true), "{tool} failed: {:?}", r.content);
    r.structured_content
        .unwrap_or_else(|| panic!("{tool} returned no structured content"))
}

/// The message of a tool error.
async fn tool_error(client: &Client, tool: &'static str, args: Value) -> String {
    let r = call(client, tool, args).await;
    assert_eq!(
        r.is_error,
        Some(true),
        "{tool} should have failed: {:?}",
        r.structured_content
    );
    r.content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.clone())
        .collect()
}

fn snapshot_args() -> Value {
    json!({
        "sourceHost": "laptop-7",
        "systemPrompt": "You forecast inventory.",
        "messageHistory": [{"role": "user", "content": "Forecast SKU-1."}],
        "toolState": {"inventory": [{"sku": "SKU-1", "onHand": 4, "dailySales": [3, 5], "leadTimeDays": 2}]},
        "mcpConfig": [{"server": "https://inventory.example.com/mcp", "credRef": "inventory-api"}]
    })
}

/// Registers the forecaster guest as `forecaster`, writes its credential into the vault and
/// binds it to the inventory server in the operator's policy.
pub(crate) fn register_forecaster(dir: &Path) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir)
        .args(["component", "add", ahp_guests::FORECASTER, "--name", "forecaster"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8(out.stdout).unwrap().starts_with("sha256:"));
    std::fs::write(dir.join("vault").join("inventory-api"), "test-key").unwrap();
    // The operator's policy binds (and reveals) the credential to the inventory server.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir)
        .args(["policy", "allow-server", "https://inventory.example.com"])
        .args(["--credential", "inventory-api", "--reveal"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn token(key: &TokenKey, t: &str, scope: TokenScope) -> String {
    let now = ahp_store::Clock::now(&ahp_store::SystemClock);
    issue_transfer_token(key, t, scope, now, DEFAULT_TOKEN_TTL).unwrap()
}

#[tokio::test]
async fn the_server_offers_exactly_the_six_seed_tools() {
    let dir = tempfile::tempdir().unwrap();
    let client = connect(dir.path()).await;
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "activate",
            "get_status",
            "provision_runtime",
            "push_state",
            "report_usage",
            "snapshot_state"
        ]
    );
    for t in &tools {
        assert!(t.output_schema.is_some(), "{} has no outputSchema", t.name);
        assert!(
            t.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{} has no description",
            t.name
        );
        let a = t.annotations.as_ref().unwrap();
        assert_eq!(a.open_world_hint, Some(false), "{}", t.name);
        assert_eq!(a.read_only_hint, Some(t.name == "get_status"), "{}", t.name);
        let props = t.input_schema["properties"].as_object().unwrap();
        for (field, schema) in props {
            assert!(
                schema.get("description").is_some() || schema.get("$ref").is_some() || schema.get("allOf").is_some(),
                "{}.{field} has no description: {schema}",
                t.name
            );
        }
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_transfer_moves_through_the_tools_and_bad_tokens_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = TokenKey::from_env_or_file(dir.path()).unwrap();
    register_forecaster(dir.path());
    let client = connect(dir.path()).await;

    let staged = ok(&client, "snapshot_state", snapshot_args()).await;
    assert_eq!(staged["status"], "staged");
    let t = staged["transferId"].as_str().unwrap().to_owned();
    let checksum = staged["checksum"].as_str().unwrap().to_owned();
    let other = ok(&client, "snapshot_state", snapshot_args()).await["transferId"]
        .as_str()
        .unwrap()
        .to_owned();

    let provision = |tok: String| json!({"transferId": t, "token": tok, "tier": "nano", "budgetMicroUsd": 100, "component": "forecaster"});
    let wrong_scope = tool_error(
        &client,
        "provision_runtime",
        provision(token(&key, &t, TokenScope::Activate)),
    )
    .await;
    assert!(wrong_scope.contains("another operation"), "{wrong_scope}");
    let other_transfer = tool_error(
        &client,
        "provision_runtime",
        provision(token(&key, &other, TokenScope::ProvisionRuntime)),
    )
    .await;
    assert!(other_transfer.contains("another transfer"), "{other_transfer}");
    let good = token(&key, &t, TokenScope::ProvisionRuntime);
    assert_eq!(
        ok(&client, "provision_runtime", provision(good.clone())).await["status"],
        "provisioned"
    );
    let replay_on_other =
        json!({"transferId": other, "token": good, "tier": "nano", "budgetMicroUsd": 100, "component": "forecaster"});
    assert!(
        tool_error(&client, "provision_runtime", replay_on_other)
            .await
            .contains("another transfer")
    );

    let mismatch = tool_error(
        &client,
        "push_state",
        json!({"transferId": t, "checksum": "0".repeat(64)}),
    )
    .await;
    assert!(mismatch.contains("checksum mismatch"), "{mismatch}");
    assert_eq!(
        ok(&client, "push_state", json!({"transferId": t, "checksum": checksum})).await["status"],
        "pushed"
    );

    // Bad input is a tool error naming the field, and changes nothing.
    let bad = tool_error(&client, "report_usage", json!({"transferId": t, "amountMicroUsd": 0})).await;
    assert!(bad.contains("amountMicroUsd"), "{bad}");
    let unknown = tool_error(
        &client,
        "get_status",
        json!({"transferId": "tr_ffffffffffffffffffffffff"}),
    )
    .await;
    assert!(unknown.contains("not found"), "{unknown}");

    // activate resumes the forecaster guest in a real sandbox; `active` only after it resumed.
    let activate_tok = token(&key, &t, TokenScope::Activate);
    let active = ok(&client, "activate", json!({"transferId": t, "token": activate_tok})).await;
    assert_eq!(active["status"], "active");
    let replay = tool_error(&client, "activate", json!({"transferId": t, "token": activate_tok})).await;
    assert!(replay.contains("it is active"), "{replay}");
    let usage = ok(
        &client,
        "report_usage",
        json!({"transferId": t, "amountMicroUsd": 100, "kind": "model_tokens"}),
    )
    .await;
    assert_eq!(usage["status"], "insolvent");

    let status = ok(&client, "get_status", json!({"transferId": t})).await;
    assert_eq!(status["transferId"], t.as_str());
    let kinds: Vec<_> = status["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        &kinds[..4],
        [
            "snapshot_created",
            "runtime_provisioned",
            "state_pushed",
            "activation_started"
        ]
    );
    assert!(kinds.contains(&"credential_resolved".to_owned()), "{kinds:?}");
    assert!(kinds.contains(&"activated".to_owned()), "{kinds:?}");
    assert_eq!(&kinds[kinds.len() - 2..], ["usage_reported", "insolvent"]);
    assert_eq!(status["status"], "insolvent");
    assert_eq!(status["budget"]["allocatedMicroUsd"], 100);
    client.cancel().await.unwrap();

    // Nothing the refused calls touched moved.
    let mut store = Store::open(dir.path().join("ahp.db")).unwrap();
    assert_eq!(
        store.transfer(&other).unwrap().status,
        ahp_store::TransferStatus::Staged
    );
}

#[tokio::test]
async fn the_operator_over_stdio_acts_on_every_principals_transfers() {
    use crate::mcp_http::{message, principal, serve, stateless};
    let dir = tempfile::tempdir().unwrap();
    let key = principal(dir.path(), "orchestrator", &["transfer:read", "transfer:write"]);
    let t = {
        let server = serve(dir.path(), &[]);
        let params = json!({"name": "snapshot_state", "arguments": snapshot_args()});
        let m = message(stateless(&server.url, Some(&key), "tools/call", Some("snapshot_state"), params).await).await;
        m["result"]["structuredContent"]["transferId"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // The server is gone (it held the data directory); the operator's stdio surface sees the
    // principal's transfer, pages its log and reports on it like any other.
    let client = connect(dir.path()).await;
    let status = ok(&client, "get_status", json!({"transferId": t, "limit": 1})).await;
    assert_eq!(status["status"], "staged");
    assert_eq!(status["events"][0]["kind"], "snapshot_created");
    let refused = tool_error(
        &client,
        "report_usage",
        json!({"transferId": t, "amountMicroUsd": 5, "kind": "model_tokens"}),
    )
    .await;
    assert!(
        refused.contains("it is staged"),
        "the operator reaches the state machine: {refused}"
    );
    client.cancel().await.unwrap();
}
