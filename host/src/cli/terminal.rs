//! Text a guest controls, made safe to print on the operator's terminal.
//!
//! `ahp run` (and the demo) print what a guest wrote — its stdout and stderr, the error its turn
//! returned, a trap's reason, a wasm backtrace whose function names come from the component's
//! own name section. Printed as they are, their bytes could move the cursor, clear or rewrite
//! the screen to hide a line, retitle the terminal or write its clipboard (OSC 52). Every such
//! text goes through [`shown`] first. (Messages and replies are refused control characters by
//! the store already.)

use std::borrow::Cow;

/// `text` with every control character but newline and tab (ESC, BEL, carriage return, C1
/// controls …) and every bidirectional override or isolate (which reorder what a line shows)
/// written as its escape, `\u{1b}`; the rest as it is.
pub(crate) fn shown(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn escapes_what_a_terminal_obeys_and_keeps_the_rest() {
        assert_eq!(
            shown("plain text, ünïcödé\tand a tab\n"),
            "plain text, ünïcödé\tand a tab\n"
        );
        assert_eq!(shown("\x1b]0;owned\x07"), "\\u{1b}]0;owned\\u{7}");
        assert_eq!(shown("\x1b]52;c;aGk=\x07"), "\\u{1b}]52;c;aGk=\\u{7}");
        assert_eq!(shown("hidden\rshown"), "hidden\\u{d}shown");
        assert_eq!(shown("\u{9b}2J"), "\\u{9b}2J");
        assert_eq!(shown("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert!(matches!(shown("nothing to escape"), std::borrow::Cow::Borrowed(_)));
    }
}
