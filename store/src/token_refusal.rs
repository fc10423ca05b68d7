//! Why a transfer token was refused, and which parameter a refused binding names: the error's
//! own vocabulary, below the store's [`Error`](crate::Error) that wraps it and the token module
//! that refuses.

use std::fmt;

/// Why a token was refused. The token is never consumed when refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    /// Not a token: wrong shape, length or version.
    #[error("malformed token")]
    Malformed,
    /// The MAC does not match: forged, altered, truncated or minted with another key.
    #[error("bad signature")]
    BadSignature,
    /// Past its expiry time.
    #[error("token expired")]
    Expired,
    /// Minted for another transfer.
    #[error("token was issued for another transfer")]
    WrongTransfer,
    /// Minted for another operation.
    #[error("token was issued for another operation")]
    WrongScope,
    /// Already consumed; a retry needs a new token.
    #[error("token was already used")]
    Replayed,
    /// The request differs from a parameter the token fixes.
    #[error("the token does not allow this {0}")]
    Binding(Bound),
}

/// A parameter a token can fix ([`TokenBindings`](crate::TokenBindings)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bound {
    /// `provision_runtime`'s tier.
    Tier,
    /// `provision_runtime`'s budget (the token caps it).
    Budget,
    /// `provision_runtime`'s component.
    Component,
    /// The snapshot checksum an `activate` token was issued for.
    Checksum,
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Tier => "tier",
            Self::Budget => "budget (over the token's cap)",
            Self::Component => "component",
            Self::Checksum => "snapshot (its checksum changed since the token was issued)",
        })
    }
}
