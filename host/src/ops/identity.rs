//! Who is calling, as the store knows them: the one mapping from an authenticated principal — an
//! API key's, or an OAuth token subject's (`mcp::oauth`), treated alike — (or
//! its absence: the local operator) to the transfer owner and the communication caller, for
//! every surface — the MCP tools (`mcp/identity.rs` reads the key off the request), the
//! console and the CLI.
//!
//! A principal (an API key's or a token subject's; "API key" below stands for both) is:
//!
//! - for the transfer tools, the owner [`TransferOwner::ApiKey`] ([`api_key_owner`]);
//! - for the conversation and delegation operations and the console, the communication
//!   principal of the subject `api-key:prn_…` (the store's [`API_KEY_SUBJECT_PREFIX`]), with
//!   the key's communication scopes ([`api_key_caller`]).
//!
//! No key (stdio, or HTTP with `--auth none`, loopback only) is the local operator: the subject
//! [`OPERATOR_SUBJECT`], owner [`TransferOwner::Operator`], caller [`operator_caller`] with
//! both scopes. The subjects themselves are spelled once, by the store
//! ([`TransferOwner::subject`]); this module only picks which one a caller is.

use ahp_store::conversation::{Caller, CommunicationPrincipal, Scope};
pub use ahp_store::owner::API_KEY_SUBJECT_PREFIX;
use ahp_store::{ApiScope, Principal, TransferOwner};

pub use ahp_store::OPERATOR_SUBJECT;

/// The transfer owner of an API key's principal.
pub fn api_key_owner(p: &Principal) -> TransferOwner {
    TransferOwner::ApiKey(p.id.clone())
}

/// The communication caller of an API key's principal: a hash of its subject (`api-key:prn_…`),
/// with the key's communication scopes.
///
/// # Panics
///
/// Never: principal ids are short.
pub fn api_key_caller(p: &Principal) -> Caller {
    let principal = CommunicationPrincipal::from_subject(&api_key_owner(p).subject()).expect("a prn_ id is short");
    let mut scopes = Vec::new();
    if p.has(ApiScope::CommunicationRead) {
        scopes.push(Scope::Read);
    }
    if p.has(ApiScope::CommunicationManage) {
        scopes.push(Scope::Manage);
    }
    Caller::new(principal, &scopes)
}

/// The local operator's caller.
///
/// # Panics
///
/// Never: the subject is a short constant.
pub fn operator_caller() -> Caller {
    Caller::full(OPERATOR_SUBJECT).expect("the operator subject is short")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(scopes: Vec<ApiScope>) -> Principal {
        Principal {
            id: "prn_000000000000000000000001".into(),
            name: "k".into(),
            scopes,
            created_at: ahp_store::Timestamp::from_micros(0),
            revoked_at: None,
        }
    }

    #[test]
    fn api_keys_and_the_operator_are_different_principals() {
        let c = api_key_caller(&key(vec![ApiScope::CommunicationRead]));
        assert!(c.has(Scope::Read) && !c.has(Scope::Manage));
        assert_ne!(c.principal(), operator_caller().principal());
    }

    #[test]
    fn a_key_talks_as_the_owner_of_its_transfers() {
        // The caller of a key and the caller the store derives for the transfers it owns are
        // one principal: the key sees its transfers' agents through the conversation tools.
        let p = key(vec![ApiScope::CommunicationRead, ApiScope::CommunicationManage]);
        let owner = api_key_owner(&p);
        assert_eq!(owner.subject(), format!("{API_KEY_SUBJECT_PREFIX}{}", p.id));
        assert_eq!(api_key_caller(&p), owner.caller().unwrap());
    }
}
