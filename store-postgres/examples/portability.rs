//! Which of the store's SQL statements PostgreSQL refuses, as written: every string literal
//! in the given Rust sources that starts like SQL (`SELECT`, `INSERT`, `UPDATE`, `DELETE`,
//! `WITH`, `CREATE`, `ALTER`, `DROP`), with `{NAME}` filled from a `const NAME: &str = "…"`
//! of the same file (or any file), is prepared on a fresh, fully migrated PostgreSQL
//! database; each refusal is printed as `file:line: SQLSTATE message`.
//!
//! ```text
//! eval "$(bash .ci/postgres start)"
//! cargo run -p ahp-store-postgres --example portability -- store/src
//! ```
//!
//! A placeholder PostgreSQL cannot type (`?1 IS NULL OR col = ?1`) is not a refusal:
//! `PgConnection` types it by the value bound. Statements with other `format!` holes are
//! listed as skipped. Exit status 1 when any statement was refused.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ahp_store_postgres::{PgConnection, migrate, testing};
use ahp_store_sql::placeholders::numbered_to_dollar;

const SQL_STARTS: [&str; 8] = [
    "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "CREATE", "ALTER", "DROP",
];

/// One string literal: where it starts and its (unescaped) text.
struct Literal {
    line: usize,
    text: String,
}

