//! How the controller tells an endpoint that is really gone from a step that merely failed,
//! and how it retries: the rules that keep a paid, `active` agent answering through a busy or
//! failing database.
//!
//! - **Gone** ([`Failure::Gone`]): the store says the carrier's endpoint is no longer the
//!   agent's live, wake-capable one — not current (replaced, detached), a stale generation,
//!   an expired lease, not wake-capable (the transfer left `active`), or not found. Only then
//!   is the carrier dropped (and its sandbox with it).
//! - **Transient** ([`Failure::Transient`]): the database was busy or locked, or a claim found
//!   an unresolved dispatch in the way (`LimitReached`). Short store writes that end a turn
//!   are retried in place ([`retry`]: [`IN_PLACE_ATTEMPTS`] tries, pausing with no lock held
//!   and, on a turn's task, the runtime's other tasks moved to another thread); a dispatch
//!   opportunity that hit one is rescheduled later with exponential backoff
//!   ([`reschedule_delay`]), at most [`MAX_RESCHEDULES`] times in a row, after which the
//!   reaper tick's safety net finds the agent again.
//! - **Refused** ([`Failure::Refused`]): anything else (a bug, a corrupt row): logged, the
//!   carrier kept, the next tick tries again.

use std::time::Duration;

use ahp_store::conversation::ConversationError;

/// Attempts [`retry`] makes at one store write while it fails transiently.
pub const IN_PLACE_ATTEMPTS: u32 = 4;

/// Pause before the second in-place attempt; each later pause is four times the one before
/// (10, 40, 160 ms): a competing writer's commit is one fsync.
pub const FIRST_IN_PLACE_PAUSE: Duration = Duration::from_millis(10);

/// Delay before the first rescheduled dispatch opportunity; each later one doubles, up to
/// [`MAX_RESCHEDULE_DELAY`].
pub const FIRST_RESCHEDULE_DELAY: Duration = Duration::from_millis(100);

/// Longest delay between rescheduled opportunities.
pub const MAX_RESCHEDULE_DELAY: Duration = Duration::from_secs(10);

/// Opportunities rescheduled in a row after transient failures before the controller leaves
/// the agent to the reaper tick (about 35 s of retries with the delays above).
pub const MAX_RESCHEDULES: u32 = 8;

/// What a failed store step means for the carrier. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The carrier's endpoint is gone: drop the carrier.
    Gone(String),
    /// Try again later; keep the carrier.
    Transient(String),
    /// A refusal that retrying does not fix; keep the carrier, log it.
    Refused(String),
}

impl Failure {
    /// The meaning of a conversation-domain error met by a carrier step.
    pub fn of(e: &ConversationError) -> Self {
        use ConversationError as E;
        let why = e.to_string();
        match e {
            E::EndpointNotCurrent { .. }
            | E::StaleGeneration { .. }
            | E::EndpointExpired { .. }
            | E::NotWakeCapable(_)
            | E::EndpointNotFound(_)
            | E::AgentNotFound(_) => Self::Gone(why),
            E::LimitReached { .. } => Self::Transient(why),
            e if e.is_transient() => Self::Transient(why),
            _ => Self::Refused(why),
        }
    }

    /// The meaning of a transfer-side store error met by a carrier step (reading its transfer
    /// or budget).
    pub fn of_store(e: &ahp_store::Error) -> Self {
        match e {
            ahp_store::Error::TransferNotFound(_) | ahp_store::Error::CarriedElsewhere { .. } => {
                Self::Gone(e.to_string())
            }
            ahp_store::Error::Conversation(c) => Self::of(c),
            e if e.is_transient() => Self::Transient(e.to_string()),
            e => Self::Refused(e.to_string()),
        }
    }

    /// Whether the endpoint is gone.
    pub fn is_gone(&self) -> bool {
        matches!(self, Self::Gone(_))
    }
}

