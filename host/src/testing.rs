//! Shortcuts the tests and benchmarks share to bring a transfer to the point of activation. Not
//! part of the host's API (hidden from its docs); every step is the store's real operation.

use ahp_store::{DEFAULT_TOKEN_TTL, Result, SnapshotInput, Store, Tier, TokenKey, TokenScope, issue_transfer_token};

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
