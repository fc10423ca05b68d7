//! Communication principals and scopes: who is calling, and what they may do.
//!
//! A [`CommunicationPrincipal`] is a stable SHA-256 digest of an authenticated subject (an account or a
//! shared-key subject), domain-separated so it cannot collide with other hashes in the system;
//! the subject itself and any secret behind it are never stored or returned. Two scopes gate the
//! domain and are independent: [`Scope::Read`] does not imply [`Scope::Manage`], nor the reverse.
//! Every operation takes a [`Caller`] and checks its scope before it touches the database.

use std::fmt;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::bounds::MAX_SUBJECT_BYTES;
use super::error::{ConversationError as Error, ConversationResult as Result};

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

/// A communication scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Scope {
    /// `communication:read`: list and read agents, conversations, transcripts and inboxes.
    #[serde(rename = "communication:read")]
    Read,
    /// `communication:manage`: create and change agents, endpoints, conversations, messages,
    /// deliveries and wakes.
    #[serde(rename = "communication:manage")]
    Manage,
}

impl Scope {
    /// The scope's name as granted to credentials.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Read => "communication:read",
            Self::Manage => "communication:manage",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An authenticated caller: its principal and the scopes its credential carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    principal: CommunicationPrincipal,
    read: bool,
    manage: bool,
}

impl Caller {
    /// A caller with `principal` holding exactly `scopes`.
    pub fn new(principal: CommunicationPrincipal, scopes: &[Scope]) -> Self {
        Self {
            principal,
            read: scopes.contains(&Scope::Read),
            manage: scopes.contains(&Scope::Manage),
        }
    }

    /// A caller for `subject` holding both scopes (convenient for hosts and tests).
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
}
