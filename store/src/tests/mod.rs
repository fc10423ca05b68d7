//! Whole-store tests of the transfer side through the public API, on either backend (see
//! `crate::testing`): once integration tests in `store/tests/`, here so that they reach the
//! test harness that picks the backend, opens second connections and compares rows.
//!
//! - `lifecycle`: the transfer state machine over every (phase × operation) pair, tokens,
//!   the reapers, racing connections, a busy database;
//! - `ownership`: a principal's transfers are its own; another's is refused as a missing one.

mod lifecycle;
mod ownership;
