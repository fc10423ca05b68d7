//! Console sessions: a signed-in API key becomes a random session id in an `HttpOnly`,
//! `SameSite=Strict` cookie, and every state-changing form carries the session's CSRF token.
//!
//! Sessions live in this process's memory only (a restart signs everyone out) and hold the
//! principal's *id*, never its key: each request re-reads the principal, so a revoked key's
//! sessions stop working at once. The table is bounded ([`MAX_SESSIONS`]), and so is each
//! principal's share of it ([`MAX_SESSIONS_PER_PRINCIPAL`]): a principal signing in past its cap
//! signs out its own least recently used session, never anyone else's. Sessions end after
//! [`SESSION_IDLE`] without a request, and when the whole table is full the least recently used
//! one is dropped. A key without scopes gets no session at all (the sign-in refuses it).

use crate::shared_store::StoreLock;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// Name of the session cookie.
pub const COOKIE: &str = "ahp_console";
/// Most sessions kept at once: one per person is the norm, and each costs ~200 bytes.
pub const MAX_SESSIONS: usize = 1024;
/// Most sessions one principal keeps at once. A person signs in from a few browsers, a team
/// sharing a key from a few more; sixteen covers both. Without this cap a single key (or a
/// script holding one) could sign in [`MAX_SESSIONS`] times and, through the table's
/// least-recently-used eviction, sign every other person out. Past it the principal's own
/// least recently used session is dropped, so a person who lost a cookie can always sign in
/// again; filling the table now takes [`MAX_SESSIONS`] / 16 = 64 distinct keys, which only the
/// operator can mint.
pub const MAX_SESSIONS_PER_PRINCIPAL: usize = 16;
/// A session unused this long is signed out.
pub const SESSION_IDLE: Duration = Duration::from_secs(12 * 3600);

/// A signed-in browser.
#[derive(Clone, PartialEq, Eq)]
pub struct Session {
    /// The principal signed in (`prn_…`).
    pub principal_id: String,
    /// The token every POST of this session must carry.
    pub csrf: String,
    last_seen: Instant,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("principal_id", &self.principal_id)
            .finish_non_exhaustive()
    }
}

/// The table of live sessions, keyed by the SHA-256 of their cookie value (so the table itself
/// holds nothing a browser could present).
#[derive(Default)]
pub struct Sessions {
    by_digest: Mutex<HashMap<[u8; 32], Session>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    hex::encode(bytes)
}

impl Sessions {
    /// Starts a session for `principal_id`; returns the cookie value and the session. When the
    /// principal already holds [`MAX_SESSIONS_PER_PRINCIPAL`] sessions its least recently used
    /// one ends; when the table holds [`MAX_SESSIONS`], the least recently used of all ends.
    pub fn start(&self, principal_id: &str) -> (String, Session) {
        let id = random_hex();
        let session = Session {
            principal_id: principal_id.to_owned(),
            csrf: random_hex(),
            last_seen: Instant::now(),
        };
        let mut table = self.by_digest.locked();
        let now = Instant::now();
        table.retain(|_, s| now.duration_since(s.last_seen) < SESSION_IDLE);
        let own = table.values().filter(|s| s.principal_id == principal_id).count();
        if own >= MAX_SESSIONS_PER_PRINCIPAL
            && let Some(oldest) = table
                .iter()
                .filter(|(_, s)| s.principal_id == principal_id)
                .min_by_key(|(_, s)| s.last_seen)
                .map(|(k, _)| *k)
        {
            table.remove(&oldest);
        }
        if table.len() >= MAX_SESSIONS
            && let Some(oldest) = table.iter().min_by_key(|(_, s)| s.last_seen).map(|(k, _)| *k)
        {
            table.remove(&oldest);
        }
        table.insert(digest(&id), session.clone());
        (id, session)
    }

