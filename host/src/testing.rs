//! Shortcuts the tests and benchmarks share to bring a transfer to the point of activation. Not
//! part of the host's API (hidden from its docs); every step is the store's real operation.

use ahp_store::{
    DEFAULT_TOKEN_TTL, McpServer, Message, Result, SnapshotInput, Store, Tier, TokenKey, TokenScope,
    issue_transfer_token,
};
use serde_json::{Value, json};

/// The credential reference of [`snapshot`]'s one MCP server.
pub const CRED_REF: &str = "inventory-api";

/// A forecaster session: `messages` alternating user/assistant messages, `tool_state`, and one
/// MCP server (the inventory API, credential [`CRED_REF`]).
pub fn snapshot(messages: usize, tool_state: Value) -> SnapshotInput {
    SnapshotInput {
        source_host: "laptop".into(),
        system_prompt: "You forecast inventory.".into(),
        message_history: (0..messages)
            .map(|i| Message {
                role: if i % 2 == 0 { "user" } else { "assistant" }.into(),
                content: format!("message {i}"),
            })
            .collect(),
        tool_state,
        mcp_config: vec![McpServer {
            server: "https://inventory.example.com/mcp".into(),
            cred_ref: CRED_REF.into(),
        }],
    }
}

/// The operator policy [`snapshot`]'s transfers need: the inventory server reachable, with
/// [`CRED_REF`] bound to it and revealed (the forecaster checks it has a credential).
pub fn policy() -> crate::policy::Policy {
    crate::policy::Policy {
        servers: vec![crate::policy::ServerRule {
            server: "https://inventory.example.com".into(),
            credential: Some(crate::policy::CredentialRule {
                cred_ref: CRED_REF.into(),
                inject: crate::policy::Injection::default(),
                reveal: true,
            }),
            tool_call_micro_usd: 0,
        }],
        models: vec![],
        allow_networks: vec![],
    }
}

/// [`policy`] with one model, `default`, served over the OpenAI protocol at `endpoint` (a local
/// provider's, e.g. `ScriptedProvider::openai_endpoint`) with the vault's credential `cred_ref`,
/// at 1 micro-USD per million tokens, and loopback allowed for it.
///
/// # Panics
///
/// Never for a well-formed `endpoint` (the model rule is fixed).
pub fn policy_with_model(endpoint: &str, cred_ref: &str) -> crate::policy::Policy {
    let price = json!({ "input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0 });
    crate::policy::Policy {
        models: serde_json::from_value(json!([
            { "id": "default", "provider": "openai", "endpoint": endpoint,
              "providerModel": "gpt-4.1-mini", "credential": { "credRef": cred_ref },
              "contextTokens": 128000, "maxOutputTokens": 256, "priceMicroUsdPerMTok": price },
        ]))
        .expect("a well-formed model rule"),
        allow_networks: vec!["127.0.0.0/8".into()],
        ..policy()
    }
}

/// The forecaster's tool state: two SKUs, one of which needs a reorder of 60.
pub fn inventory() -> Value {
    json!({ "inventory": [
        { "sku": "A-1", "onHand": 10, "dailySales": [5, 6, 4], "leadTimeDays": 7 },
        { "sku": "B-2", "onHand": 500, "dailySales": [1, 2], "leadTimeDays": 3 },
    ]})
}

/// Snapshots `snap`, provisions it at `tier` with `budget_micro_usd` to run `component`
/// (minting the provision token with `key`) and pushes it. Returns the transfer id.
///
/// # Errors
///
/// Whatever the store refuses.
pub fn pushed(
    db: &mut Store,
    key: &TokenKey,
    snap: &SnapshotInput,
    tier: Tier,
    budget_micro_usd: u64,
    component: &str,
) -> Result<String> {
    let id = db.snapshot_state(snap)?.id;
    let token = issue_transfer_token(key, &id, TokenScope::ProvisionRuntime, db.now(), DEFAULT_TOKEN_TTL)?;
    db.provision_runtime(&id, tier, budget_micro_usd, component, &token)?;
    db.push_state(&id, None)?;
    Ok(id)
}

/// A fresh single-use `activate` token for `transfer`.
///
/// # Errors
///
/// If the token cannot be minted (an id that is not a transfer id).
pub fn activate_token(db: &Store, key: &TokenKey, transfer: &str) -> Result<String> {
    issue_transfer_token(key, transfer, TokenScope::Activate, db.now(), DEFAULT_TOKEN_TTL)
}
