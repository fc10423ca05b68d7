//! The two communication scopes a credential may carry. They gate the domain independently:
//! [`Scope::Read`] does not imply [`Scope::Manage`], nor the reverse (a [`Caller`](super::Caller)
//! checks one before every operation touches the database).

use std::fmt;

use serde::Serialize;

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