    /// The live session the cookie value `id` names, refreshed; `None` if unknown or idle too
    /// long (an idle one is removed).
    pub fn find(&self, id: &str) -> Option<Session> {
        if id.len() != 64 {
            return None;
        }
        let mut table = self.by_digest.locked();
        let key = digest(id);
        let now = Instant::now();
        match table.get_mut(&key) {
            Some(s) if now.duration_since(s.last_seen) < SESSION_IDLE => {
                s.last_seen = now;
                Some(s.clone())
            }
            Some(_) => {
                table.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Ends the session `id` names, if any.
    pub fn end(&self, id: &str) {
        self.by_digest.locked().remove(&digest(id));
    }

    /// Live sessions.
    pub fn len(&self) -> usize {
        self.by_digest.locked().len()
    }

    /// Live sessions of `principal_id`.
    pub fn count_for(&self, principal_id: &str) -> usize {
        self.by_digest
            .locked()
            .values()
            .filter(|s| s.principal_id == principal_id)
            .count()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether `given` equals the session's CSRF token, compared in constant time.
pub fn csrf_matches(session: &Session, given: &str) -> bool {
    let (a, b) = (session.csrf.as_bytes(), given.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The value of cookie `name` in a `Cookie` header, if present.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The `Set-Cookie` value that stores session `id`.
pub fn set_cookie(id: &str) -> String {
    format!("{COOKIE}={id}; Path=/console; HttpOnly; SameSite=Strict")
}

/// The `Set-Cookie` value that clears the session cookie.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_found_by_its_cookie_until_it_ends() {
        let sessions = Sessions::default();
        let (id, s) = sessions.start("prn_1");
        assert_eq!(id.len(), 64);
        assert_eq!(sessions.find(&id).map(|x| x.principal_id), Some("prn_1".into()));
        assert!(csrf_matches(&s, &s.csrf));
        assert!(!csrf_matches(&s, &s.csrf[1..]));
        assert!(!csrf_matches(&s, &"0".repeat(64)));
        assert_eq!(sessions.find(&"0".repeat(64)), None);
        assert_eq!(sessions.find("short"), None);
        sessions.end(&id);
        assert_eq!(sessions.find(&id), None);
    }

    #[test]
    fn the_table_is_bounded_and_drops_the_least_recently_used() {
        let sessions = Sessions::default();
        let (first, _) = sessions.start("prn_first");
        // Distinct principals, each below its own cap, fill the table.
        let ids: Vec<String> = (0..MAX_SESSIONS)
            .map(|i| sessions.start(&format!("prn_{i}")).0)
            .collect();
        assert_eq!(sessions.len(), MAX_SESSIONS);
        assert_eq!(sessions.find(&first), None, "the oldest session made room");
        assert!(sessions.find(&ids[0]).is_some());
        assert!(sessions.find(ids.last().unwrap()).is_some());
    }

    #[test]
    fn a_principal_holds_at_most_its_cap_and_one_past_it_ends_only_its_own_oldest() {
        let sessions = Sessions::default();
        let (other, _) = sessions.start("prn_other");
        let mine: Vec<String> = (0..MAX_SESSIONS_PER_PRINCIPAL)
            .map(|_| sessions.start("prn_busy").0)
            .collect();
        // At the cap: every one of them is live.
        assert_eq!(sessions.count_for("prn_busy"), MAX_SESSIONS_PER_PRINCIPAL);
        assert!(mine.iter().all(|id| sessions.find(id).is_some()));
        // Use the oldest again: the least recently used is now the second.
        assert!(sessions.find(&mine[0]).is_some());
        // One past the cap: the principal's least recently used session ends, nobody else's.
        let (newest, _) = sessions.start("prn_busy");
        assert_eq!(sessions.count_for("prn_busy"), MAX_SESSIONS_PER_PRINCIPAL);
        assert_eq!(sessions.find(&mine[1]), None, "its own least recently used ended");
        assert!(sessions.find(&mine[0]).is_some() && sessions.find(&newest).is_some());
        assert!(
            sessions.find(&other).is_some(),
            "another principal's session is untouched"
        );
        // A key signing in over and over never grows past its cap.
        for _ in 0..3 * MAX_SESSIONS_PER_PRINCIPAL {
            sessions.start("prn_busy");
        }
        assert_eq!(sessions.count_for("prn_busy"), MAX_SESSIONS_PER_PRINCIPAL);
        assert_eq!(sessions.len(), MAX_SESSIONS_PER_PRINCIPAL + 1);
    }

    #[test]
    fn cookies_parse_and_are_http_only_strict() {
        assert_eq!(cookie("a=1; ahp_console=xyz; b=2", COOKIE), Some("xyz"));
        assert_eq!(cookie("ahp_consolex=1", COOKIE), None);
        assert_eq!(cookie("", COOKIE), None);
        let c = set_cookie("abc");
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.contains("Path=/console"));
        assert!(clear_cookie().contains("Max-Age=0"));
    }
}
