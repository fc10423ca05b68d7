//! Who is calling an MCP surface (or the console): the one mapping from a request's credential
//! to the principals the store knows, below both tool sets.
//!
//! Over HTTP the router's gate authenticates the bearer key and puts its [`Principal`] in the
//! request's extensions ([`principal_of`] reads it back). That principal is then:
//!
//! - for the transfer tools, the owner [`TransferOwner::ApiKey`] ([`transfer_owner`]);
//! - for the conversation tools and the console, the communication principal of the subject
//!   `api-key:prn_…` (the store's [`API_KEY_SUBJECT_PREFIX`]), with the key's communication
//!   scopes ([`api_key_caller`]).
//!
//! A request without one (stdio, or HTTP with `--auth none`, loopback only) is the local
//! operator: the subject [`OPERATOR_SUBJECT`], owner [`TransferOwner::Operator`], caller
//! [`operator_caller`] with both scopes. The subjects themselves are spelled once, by the store
//! ([`TransferOwner::subject`]); this module only picks which one a request is.

use ahp_store::conversation::{Caller, CommunicationPrincipal, Scope};
pub use ahp_store::owner::API_KEY_SUBJECT_PREFIX;
use ahp_store::{ApiScope, Principal, TransferOwner};
use rmcp::model::Extensions;

pub use ahp_store::OPERATOR_SUBJECT;

/// The API key's principal the gate authenticated for this request, if any (none over stdio
/// or with `--auth none`).
pub fn principal_of(ext: &Extensions) -> Option<&Principal> {
    ext.get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
}

/// The transfer owner a request acts as: its API key's principal over HTTP, else the local
/// operator.
pub fn transfer_owner(ext: &Extensions) -> TransferOwner {
    principal_of(ext).map_or(TransferOwner::Operator, api_key_owner)
}

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
        assert_eq!(transfer_owner(&Extensions::default()), TransferOwner::Operator);
    }
}
