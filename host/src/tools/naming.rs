//! The names a guest (and its model) calls tools by: unique across the reachable servers and
//! safe for every provider's tool-name rule (`a-z A-Z 0-9 _ -`, 1 to 64 bytes, what OpenAI's
//! Chat Completions accepts and Anthropic's Messages too).
//!
//! A tool keeps the server's own name when it is already safe and no other reachable server
//! has a tool of that name; otherwise it is named after its server's position and its name
//! (`s2_search`, positions from 1 in the snapshot's order), each unsafe byte replaced by `_`
//! and the result cut to 64 bytes. A tool whose name still collides (or is empty) is left out.

use std::collections::{BTreeMap, BTreeSet};

/// Longest tool name, in bytes.
pub const MAX_TOOL_NAME_BYTES: usize = 64;

/// Whether `name` is a safe tool name.
pub fn is_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `s{position}_{name}`, unsafe bytes replaced and cut to the bound.
fn qualified(position: usize, name: &str) -> String {
    let mut out = format!("s{position}_");
    for c in name.chars() {
        if out.len() >= MAX_TOOL_NAME_BYTES {
            break;
        }
        out.push(if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            c
        } else {
            '_'
        });
    }
    out
}

/// The names for `tools`, each `(server position from 1, the server's name)` in order: one
/// entry per tool, `None` for a tool left out.
pub fn assign(tools: &[(usize, &str)]) -> Vec<Option<String>> {
    let mut servers_of: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    for &(server, name) in tools {
        servers_of.entry(name).or_default().insert(server);
    }
    let mut taken = BTreeSet::new();
    tools
        .iter()
        .map(|&(server, name)| {
            let plain = is_safe(name) && servers_of[name].len() == 1;
            let candidate = if plain {
                name.to_owned()
            } else {
                qualified(server, name)
            };
            (is_safe(&candidate) && taken.insert(candidate.clone())).then_some(candidate)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_safe_names_keep_the_servers_own() {
        let names = assign(&[(1, "inventory"), (1, "search"), (2, "search"), (2, "weather")]);
        assert_eq!(
            names,
            [Some("inventory"), Some("s1_search"), Some("s2_search"), Some("weather")].map(|n| n.map(String::from))
        );
    }

    #[test]
    fn unsafe_names_are_rewritten_and_cut_to_the_bound() {
        let long = "x".repeat(70);
        let names = assign(&[(1, "get.weather"), (1, &long), (3, "")]);
        assert_eq!(names[0].as_deref(), Some("s1_get_weather"));
        let cut = names[1].as_deref().unwrap();
        assert_eq!(cut.len(), MAX_TOOL_NAME_BYTES);
        assert!(is_safe(cut));
        assert_eq!(
            names[2].as_deref(),
            Some("s3_"),
            "an empty name gets its server's prefix"
        );
        assert!(is_safe(&"a".repeat(64)));
        assert!(!is_safe(&"a".repeat(65)), "one past the bound");
    }

    #[test]
    fn a_name_that_still_collides_is_left_out() {
        // `s1_a` is a tool's own (safe, unique) name and also `a` of server 1 qualified.
        let names = assign(&[(1, "s1_a"), (1, "a"), (2, "a")]);
        assert_eq!(names, [Some("s1_a".to_owned()), None, Some("s2_a".to_owned())]);
    }
}