fn main() -> anyhow::Result<std::process::ExitCode> {
    let roots: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    anyhow::ensure!(!roots.is_empty(), "usage: portability DIR_OR_FILE...");
    let Some((url, _db)) = testing::fresh_database() else {
        anyhow::bail!("set AHP_TEST_PG (eval \"$(bash .ci/postgres start)\")");
    };
    let mut conn = PgConnection::connect(&url)?;
    migrate(&mut conn)?;

    let mut files = Vec::new();
    for root in &roots {
        collect(root, &mut files)?;
    }
    files.sort();
    let mut sources = Vec::new();
    // A const a file uses but does not define is most likely its sibling module's.
    let mut by_dir: HashMap<PathBuf, HashMap<String, String>> = HashMap::new();
    let mut global: HashMap<String, String> = HashMap::new();
    for file in &files {
        let source = std::fs::read_to_string(file)?;
        let literals = literals(&source);
        let consts = consts(&source, &literals);
        global.extend(consts.clone());
        by_dir.entry(dir(file)).or_default().extend(consts.clone());
        sources.push((file.clone(), literals, consts));
    }
    let (mut checked, mut refused, mut skipped) = (0, 0, Vec::new());
    for (file, literals, consts) in &sources {
        for literal in literals {
            let head = literal.text.trim_start().to_ascii_uppercase();
            if !SQL_STARTS
                .iter()
                .any(|k| head.starts_with(k) && head[k.len()..].starts_with(char::is_whitespace))
            {
                continue;
            }
            let Some(sql) = fill(&literal.text, &[consts, &by_dir[&dir(file)], &global]) else {
                skipped.push(format!("{}:{}", file.display(), literal.line));
                continue;
            };
            checked += 1;
            if let Some(error) = refusal(&mut conn, &sql) {
                refused += 1;
                println!("{}:{}: {error}", file.display(), literal.line);
                println!("    {}", sql.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
    }
    println!(
        "{refused} of {checked} statements refused; {} skipped (format holes): {}",
        skipped.len(),
        skipped.join(" ")
    );
    // Returned, not `process::exit`: the fresh database's guard must run to drop it.
    Ok(if refused > 0 {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    })
}

fn collect(path: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_dir() {
        for entry in std::fs::read_dir(path)? {
            collect(&entry?.path(), files)?;
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        files.push(path.to_owned());
    }
    Ok(())
}

/// PostgreSQL's refusal of `sql`, or `None` when it prepares (DDL runs in a rolled-back
/// transaction instead).
fn refusal(conn: &mut PgConnection, sql: &str) -> Option<String> {
    let text = numbered_to_dollar(sql);
    let client = conn.client();
    let is_ddl = ["CREATE", "ALTER", "DROP"]
        .iter()
        .any(|k| text.trim_start().to_ascii_uppercase().starts_with(k));
    let result = if is_ddl {
        client.batch_execute(&format!("BEGIN; {text}")).map(|_| ())
    } else {
        client.prepare(&text).map(|_| ())
    };
    if is_ddl {
        let _ = client.batch_execute("ROLLBACK");
    }
    let e = result.err()?;
    let db = e.as_db_error();
    match db.map(|d| d.code().code()) {
        Some("42P18" | "42P08") => None,
        Some(code) => Some(format!("{code} {}", db.map_or("", |d| d.message()))),
        None => Some(e.to_string()),
    }
}

fn dir(file: &Path) -> PathBuf {
    file.parent().map(Path::to_owned).unwrap_or_default()
}

/// `{NAME}` holes filled from the first of `scopes` that defines `NAME`; `None` if one is left.
fn fill(text: &str, scopes: &[&HashMap<String, String>]) -> Option<String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}')? + open;
        let name = &rest[open + 1..close];
        out.push_str(scopes.iter().find_map(|scope| scope.get(name))?);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// `const NAME: &str = "…";` of a source, by the literal that follows the `=`.
fn consts(source: &str, literals: &[Literal]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for (i, line) in source.lines().enumerate() {
        let t = line.trim_start();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        let Some(rest) = t.strip_prefix("const ") else { continue };
        let Some((name, ty)) = rest.split_once(':') else {
            continue;
        };
        if !ty.trim_start().starts_with("&str") {
            continue;
        }
        // The first literal at or after this line.
        if let Some(l) = literals.iter().find(|l| l.line > i && l.line <= i + 3) {
            out.insert(name.trim().to_owned(), l.text.clone());
        }
    }
    out
}

/// Every string literal (`"…"`, `r"…"`, `r#"…"#`) outside comments, unescaped.
fn literals(source: &str) -> Vec<Literal> {
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => line += 1,
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\'' => {
                // A char literal ('"' in particular) or a lifetime: skip a quoted char.
                if bytes.get(i + 2) == Some(&b'\'') {
                    i += 3;
                    continue;
                }
                if bytes.get(i + 1) == Some(&b'\\') && bytes.get(i + 3) == Some(&b'\'') {
                    i += 4;
                    continue;
                }
            }
            b'r' if matches!(bytes.get(i + 1), Some(b'"' | b'#'))
                && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric()) =>
            {
                let mut j = i + 1;
                let mut hashes = 0;
                while bytes.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if bytes.get(j) == Some(&b'"') {
                    let close = format!("\"{}", "#".repeat(hashes));
                    if let Some(end) = source[j + 1..].find(&close) {
                        let text = &source[j + 1..j + 1 + end];
                        out.push(Literal {
                            line,
                            text: text.to_owned(),
                        });
                        line += text.matches('\n').count();
                        i = j + 1 + end + close.len();
                        continue;
                    }
                }
            }
            b'"' => {
                let start_line = line;
                let mut text = String::new();
                let mut j = i + 1;
                while j < bytes.len() && bytes[j] != b'"' {
                    if bytes[j] == b'\\' {
                        match bytes.get(j + 1) {
                            Some(b'\n') => {
                                line += 1;
                                j += 2;
                                while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                                    if bytes[j] == b'\n' {
                                        line += 1;
                                    }
                                    j += 1;
                                }
                                text.push(' ');
                                continue;
                            }
                            Some(b'n') => text.push('\n'),
                            Some(b't') => text.push('\t'),
                            Some(&c) => text.push(char::from(c)),
                            None => {}
                        }
                        j += 2;
                        continue;
                    }
                    if bytes[j] == b'\n' {
                        line += 1;
                    }
                    let ch = source[j..].chars().next().unwrap_or(' ');
                    text.push(ch);
                    j += ch.len_utf8();
                }
                out.push(Literal { line: start_line, text });
                i = j + 1;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}
