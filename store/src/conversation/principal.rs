//! Communication principals and scopes: who is calling, and what they may do.
//!
//! A [`CommunicationPrincipal`] is a stable SHA-256 digest of an authenticated subject (an account or a
//! shared-key subject), domain-separated so it cannot collide with other hashes in the system;
//! the subject itself and any secret behind it are never stored or returned. Two scopes gate the
//! domain and are independent: [`Scope::Read`] does not imply [`Scope::Manage`], nor the reverse.
//! Every operation takes a [`Caller`] and checks its scope before it touches the database.
//!
//! A caller is either a *client* (whoever calls the MCP tools or uses the console, whatever its
//! key) or the *host* itself, driving a transferred agent's turns. Only the host acts through a
//! host-held endpoint (the one a binding attaches for a transfer's agent, see
//! [`crate::binding`]); its caller is made by
//! [`TransferOwner::host_caller`](crate::TransferOwner::host_caller) alone, never from anything
//! a request carries.

use std::fmt;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::bounds::MAX_SUBJECT_BYTES;
use super::error::{ConversationError as Error, ConversationResult as Result};
use super::scope::Scope;

/// The subject of the local operator (the CLI, `ahp serve --stdio`): whoever holds the data
/// directory. Its communication principal owns the operator's agents and conversations, and the
/// agents of the transfers the operator created.
pub const OPERATOR_SUBJECT: &str = "operator:local";

/// Domain separator hashed before the subject.
const PRINCIPAL_DOMAIN: &[u8] = b"ahp:communication-principal:v1\0";

/// A communication principal: the hex SHA-256 of an authenticated subject.
#[derive(Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct CommunicationPrincipal(String);

impl CommunicationPrincipal {
    /// The principal of the authenticated `subject` (e.g. `account:42` or a shared-key id).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] if `subject` is empty or longer than [`MAX_SUBJECT_BYTES`].
    pub fn from_subject(subject: &str) -> Result<Self> {
        if subject.is_empty() || subject.len() > MAX_SUBJECT_BYTES {
            return Err(Error::invalid(
                "subject",
                format!("must be 1 to {MAX_SUBJECT_BYTES} bytes"),
            ));
        }
        let mut h = Sha256::new();
        h.update(PRINCIPAL_DOMAIN);
        h.update(subject.as_bytes());
        Ok(Self(hex::encode(h.finalize())))
    }

    /// The digest, as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for CommunicationPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CommunicationPrincipal({}…)", &self.0[..12])
    }
}

/// Who is behind a [`Caller`]: a client of the host's surfaces, or the host itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallerKind {
    /// A tool caller, a console user, the CLI: anyone with a credential for the principal.
    Client,
    /// The host, driving the turns of a transferred agent through the endpoint it holds.
    Host,
}

/// An authenticated caller: its principal, the scopes its credential carries, and whether it
/// is the host itself ([`CallerKind`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    principal: CommunicationPrincipal,
    read: bool,
    manage: bool,
    kind: CallerKind,
}

impl Caller {
    /// A client caller with `principal` holding exactly `scopes`.
    pub fn new(principal: CommunicationPrincipal, scopes: &[Scope]) -> Self {
        Self {
            principal,
            read: scopes.contains(&Scope::Read),
            manage: scopes.contains(&Scope::Manage),
            kind: CallerKind::Client,
        }
    }

    /// The host acting for `principal` with both scopes: the only caller admitted through a
    /// host-held endpoint. Crate-private: outside the store it is reached only through
    /// [`TransferOwner::host_caller`](crate::TransferOwner::host_caller).
    pub(crate) fn host_for(principal: CommunicationPrincipal) -> Self {
        Self {
            kind: CallerKind::Host,
            ..Self::new(principal, &[Scope::Read, Scope::Manage])
        }
    }

    /// Whether this is a client or the host.
    pub fn kind(&self) -> CallerKind {
        self.kind
    }

    /// Whether this is the host itself.
    pub fn is_host(&self) -> bool {
        self.kind == CallerKind::Host
    }

    /// A client caller for `subject` holding both scopes (the operator's CLI, and tests).
    ///
    /// # Errors
    ///
    /// As [`CommunicationPrincipal::from_subject`].
    pub fn full(subject: &str) -> Result<Self> {
        Ok(Self::new(
            CommunicationPrincipal::from_subject(subject)?,
            &[Scope::Read, Scope::Manage],
        ))
    }

    /// The caller's principal.
    pub fn principal(&self) -> &CommunicationPrincipal {
        &self.principal
    }

    /// Whether the caller holds `scope`.
    pub fn has(&self, scope: Scope) -> bool {
        match scope {
            Scope::Read => self.read,
            Scope::Manage => self.manage,
        }
    }

    /// Ok if the caller holds `scope`.
    ///
    /// # Errors
    ///
    /// [`Error::MissingScope`].
    pub fn require(&self, scope: Scope) -> Result<()> {
        if self.has(scope) {
            Ok(())
        } else {
            Err(Error::MissingScope(scope))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_are_stable_digests_that_hide_the_subject() {
        let a = CommunicationPrincipal::from_subject("account:42").unwrap();
        assert_eq!(a, CommunicationPrincipal::from_subject("account:42").unwrap());
        assert_ne!(a, CommunicationPrincipal::from_subject("account:43").unwrap());
        assert_eq!(a.as_str().len(), 64);
        assert!(!a.as_str().contains("account"));
        assert!(!format!("{a:?}").contains(a.as_str()));
    }

    #[test]
    fn subject_bounds() {
        assert!(CommunicationPrincipal::from_subject(&"s".repeat(MAX_SUBJECT_BYTES)).is_ok());
        assert!(matches!(
            CommunicationPrincipal::from_subject(&"s".repeat(MAX_SUBJECT_BYTES + 1)),
            Err(Error::InvalidInput { field: "subject", .. })
        ));
        assert!(CommunicationPrincipal::from_subject("").is_err());
    }

    #[test]
    fn scopes_are_independent() {
        let p = CommunicationPrincipal::from_subject("x").unwrap();
        let reader = Caller::new(p.clone(), &[Scope::Read]);
        assert!(reader.require(Scope::Read).is_ok());
        assert!(matches!(
            reader.require(Scope::Manage),
            Err(Error::MissingScope(Scope::Manage))
        ));
        let manager = Caller::new(p, &[Scope::Manage]);
        assert!(matches!(
            manager.require(Scope::Read),
            Err(Error::MissingScope(Scope::Read))
        ));
        assert_eq!(Scope::Manage.to_string(), "communication:manage");
    }

    #[test]
    fn only_the_host_constructor_makes_a_host_caller() {
        let p = CommunicationPrincipal::from_subject("x").unwrap();
        let client = Caller::new(p.clone(), &[Scope::Read, Scope::Manage]);
        assert_eq!(client.kind(), CallerKind::Client);
        assert!(!Caller::full("x").unwrap().is_host());
        let host = Caller::host_for(p.clone());
        assert!(host.is_host() && host.has(Scope::Read) && host.has(Scope::Manage));
        assert_eq!(host.principal(), &p);
        assert_ne!(host, client, "same principal and scopes, different caller");
    }
}
