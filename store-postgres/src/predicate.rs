//! Normalizing a partial index's `WHERE` predicate, so SQLite's source text and
//! PostgreSQL's deparsed form of the same predicate read the same.
//!
//! SQLite keeps the predicate as written (`state IN ('pending', 'claimed')`); PostgreSQL
//! prints its own parse tree (`(state = ANY (ARRAY['pending'::text, 'claimed'::text]))`).
//! Both are parsed here into one small grammar — comparisons, `IN` lists, `IS [NOT] NULL`,
//! `NOT`, `AND`, `OR` over columns and literals — and printed back one way.

/// The canonical text of `predicate`:
///
/// - keywords upper case, identifiers lower case and unquoted, literals as written;
/// - casts (`::text`) and redundant parentheses dropped;
/// - `x = ANY (ARRAY[a, b])` written `x IN (a, b)`, `!=` and `==` written `<>` and `=`;
/// - `x BETWEEN a AND b` written `x >= a AND x <= b` (PostgreSQL's expansion);
/// - `AND` and `OR` chains flattened, in their written order, an `OR` inside an `AND`
///   parenthesized.
///
/// A predicate outside that grammar is returned as `unparsed: ` and its whitespace-collapsed
/// text, which never equals a parsed one: the agreement test then fails and shows both.
pub fn normalize_predicate(predicate: &str) -> String {
    let parsed = tokens(predicate).and_then(|tokens| {
        let mut parser = Parser { tokens, at: 0 };
        let expr = parser.or()?;
        (parser.at == parser.tokens.len()).then_some(expr)
    });
    match parsed {
        Some(expr) => expr.print(false),
        None => format!(
            "unparsed: {}",
            predicate.split_whitespace().collect::<Vec<_>>().join(" ")
        ),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Literal(String),
    Punct(&'static str),
}

fn tokens(text: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '\'' {
            let mut literal = String::from(chars.next()?);
            loop {
                let d = chars.next()?;
                literal.push(d);
                if d == '\'' {
                    if chars.peek() == Some(&'\'') {
                        literal.push(chars.next()?);
                    } else {
                        break;
                    }
                }
            }
            out.push(Token::Literal(literal));
        } else if c == '"' {
            chars.next();
            let mut word = String::new();
            loop {
                let d = chars.next()?;
                if d == '"' {
                    break;
                }
                word.push(d);
            }
            out.push(Token::Word(word.to_lowercase()));
        } else if c.is_ascii_digit() || c == '-' {
            let mut number = String::from(chars.next()?);
            while chars.peek().is_some_and(|d| d.is_ascii_digit() || *d == '.') {
                number.push(chars.next()?);
            }
            out.push(Token::Literal(number));
        } else if c.is_alphabetic() || c == '_' {
            let mut word = String::new();
            while chars.peek().is_some_and(|d| d.is_alphanumeric() || *d == '_') {
                word.push(chars.next()?);
            }
            out.push(Token::Word(word.to_lowercase()));
        } else {
            chars.next();
            let next = chars.peek().copied();
            let punct = match (c, next) {
                (':', Some(':')) => {
                    chars.next();
                    "::"
                }
                ('<', Some('>')) | ('!', Some('=')) => {
                    chars.next();
                    "<>"
                }
                ('<', Some('=')) => {
                    chars.next();
                    "<="
                }
                ('>', Some('=')) => {
                    chars.next();
                    ">="
                }
                ('=', Some('=')) => {
                    chars.next();
                    "="
                }
                ('=', _) => "=",
                ('<', _) => "<",
                ('>', _) => ">",
                ('(', _) => "(",
                (')', _) => ")",
                ('[', _) => "[",
                (']', _) => "]",
                (',', _) => ",",
                _ => return None,
            };
            out.push(Token::Punct(punct));
        }
    }
    Some(out)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Expr {
    Or(Vec<Expr>),
    And(Vec<Expr>),
    Not(Box<Expr>),
    Compare(String, &'static str, String),
    In(String, Vec<String>, bool),
    IsNull(String, bool),
}

impl Expr {
    fn print(&self, inside_and: bool) -> String {
        match self {
            Self::Or(terms) => {
                let text = terms.iter().map(|t| t.print(false)).collect::<Vec<_>>().join(" OR ");
                if inside_and { format!("({text})") } else { text }
            }
            Self::And(terms) => terms.iter().map(|t| t.print(true)).collect::<Vec<_>>().join(" AND "),
            Self::Not(inner) => format!("NOT ({})", inner.print(false)),
            Self::Compare(a, op, b) => format!("{a} {op} {b}"),
            Self::In(a, list, negated) => {
                format!("{a} {}IN ({})", if *negated { "NOT " } else { "" }, list.join(", "))
            }
            Self::IsNull(a, negated) => format!("{a} IS {}NULL", if *negated { "NOT " } else { "" }),
        }
    }
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn word(&mut self, word: &str) -> bool {
        if matches!(self.peek(), Some(Token::Word(w)) if w == word) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn punct(&mut self, punct: &str) -> bool {
        if matches!(self.peek(), Some(Token::Punct(p)) if *p == punct) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, punct: &str) -> Option<()> {
        self.punct(punct).then_some(())
    }

    fn or(&mut self) -> Option<Expr> {
        let mut terms = vec![self.and()?];
        while self.word("or") {
            terms.push(self.and()?);
        }
        Some(flatten(terms, true))
    }

    fn and(&mut self) -> Option<Expr> {
        let mut terms = vec![self.unary()?];
        while self.word("and") {
            terms.push(self.unary()?);
        }
        Some(flatten(terms, false))
    }

    fn unary(&mut self) -> Option<Expr> {
        if self.word("not") {
            return Some(Expr::Not(Box::new(self.unary()?)));
        }
        // A parenthesized predicate, or an operand in parentheses (`(0)::bigint`).
        if matches!(self.peek(), Some(Token::Punct("("))) {
            let start = self.at;
            self.at += 1;
            if let Some(inner) = self.or()
                && self.punct(")")
                && !matches!(self.peek(), Some(Token::Punct("::")))
            {
                return Some(inner);
            }
            self.at = start;
        }
        let left = self.operand()?;
        self.rest(left)
    }

    fn rest(&mut self, left: String) -> Option<Expr> {
        if self.word("is") {
            let negated = self.word("not");
            return self.word("null").then_some(Expr::IsNull(left, negated));
        }
        let negated = self.word("not");
        if self.word("in") {
            self.expect("(")?;
            let list = self.list(")")?;
            return Some(Expr::In(left, list, negated));
        }
        if negated {
            return None;
        }
        if self.word("between") {
            let low = self.operand()?;
            if !self.word("and") {
                return None;
            }
            let high = self.operand()?;
            return Some(Expr::And(vec![
                Expr::Compare(left.clone(), ">=", low),
                Expr::Compare(left, "<=", high),
            ]));
        }
        let op = match self.peek() {
            Some(Token::Punct(p)) if ["=", "<>", "<", "<=", ">", ">="].contains(p) => *p,
            _ => return None,
        };
        self.at += 1;
        if op == "=" && self.word("any") {
            self.expect("(")?;
            if !self.word("array") {
                return None;
            }
            self.expect("[")?;
            let list = self.list("]")?;
            self.expect(")")?;
            return Some(Expr::In(left, list, false));
        }
        let right = self.operand()?;
        Some(Expr::Compare(left, op, right))
    }

    /// Operands separated by commas up to `close` (consumed).
    fn list(&mut self, close: &str) -> Option<Vec<String>> {
        let mut items = vec![self.operand()?];
        while self.punct(",") {
            items.push(self.operand()?);
        }
        self.expect(close)?;
        Some(items)
    }

    /// A column or a literal, with any parentheses and casts around it dropped.
    fn operand(&mut self) -> Option<String> {
        let value = if self.punct("(") {
            let inner = self.operand()?;
            self.expect(")")?;
            inner
        } else {
            match self.tokens.get(self.at)?.clone() {
                Token::Word(w) if !is_keyword(&w) => {
                    self.at += 1;
                    w
                }
                Token::Literal(l) => {
                    self.at += 1;
                    l
                }
                _ => return None,
            }
        };
        while self.punct("::") {
            // The type: one or more words (`character varying`).
            if !matches!(self.peek(), Some(Token::Word(_))) {
                return None;
            }
            while matches!(self.peek(), Some(Token::Word(w)) if !is_keyword(w)) {
                self.at += 1;
            }
        }
        Some(value)
    }
}

fn is_keyword(word: &str) -> bool {
    ["and", "or", "not", "in", "is", "null", "any", "array", "between"].contains(&word)
}

/// Nested chains of the same connective become one.
fn flatten(terms: Vec<Expr>, or: bool) -> Expr {
    if terms.len() == 1 {
        return terms.into_iter().next().expect("one term");
    }
    let mut flat = Vec::new();
    for term in terms {
        match (term, or) {
            (Expr::Or(inner), true) | (Expr::And(inner), false) => flat.extend(inner),
            (other, _) => flat.push(other),
        }
    }
    if or { Expr::Or(flat) } else { Expr::And(flat) }
}

#[cfg(test)]
mod tests {
    use super::normalize_predicate as n;

    #[test]
    fn sqlite_source_and_postgres_deparse_agree() {
        let pairs = [
            ("state = 'attached'", "(state = 'attached'::text)"),
            (
                "state IN ('pending', 'claimed')",
                "(state = ANY (ARRAY['pending'::text, 'claimed'::text]))",
            ),
            ("activation_key_hash IS NOT NULL", "(activation_key_hash IS NOT NULL)"),
            (
                "status = 'active' AND agent_id IS NOT NULL",
                "((status = 'active'::text) AND (agent_id IS NOT NULL))",
            ),
            (
                "origin IN ('wait', 'attention_event')",
                "origin = ANY (ARRAY['wait'::text, 'attention_event'::text])",
            ),
            ("n BETWEEN 1 AND 8", "((n >= 1) AND (n <= 8))"),
            ("x == 1 OR \"Y\" != 2", "((x = (1)::bigint) OR (y <> 2))"),
        ];
        for (sqlite, postgres) in pairs {
            assert_eq!(n(sqlite), n(postgres), "{sqlite} vs {postgres}");
            assert!(!n(sqlite).starts_with("unparsed"), "{sqlite}");
        }
        assert_eq!(n("(state = ANY (ARRAY['a'::text, 'b'::text]))"), "state IN ('a', 'b')");
        assert_eq!(n("a = 1 AND (b = 2 OR c = 3)"), "a = 1 AND (b = 2 OR c = 3)");
    }

    #[test]
    fn different_predicates_differ_and_unknown_syntax_is_marked() {
        assert_ne!(n("state = 'attached'"), n("state = 'detached'"));
        assert_ne!(n("a IS NULL"), n("a IS NOT NULL"));
        assert_ne!(n("a = 1 AND b = 2"), n("a = 1 OR b = 2"));
        assert_ne!(n("state IN ('a', 'b')"), n("state IN ('b', 'a')"));
        assert_eq!(n("lower(x)  = 'a'"), "unparsed: lower(x) = 'a'");
        assert!(n("a = 'unterminated").starts_with("unparsed"));
    }
}
