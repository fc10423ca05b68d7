//! The store's error type.
//!
//! Every failure a caller can act on has its own variant: bad input names the field, a refused
//! transition names the operation and the current state, a refused token says why. SQLite and
//! I/O failures pass through unchanged; an I/O error on commit is never retried here, because
//! after a failed fsync SQLite cannot say what reached the disk. A busy or locked database is
//! retried by the store itself and, if it stays busy, reported as [`Error::Busy`]; callers
//! tell such transient failures from refusals with [`Error::is_transient`].

use crate::conversation::ConversationError;
use crate::state::{Operation, Phase};
use crate::token_refusal::TokenRefusal;

/// The store's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a store operation can fail with. Any error means the operation changed nothing,
/// except [`Error::MoveTargetNotLive`], which says what it dropped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An input from outside broke a documented rule or bound.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The offending field, in the caller's vocabulary (e.g. `messageHistory[3].role`).
        field: String,
        /// What rule it broke, including the bound where there is one.
        reason: String,
    },

    /// No transfer with this id exists.
    #[error("transfer {0} not found")]
    TransferNotFound(String),

    /// The operation has no edge out of the transfer's current state.
    #[error("cannot {operation} transfer {transfer}: it is {phase}")]
    InvalidTransition {
        /// The transfer.
        transfer: String,
        /// What was attempted.
        operation: Operation,
        /// Where the transfer is.
        phase: Phase,
    },

    /// `activate` while another activation of the same transfer is still running.
    #[error("cannot activate transfer {transfer}: an activation is already in progress")]
    ActivationInProgress {
        /// The transfer.
        transfer: String,
    },

    /// `push_state` was given a checksum that is not the snapshot's.
    #[error("checksum mismatch for transfer {transfer}: snapshot has {expected}, caller sent {given}")]
    ChecksumMismatch {
        /// The transfer.
        transfer: String,
        /// The checksum `snapshot_state` computed.
        expected: String,
        /// The checksum the caller sent.
        given: String,
    },

    /// A transfer token was refused; see [`TokenRefusal`] for why.
    #[error("transfer token refused: {0}")]
    Token(#[from] TokenRefusal),

    /// The operation needs a transfer-token key and none was configured on this [`Store`](crate::Store).
    #[error("no transfer-token key is configured on this store")]
    NoTokenKey,

    /// The token key (secret) is unusable.
    #[error("transfer-token key: {0}")]
    TokenKey(String),

    /// The database was written by a newer ahp with a schema this build does not know.
    #[error("database schema version {found} is newer than this build supports ({supported}); upgrade ahp")]
    SchemaTooNew {
        /// The version the database records (`PRAGMA user_version` on SQLite).
        found: i64,
        /// The newest version this build can migrate to.
        supported: i64,
    },

    /// A PostgreSQL database whose schema its backend crate has not migrated to this build's
    /// (`ahp_store_postgres::open` migrates it).
    #[error("database schema version {found} is older than this build's ({supported}); migrate it first")]
    SchemaBehind {
        /// The version the database records.
        found: i64,
        /// This build's version.
        supported: i64,
    },

    /// A row holds a value this build cannot interpret (e.g. an unknown status). Fails closed.
    #[error("corrupt row in {table}: {reason}")]
    CorruptRow {
        /// The table read.
        table: &'static str,
        /// What was wrong.
        reason: String,
    },

    /// The database stayed busy or locked (another writer held it) through every attempt of
    /// [`Store::write`](crate::Store); nothing was changed and the same call may simply be made
    /// again. Never a refusal: a token presented with it is still unspent.
    #[error("the database stayed busy through {attempts} attempts; nothing was changed, try again")]
    Busy {
        /// Attempts made, each waiting out the busy timeout.
        attempts: u32,
    },

    /// This process no longer holds its host lease: it ran out, another host claimed this
    /// host's agents, the host stopped, or a newer incarnation of it joined. The process must
    /// stop every sandbox it runs (another host may run its agents now).
    #[error("host {host} lost its lease: {why}")]
    HostLeaseLost {
        /// The host id.
        host: String,
        /// Why.
        why: String,
    },

    /// Another process serves as this host id: its incarnation's lease has not run out. Joining
    /// would fence it out, and its own rejoin this one, in a loop
    /// ([`Store::take_over_host`](crate::Store::take_over_host) fences it out on purpose).
    #[error(
        "host {host} is in use: incarnation {incarnation}{} holds its lease until {until}; \
         another process serves as this host",
        address.as_deref().map(|a| format!(" serving at {a}")).unwrap_or_default()
    )]
    HostInUse {
        /// The host id.
        host: String,
        /// The incarnation that holds it.
        incarnation: u64,
        /// The address that incarnation serves at, if it serves one.
        address: Option<String>,
        /// When its lease runs out unless renewed.
        until: crate::clock::Timestamp,
    },

    /// The transfer's agent is carried by another host (after a takeover or a move): this host
    /// may not write its state.
    #[error("transfer {transfer} is carried by host {host}, not this one")]
    CarriedElsewhere {
        /// The transfer.
        transfer: String,
        /// The host that carries it.
        host: String,
    },

    /// A live move's receiving host is not live any more (it stopped, its lease ran out, or
    /// another host claimed its agents), so the carrying host did not hand the agent over: it
    /// would never have been bound again. The move was dropped (the one change this refusal
    /// makes); the agent stays with the host that carries it, and the operator may ask again.
    #[error("cannot hand transfer {transfer} over to host {host}: {why}; the move was dropped")]
    MoveTargetNotLive {
        /// The transfer whose agent was to move.
        transfer: String,
        /// The receiving host the move named.
        host: String,
        /// Why it cannot receive the agent.
        why: String,
    },

    /// A conversation-domain step of a transfer operation (binding a transfer's agent) was
    /// refused, e.g. [`ConversationError::LimitReached`] at the store's agent ceiling or an
    /// endpoint refusal. Bad input, database failures and corrupt rows of that domain are
    /// reported as [`Error::InvalidInput`], [`Error::Database`] and [`Error::CorruptRow`] instead
    /// (so [`Error::is_transient`] sees a busy database whichever domain met it).
    #[error(transparent)]
    Conversation(ConversationError),

    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] ahp_store_sql::SqlError),

    /// A file operation (database directory, key file) failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Whether the failure is transient — the database was busy or locked — rather than a
    /// refusal or a fault: nothing was changed, and the same call may succeed if made again.
    /// Callers must not treat a transient error as the operation being refused (spend a token,
    /// end a transfer).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Busy { .. } => true,
            Self::Database(e) => e.is_transient(),
            _ => false,
        }
    }

    /// An [`Error::CorruptRow`] in `table`.
    pub(crate) fn corrupt(table: &'static str, reason: impl Into<String>) -> Self {
        Self::CorruptRow {
            table,
            reason: reason.into(),
        }
    }

    /// An [`Error::InvalidInput`] for `field`.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidInput {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl From<ConversationError> for Error {
    fn from(e: ConversationError) -> Self {
        match e {
            ConversationError::Database(e) => Self::Database(e),
            ConversationError::CorruptRow { table, reason } => Self::CorruptRow { table, reason },
            ConversationError::InvalidInput { field, reason } => Self::InvalidInput {
                field: field.to_owned(),
                reason,
            },
            other => Self::Conversation(other),
        }
    }
}

impl WriteError for Error {
    fn is_transient(&self) -> bool {
        Error::is_transient(self)
    }

    fn exhausted(self, attempts: u32) -> Self {
        Self::Busy { attempts }
    }
}

/// What the write path needs of an operation's error type: whether it is a busy database
/// (run the whole transaction again), and what to report when every attempt was busy.
pub(crate) trait WriteError: From<ahp_store_sql::SqlError> {
    /// The failure was contention alone; nothing was committed.
    fn is_transient(&self) -> bool;

    /// The error to report after `attempts` busy attempts (by default the last one).
    fn exhausted(self, _attempts: u32) -> Self
    where
        Self: Sized,
    {
        self
    }
}
