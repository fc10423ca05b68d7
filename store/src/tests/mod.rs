//! Whole-store tests of the transfer side through the public API, on either backend (see
//! `crate::testing`): once integration tests in `store/tests/`, here so that they reach the
//! test harness that picks the backend, opens second connections and compares rows.
//!
//! - `activation_writes`: an activation's held writes recorded with its end;
//! - `lifecycle`: the transfer state machine over every (phase × operation) pair, tokens,
//!   the reapers, racing connections, a busy database;
//! - `ownership`: a principal's transfers are its own; another's is refused as a missing one.

mod activation_writes;
mod lifecycle;
mod ownership;
