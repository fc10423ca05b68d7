//! Who is calling an MCP surface: the principal the router's gate authenticated (an API key's, or
//! an OAuth token subject's: [`super::oauth`]), read off the
//! request ([`principal_of`]), mapped by [`crate::ops::identity`] (the one mapping, shared with
//! the console and the CLI). Over HTTP the gate puts the key's [`Principal`] in the request's
//! extensions; a request without one (stdio, or HTTP with `--auth none`, loopback only) is the
//! local operator.

use ahp_store::conversation::Caller;
use ahp_store::{Principal, TransferOwner};
use rmcp::model::Extensions;

pub use crate::ops::identity::{
    API_KEY_SUBJECT_PREFIX, OPERATOR_SUBJECT, api_key_caller, api_key_owner, operator_caller,
};

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

/// Who asks, in both domains: the request's principal (its communication caller and its
/// transfer owner), or the local operator without one (stdio, `--auth none`). What a task's
/// owner is, whichever surface serves it.
#[derive(Debug, Clone)]
pub struct Asker {
    /// As the conversation domain knows it; its principal owns the tasks.
    pub caller: Caller,
    /// As the transfers know it.
    pub owner: TransferOwner,
}

impl Asker {
    /// The asker of a request.
    pub fn of(ext: &Extensions) -> Self {
        match principal_of(ext) {
            Some(p) => Self {
                caller: api_key_caller(p),
                owner: api_key_owner(p),
            },
            None => Self {
                caller: operator_caller(),
                owner: TransferOwner::Operator,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_without_a_key_is_the_operator() {
        assert_eq!(transfer_owner(&Extensions::default()), TransferOwner::Operator);
    }
}
