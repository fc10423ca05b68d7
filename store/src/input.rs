//! The transfer side's input rules: the form of a transfer id, of a component reference, the
//! budget ceiling, and how many transfers one call lists or names.
//!
//! They live here, below every module that applies them, because two layers apply them: a
//! transfer token binds a budget cap and a component when it is issued (`token`), and the
//! transitions check the same inputs again when they run (`lifecycle`, `budget`, `transfer`,
//! `component`). Kept in any of those, the token module would have to reach up into the
//! transitions it authorizes. This module depends on nothing but the store's error and id
//! helpers.

use crate::error::{Error, Result};
use crate::id;

/// Prefix of every transfer id.
pub const TRANSFER_ID_PREFIX: &str = "tr_";

/// The largest budget `provision_runtime` accepts: 10,000 USD. Larger sums are not an agent
/// session; they are a typo.
pub const MAX_BUDGET_MICRO_USD: u64 = 10_000 * 1_000_000;

/// Most transfers one call lists ([`Store::list_transfers`](crate::Store::list_transfers)) or
/// names (a host's carried transfers, a binding's examination).
pub const MAX_LIST_LIMIT: usize = 1000;

/// Longest component *name* (a digest is always `sha256:` and 64 hex digits).
pub const MAX_COMPONENT_NAME_BYTES: usize = 64;

/// Checks that `transfer` has the shape of a transfer id.
///
/// # Errors
///
/// [`Error::InvalidInput`] (field `transferId`).
pub(crate) fn check_transfer_id(transfer: &str) -> Result<()> {
    if id::is_well_formed(transfer, TRANSFER_ID_PREFIX) {
        Ok(())
    } else {
        Err(Error::invalid(
            "transferId",
            "is not a transfer id (tr_ followed by 24 hex digits)",
        ))
    }
}

/// Checks a component reference: `sha256:` and 64 lowercase hex digits, or a name of 1 to
/// [`MAX_COMPONENT_NAME_BYTES`] lowercase letters, digits, `.`, `_` and `-` starting with a
/// letter or digit.
///
/// # Errors
///
/// [`Error::InvalidInput`] naming the rule broken.
pub fn validate_component(component: &str) -> Result<()> {
    if let Some(hex) = component.strip_prefix("sha256:") {
        if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Ok(());
        }
        return Err(Error::invalid(
            "component",
            "a digest must be sha256: followed by 64 lowercase hex digits",
        ));
    }
    let name_ok = !component.is_empty()
        && component.len() <= MAX_COMPONENT_NAME_BYTES
        && component.as_bytes()[0].is_ascii_alphanumeric()
        && component
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'));
    if name_ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "component",
            format!("must be a sha256: digest or a name of 1 to {MAX_COMPONENT_NAME_BYTES} of a-z, 0-9, '.', '_', '-'"),
        ))
    }
}
