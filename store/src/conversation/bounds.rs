//! Every bound of the conversation domain, in one place, with why it has its value.
//!
//! Everything that arrives from outside — strings, lists, durations, counts — is checked
//! against one of these before a transaction starts, and counts that grow with use (agents,
//! open conversations, participants, messages) are checked inside the transaction that would
//! exceed them. Each is tested at the limit and one past it.

use std::time::Duration;

use super::error::{ConversationError as Error, ConversationResult as Result};

/// Longest authenticated subject hashed into a principal, in bytes (account ids and key ids
/// are short; this only stops a hostile caller from making us hash megabytes).
pub const MAX_SUBJECT_BYTES: usize = 512;

/// Longest agent handle, in bytes. Handles are short mention names (`[a-z0-9._-]`).
pub const MAX_HANDLE_BYTES: usize = 64;
/// Longest agent display name, in bytes: one line in a participant list.
pub const MAX_DISPLAY_NAME_BYTES: usize = 128;
/// Longest agent description, in bytes: a paragraph of self-description, not a document.
pub const MAX_DESCRIPTION_BYTES: usize = 4096;
/// Most specialty labels on an agent card: enough to describe, too few to keyword-stuff.
pub const MAX_SPECIALTIES: usize = 16;
/// Longest specialty label, in bytes.
pub const MAX_SPECIALTY_BYTES: usize = 48;
/// Most agents one principal may create with `create_agent`. An owner with more is almost
/// certainly leaking them. Agents that transfers became ([`Store::bind_transfer_agent`](crate::Store::bind_transfer_agent))
/// are not counted: there is one per activated transfer, so transfers bound them (and
/// [`MAX_AGENTS`] still does), and an owner's busy day of transfers must not stop it creating
/// its own agents, nor its agents stop a transfer from activating.
pub const MAX_AGENTS_PER_PRINCIPAL: u64 = 256;
/// Most agents in the whole store, however they were made (including the agents transfers
/// became): a parked agent costs only its rows, so this is sized for a million parked agents
/// with room to spare. The count is one maintained row (`agent_total`), so the ceiling costs an
/// insert nothing at any size. A host's dispatch queue holds at most one slot per agent, so this
/// is also the most it may hold (a slot exists only while the agent is queued).
pub const MAX_AGENTS: u64 = 2_000_000;

/// Shortest endpoint lease: below a second, renewal traffic would dominate.
pub const MIN_ENDPOINT_LEASE: Duration = Duration::from_secs(1);
/// Longest endpoint lease: a vanished host holds its agent's controller slot at most this long.
pub const MAX_ENDPOINT_LEASE: Duration = Duration::from_secs(3600);
/// Attached endpoints per agent. An agent has exactly one controller at a time: attaching
/// another endpoint replaces the current one (enforced by a unique index, too).
pub const MAX_ATTACHED_ENDPOINTS_PER_AGENT: u64 = 1;

/// Longest conversation title, in bytes.
pub const MAX_TITLE_BYTES: usize = 200;
/// Most agent participants in one conversation. Every post writes one delivery and one wake
/// per agent participant in a single fsynced transaction, so this bounds a post's cost.
pub const MAX_AGENT_PARTICIPANTS: usize = 64;
/// Most open conversations whose human participant is one principal (closing one frees a slot).
pub const MAX_OPEN_CONVERSATIONS_PER_PRINCIPAL: u64 = 1000;
/// Most conversations in the whole store, open or closed (closed ones keep their transcripts,
/// so closing frees no room here): a bound on what the operator's listings walk.
pub const MAX_CONVERSATIONS: u64 = 250_000;
/// Most messages in one conversation; beyond this, start a new conversation.
pub const MAX_MESSAGES_PER_CONVERSATION: u64 = 1_000_000;

/// Longest message body, in bytes (64 KiB: a long chat message, not a file transfer).
pub const MAX_MESSAGE_BODY_BYTES: usize = 64 * 1024;
/// Most replies one dispatched wake can post under wake-scoped reply identities
/// (operation indexes `0..MAX_WAKE_REPLY_OPERATIONS`).
pub const MAX_WAKE_REPLY_OPERATIONS: u32 = 64;

/// Longest idempotency key, in bytes (room for a UUID or a ULID with a prefix).
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 128;

