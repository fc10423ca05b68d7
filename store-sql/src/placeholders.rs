//! Placeholder rewriting: the store writes `?N`, PostgreSQL reads `$N`.

/// Rewrites every `?N` placeholder outside string literals, quoted identifiers and comments
/// into `$N`. A bare `?` (no digits) is left alone: the store never writes one.
pub fn numbered_to_dollar(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                // Copy up to the closing quote; a doubled quote is an escaped one and the
                // loop simply re-enters the literal.
                for d in chars.by_ref() {
                    out.push(d);
                    if d == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == '\n' {
                        break;
                    }
                }
            }
            '?' if chars.peek().is_some_and(char::is_ascii_digit) => out.push('$'),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::numbered_to_dollar;

    #[test]
    fn rewrites_placeholders_but_not_literals_or_comments() {
        assert_eq!(
            numbered_to_dollar("SELECT a FROM t WHERE b = ?1 AND c = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = $12"
        );
        assert_eq!(
            numbered_to_dollar("SELECT '?1', \"?2\" -- ?3\n, ?4"),
            "SELECT '?1', \"?2\" -- ?3\n, $4"
        );
        assert_eq!(numbered_to_dollar("SELECT 'it''s ?1', ?2"), "SELECT 'it''s ?1', $2");
        assert_eq!(numbered_to_dollar("SELECT ? , x?"), "SELECT ? , x?");
    }
}
