//! Who a transfer belongs to: the principal that created it.
//!
//! A transfer created over HTTP belongs to the principal of the API key (or of the OAuth token
//! subject, [`crate::issuer`]: a principal too, and spelled the same) that created it; one created by the operator
//! (the CLI, `ahp serve --stdio`) to the operator. The owner is stored as its subject
//! (`transfers.owner_subject`), and the Agent identity the transfer becomes when it is activated
//! is owned by that subject's communication principal — so only the owner sees the agent through
//! the conversation tools ([`TransferOwner::caller`]), and the host drives the agent's turns for
//! the owner through the endpoint it holds ([`TransferOwner::host_caller`]): the owner talks to
//! its agent as a human, but never acts *as* it.

use std::fmt;

use crate::conversation::{Caller, CommunicationPrincipal, OPERATOR_SUBJECT};
use crate::error::{Error, Result};
use crate::principal::PRINCIPAL_ID_PREFIX;

/// How an API-key principal's subject starts; the principal's `prn_…` id follows.
pub const API_KEY_SUBJECT_PREFIX: &str = "api-key:";

/// The principal that created a transfer.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum TransferOwner {
    /// The local operator (subject [`OPERATOR_SUBJECT`]).
    Operator,
    /// An API-key principal, by its `prn_…` id (subject `api-key:prn_…`).
    ApiKey(String),
}

impl TransferOwner {
    /// The owner's subject: `operator:local` or `api-key:prn_…`.
    pub fn subject(&self) -> String {
        match self {
            Self::Operator => OPERATOR_SUBJECT.to_owned(),
            Self::ApiKey(id) => format!("{API_KEY_SUBJECT_PREFIX}{id}"),
        }
    }

    /// The owner as a client caller holding both communication scopes: what the owner's own
    /// credential may do (talk to its agents as the human, manage its conversations). It is
    /// refused through the endpoint the host holds for the transfer's agent.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (field `owner`) for an API-key id that is not a principal id.
    pub fn caller(&self) -> Result<Caller> {
        self.validate()?;
        Caller::full(&self.subject()).map_err(Error::from)
    }

    /// The host acting for the owner: the caller of the transfer's agent's turns (claim,
    /// dispatch, the guest's `conversations` calls, consume), and the only one admitted
    /// through the host-held endpoint a binding attaches. Only the host calls this; no tool or
    /// console path does (SECURITY.md, "The host-held endpoint").
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (field `owner`) for an API-key id that is not a principal id.
    pub fn host_caller(&self) -> Result<Caller> {
        self.validate()?;
        Ok(Caller::host_for(CommunicationPrincipal::from_subject(&self.subject())?))
    }

    /// Checks that an API-key owner names a well-formed principal id.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (field `owner`).
    pub fn validate(&self) -> Result<()> {
        match self {
            Self::Operator => Ok(()),
            Self::ApiKey(id) if crate::id::is_well_formed(id, PRINCIPAL_ID_PREFIX) => Ok(()),
            Self::ApiKey(_) => Err(Error::invalid(
                "owner",
                format!("an API-key owner must be a principal id ({PRINCIPAL_ID_PREFIX} followed by 24 hex digits)"),
            )),
        }
    }

    /// The owner a stored subject names. An unknown subject fails closed.
    ///
    /// # Errors
    ///
    /// [`Error::CorruptRow`] (table `transfers`) for a subject this build does not know.
    pub fn from_subject(subject: &str) -> Result<Self> {
        let owner = if subject == OPERATOR_SUBJECT {
            Self::Operator
        } else if let Some(id) = subject.strip_prefix(API_KEY_SUBJECT_PREFIX) {
            Self::ApiKey(id.to_owned())
        } else {
            return Err(unknown(subject));
        };
        owner.validate().map_err(|_| unknown(subject))?;
        Ok(owner)
    }
}

fn unknown(subject: &str) -> Error {
    Error::CorruptRow {
        table: "transfers",
        reason: format!("unknown owner subject {subject:?}"),
    }
}

impl fmt::Debug for TransferOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.subject())
    }
}

impl fmt::Display for TransferOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.subject())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Scope;

    #[test]
    fn subjects_are_the_hosts_and_round_trip() {
        let key = TransferOwner::ApiKey("prn_0123456789abcdef01234567".into());
        assert_eq!(TransferOwner::Operator.subject(), "operator:local");
        assert_eq!(key.subject(), "api-key:prn_0123456789abcdef01234567");
        for owner in [TransferOwner::Operator, key] {
            assert_eq!(TransferOwner::from_subject(&owner.subject()).unwrap(), owner);
            let caller = owner.caller().unwrap();
            assert!(caller.has(Scope::Read) && caller.has(Scope::Manage));
            assert_eq!(
                caller.principal(),
                &CommunicationPrincipal::from_subject(&owner.subject()).unwrap()
            );
            assert!(!caller.is_host(), "the owner's own caller is a client");
            let host = owner.host_caller().unwrap();
            assert!(host.is_host() && host.has(Scope::Read) && host.has(Scope::Manage));
            assert_eq!(host.principal(), caller.principal());
        }
    }

    #[test]
    fn malformed_owners_are_refused_and_unknown_subjects_fail_closed() {
        let bad = TransferOwner::ApiKey("alice".into());
        assert!(matches!(bad.validate(), Err(Error::InvalidInput { field, .. }) if field == "owner"));
        assert!(bad.caller().is_err());
        assert!(bad.host_caller().is_err());
        for subject in ["", "account:42", "api-key:alice", "operator:remote", "api-key:"] {
            assert!(
                matches!(TransferOwner::from_subject(subject), Err(Error::CorruptRow { .. })),
                "{subject:?}"
            );
        }
    }
}