/// How long an idempotency record is kept. A retry after a lost response comes within seconds
/// or minutes; a week covers a host that was down over a weekend. An older record is pruned
/// (on its principal's next write), after which the same key starts a new operation.
pub const IDEMPOTENCY_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Most wakes of one agent that crossed the dispatch fence and are still unresolved (their
/// attempt dispatched or accepted through the agent's current endpoint, not yet consumed): a
/// turn is running for it, so another wake would be a second concurrent turn. Consume it first.
pub const MAX_UNRESOLVED_DISPATCHED_WAKES_PER_AGENT: u64 = 1;

/// Most deliveries one call consumes at once ([`Store::consume_deliveries`](crate::Store::consume_deliveries),
/// a turn's end): a turn may consume at most this many, so its end records them all.
pub const MAX_TURN_CONSUMES: usize = 256;

/// Most items one list page returns (transcripts, inboxes, agent and conversation lists).
pub const MAX_PAGE_LIMIT: usize = 200;

/// Shortest wake claim lease.
pub const MIN_CLAIM_LEASE: Duration = Duration::from_secs(1);
/// Longest wake claim lease: how long a crashed carrier can hold a wake before the claim is
/// released back to pending.
pub const MAX_CLAIM_LEASE: Duration = Duration::from_secs(300);

/// Checks a required free-text field: not blank, at most `max` bytes, no control characters
/// other than newline and tab.
pub(crate) fn text(field: &'static str, value: &str, max: usize, allow_empty: bool) -> Result<()> {
    if (!allow_empty && value.trim().is_empty()) || value.len() > max {
        let at_least = if allow_empty { 0 } else { 1 };
        return Err(Error::invalid(
            field,
            format!("must be {at_least} to {max} bytes and not blank"),
        ));
    }
    if value.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(Error::invalid(field, "must not contain control characters"));
    }
    Ok(())
}

/// Checks a short token-like field: 1 to `max` bytes of `[a-z0-9._-]`, starting alphanumeric.
pub(crate) fn slug(field: &'static str, value: &str, max: usize) -> Result<()> {
    let ok = !value.is_empty()
        && value.len() <= max
        && value.as_bytes()[0].is_ascii_alphanumeric()
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            format!("must be 1 to {max} of a-z, 0-9, '.', '_', '-', starting with a letter or digit"),
        ))
    }
}

/// Checks a page size: 1 to [`MAX_PAGE_LIMIT`].
pub(crate) fn page_limit(limit: usize) -> Result<()> {
    if limit == 0 || limit > MAX_PAGE_LIMIT {
        return Err(Error::invalid("limit", format!("must be 1 to {MAX_PAGE_LIMIT}")));
    }
    Ok(())
}

/// Checks a lease duration against `min..=max`.
pub(crate) fn lease(field: &'static str, d: Duration, min: Duration, max: Duration) -> Result<()> {
    if d < min || d > max {
        return Err(Error::invalid(
            field,
            format!("must be {} to {} seconds", min.as_secs(), max.as_secs()),
        ));
    }
    Ok(())
}

/// Checks an id's shape before any lookup.
pub(crate) fn id(field: &'static str, value: &str, prefix: &str) -> Result<()> {
    if crate::id::is_well_formed(value, prefix) {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            format!("is not a well-formed id ({prefix} followed by 24 lowercase hex digits)"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_bounds_at_limit_and_past_it() {
        assert!(text("title", &"a".repeat(MAX_TITLE_BYTES), MAX_TITLE_BYTES, false).is_ok());
        assert!(text("title", &"a".repeat(MAX_TITLE_BYTES + 1), MAX_TITLE_BYTES, false).is_err());
        assert!(text("title", "  ", MAX_TITLE_BYTES, false).is_err());
        assert!(text("description", "", 10, true).is_ok());
        assert!(text("title", "a\u{0}b", 10, false).is_err());
        assert!(text("body", "line\nline\t", 20, false).is_ok());
    }

    #[test]
    fn slug_and_page_and_lease_bounds() {
        assert!(slug("handle", &"a".repeat(MAX_HANDLE_BYTES), MAX_HANDLE_BYTES).is_ok());
        assert!(slug("handle", &"a".repeat(MAX_HANDLE_BYTES + 1), MAX_HANDLE_BYTES).is_err());
        assert!(slug("handle", "-x", 10).is_err());
        assert!(slug("handle", "Ab", 10).is_err());
        assert!(page_limit(MAX_PAGE_LIMIT).is_ok());
        assert!(page_limit(MAX_PAGE_LIMIT + 1).is_err());
        assert!(page_limit(0).is_err());
        assert!(lease("lease", MAX_ENDPOINT_LEASE, MIN_ENDPOINT_LEASE, MAX_ENDPOINT_LEASE).is_ok());
        assert!(
            lease(
                "lease",
                MAX_ENDPOINT_LEASE + Duration::from_secs(1),
                MIN_ENDPOINT_LEASE,
                MAX_ENDPOINT_LEASE
            )
            .is_err()
        );
    }
}