/// Runs `step` until it succeeds or fails other than transiently, at most
/// [`IN_PLACE_ATTEMPTS`] times, pausing between tries (see [`blocking`](crate::shared_store::blocking);
/// `step` must take and release the store lock itself, so no lock is held while pausing).
pub fn retry<T>(mut step: impl FnMut() -> Result<T, ConversationError>) -> Result<T, ConversationError> {
    let mut pause = FIRST_IN_PLACE_PAUSE;
    let mut attempt = 1;
    loop {
        match step() {
            Err(e) if e.is_transient() && attempt < IN_PLACE_ATTEMPTS => {
                // On a turn's task: the runtime's other tasks move to another thread meanwhile.
                crate::shared_store::blocking(|| std::thread::sleep(pause));
                pause *= 4;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// The delay before the `n`th rescheduled opportunity in a row (`n` from 1), or `None` past
/// [`MAX_RESCHEDULES`].
pub fn reschedule_delay(n: u32) -> Option<Duration> {
    if n == 0 || n > MAX_RESCHEDULES {
        return None;
    }
    let doubled = FIRST_RESCHEDULE_DELAY.saturating_mul(1 << (n - 1).min(16));
    Some(doubled.min(MAX_RESCHEDULE_DELAY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_is_capped_and_bounded() {
        let delays: Vec<_> = (1..=MAX_RESCHEDULES).map(|n| reschedule_delay(n).unwrap()).collect();
        assert_eq!(delays[0], FIRST_RESCHEDULE_DELAY);
        assert_eq!(delays[1], FIRST_RESCHEDULE_DELAY * 2);
        assert!(delays.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*delays.last().unwrap(), MAX_RESCHEDULE_DELAY);
        assert_eq!(reschedule_delay(MAX_RESCHEDULES + 1), None);
        assert_eq!(reschedule_delay(0), None);
    }

    #[test]
    fn only_a_gone_endpoint_drops_the_carrier() {
        use ahp_store::conversation::EndpointState;
        let gone = [
            ConversationError::EndpointNotCurrent {
                endpoint: "ep_x".into(),
                state: EndpointState::Replaced,
            },
            ConversationError::StaleGeneration {
                endpoint: "ep_x".into(),
                given: 1,
                current: 2,
            },
            ConversationError::EndpointExpired {
                endpoint: "ep_x".into(),
            },
            ConversationError::NotWakeCapable("ep_x".into()),
            ConversationError::EndpointNotFound("ep_x".into()),
            ConversationError::AgentNotFound("agt_x".into()),
        ];
        for e in &gone {
            assert!(Failure::of(e).is_gone(), "{e}");
        }
        let busy = ConversationError::Database(ahp_store::sql::SqlError::Busy("database is locked".into()));
        assert!(matches!(Failure::of(&busy), Failure::Transient(_)));
        let limit = ConversationError::LimitReached { what: "x", limit: 1 };
        assert!(matches!(Failure::of(&limit), Failure::Transient(_)));
        let refused = ConversationError::WakeNotFound("wk_x".into());
        assert!(matches!(Failure::of(&refused), Failure::Refused(_)));
        assert!(Failure::of_store(&ahp_store::Error::TransferNotFound("tr_x".into())).is_gone());
        assert!(matches!(
            Failure::of_store(&ahp_store::Error::Busy { attempts: 4 }),
            Failure::Transient(_)
        ));
    }

    #[test]
    fn retry_stops_at_success_at_a_refusal_and_at_its_bound() {
        let busy = || ConversationError::Database(ahp_store::sql::SqlError::Busy("database is locked".into()));
        let mut calls = 0;
        let got = retry(|| {
            calls += 1;
            if calls < 3 { Err(busy()) } else { Ok(calls) }
        });
        assert_eq!(got.unwrap(), 3);
        let mut calls = 0;
        let got: Result<(), _> = retry(|| {
            calls += 1;
            Err(busy())
        });
        assert!(got.unwrap_err().is_transient());
        assert_eq!(calls, IN_PLACE_ATTEMPTS);
        let mut calls = 0;
        let got: Result<(), _> = retry(|| {
            calls += 1;
            Err(ConversationError::WakeNotFound("wk_x".into()))
        });
        assert!(got.is_err());
        assert_eq!(calls, 1, "a refusal is not retried");
    }
}
