//! Prefixed random identifiers.
//!
//! Every resource id is a short type prefix and 24 lowercase hex digits (96 random bits from the
//! operating system), e.g. `tr_3f9a0c…`. The prefix makes an id's kind visible in logs and lets
//! validation reject an agent id passed where a transfer id belongs before any lookup.

/// Length of the random part of an id, in hex digits.
pub const ID_RANDOM_HEX_LEN: usize = 24;

/// A fresh random id with the given prefix (which includes its `_`).
///
/// # Panics
///
/// If the operating system's random source fails, which on the platforms we support means the
/// process cannot do anything safely anyway.
pub fn new_id(prefix: &str) -> String {
    let bytes: [u8; ID_RANDOM_HEX_LEN / 2] = random_bytes();
    let mut id = String::with_capacity(prefix.len() + ID_RANDOM_HEX_LEN);
    id.push_str(prefix);
    id.push_str(&hex::encode(bytes));
    id
}

/// Whether `id` has exactly the shape [`new_id`] produces for `prefix`.
pub fn is_well_formed(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix).is_some_and(|rest| {
        rest.len() == ID_RANDOM_HEX_LEN && rest.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// `N` bytes from the operating system's random source.
///
/// # Panics
///
/// If the random source fails (see [`new_id`]).
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf).expect("operating system random source failed");
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_unique_and_well_formed() {
        let a = new_id("tr_");
        let b = new_id("tr_");
        assert_ne!(a, b);
        assert!(is_well_formed(&a, "tr_"));
        assert!(!is_well_formed(&a, "agt_"));
        assert!(!is_well_formed(&a[..a.len() - 1], "tr_"));
        assert!(!is_well_formed(&a.to_uppercase(), "TR_"));
    }
}
