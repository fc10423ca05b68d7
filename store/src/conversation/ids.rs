//! The domain's ids: the prefix of each kind (`agt_…`, `wk_…`, `tsk_…`), below every file that
//! mints or checks one. An id is the prefix and 128 random bits ([`crate::id`]); a malformed
//! one is refused by shape before any lookup.

/// Prefix of every wake attempt id.
pub const ATTEMPT_ID_PREFIX: &str = "wka_";

/// Prefix of every consume token.
pub const CONSUME_TOKEN_PREFIX: &str = "wct_";

/// Prefix of every conversation id.
pub const CONVERSATION_ID_PREFIX: &str = "cv_";

/// Prefix of every message id.
pub const MESSAGE_ID_PREFIX: &str = "msg_";

/// Prefix of every agent id.
pub const AGENT_ID_PREFIX: &str = "agt_";

/// Prefix of every endpoint id.
pub const ENDPOINT_ID_PREFIX: &str = "ep_";

/// Prefix of every wake id.
pub const WAKE_ID_PREFIX: &str = "wk_";

/// Prefix of every task attempt id.
pub const TASK_ATTEMPT_ID_PREFIX: &str = "tka_";

/// Prefix of every wait id.
pub const WAIT_ID_PREFIX: &str = "wait_";

/// Prefix of every attention event id.
pub const ATTENTION_EVENT_ID_PREFIX: &str = "att_";

/// Prefix of every goal id.
pub const GOAL_ID_PREFIX: &str = "goal_";

/// Prefix of every task id.
pub const TASK_ID_PREFIX: &str = "tsk_";
