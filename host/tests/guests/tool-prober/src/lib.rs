//! Controllable guest for the host's MCP-tool tests, through the raw `ahp:agent/tools`
//! bindings. `resume` succeeds at once; each `turn` acts on the body of the *first* queued
//! delivery, replies one line saying what happened, and consumes it:
//!
//! - `list`: `tools.list`; replies `<n> tools: <name>@<server> <name>@<server> …` (the first
//!   eight), or `error <kind>: <payload>`;
//! - `call <name> <arguments-json>`: `tools.call`; replies `ok is-error=<b> charged=<n>
//!   <content>` (the text items, or the structured JSON, at most 512 bytes), or the error;
//! - `call-big <name> <bytes>`: calls with arguments `{"pad": "xxx…"}` of exactly `<bytes>`
//!   bytes of JSON;
//! - `count-calls <n> <name> <arguments-json>`, `count-lists <n>`: makes up to `<n>` calls,
//!   stopping at the first error; replies `<k> calls, then: <the error, or nothing>`;
//! - `resolve <cred-ref>`: `credentials.resolve`; replies `resolved` or `denied: <error>` (the
//!   value is never replied);
//! - `then-echo`: replies `echo` (to check the agent still answers after a hostile call).
//!
//! With an empty inbox a turn returns `Ok`.

use ahp_guest::wit::ahp::agent::tools::{self, Content, Error};
use ahp_guest::{Agent, conversations, credentials};

/// Longest excerpt of a result in a reply.
const EXCERPT: usize = 512;

struct ToolProber;

impl Agent for ToolProber {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        Ok(())
    }

    fn turn() -> Result<(), Box<dyn std::error::Error>> {
        let queued = conversations::inbox().collect::<Result<Vec<_>, _>>()?;
        let Some(first) = queued.first() else {
            return Ok(());
        };
        let body = first.message().body.trim().to_owned();
        let (mode, rest) = body.split_once(' ').unwrap_or((&body, ""));
        let reply = match mode {
            "list" => list(),
            "call" => {
                let (name, args) = rest.split_once(' ').unwrap_or((rest, "{}"));
                call(name, args)
            }
            "call-big" => {
                let (name, bytes) = rest.split_once(' ').ok_or("call-big needs a name and a size")?;
                let bytes: usize = bytes.trim().parse().map_err(|_| "call-big needs a size")?;
                // `{"pad":"` + pad + `"}` is 10 bytes of JSON around the pad.
                let args = format!("{{\"pad\":\"{}\"}}", "x".repeat(bytes.saturating_sub(10)));
                call(name, &args)
            }
            "count-calls" => {
                let mut parts = rest.splitn(3, ' ');
                let n: u32 = parts
                    .next()
                    .unwrap_or("")
                    .parse()
                    .map_err(|_| "count-calls needs a number")?;
                let name = parts.next().unwrap_or("");
                let args = parts.next().unwrap_or("{}");
                count(n, || tools::call(name, args).map(drop))
            }
            "count-lists" => {
                let n: u32 = rest.trim().parse().map_err(|_| "count-lists needs a number")?;
                count(n, || tools::list().map(drop))
            }
            "resolve" => match credentials::resolve(rest.trim()) {
                Ok(_) => "resolved".to_owned(),
                Err(e) => format!("denied: {e}"),
            },
            _ => "echo".to_owned(),
        };
        first.reply(&reply)?;
        first.consume()?;
        Ok(())
    }
}

fn list() -> String {
    match tools::list() {
        Ok(tools) => {
            let names: Vec<String> = tools
                .iter()
                .take(8)
                .map(|t| format!("{}@{}", t.name, t.server))
                .collect();
            format!("{} tools: {}", tools.len(), names.join(" "))
        }
        Err(e) => error(&e),
    }
}

fn call(name: &str, args: &str) -> String {
    match tools::call(name, args) {
        Ok(r) => {
            let texts: Vec<&str> = r
                .content
                .iter()
                .filter_map(|c| match c {
                    Content::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect();
            let shown = r.structured_json.clone().unwrap_or_else(|| texts.join(" "));
            format!(
                "ok is-error={} charged={} {}",
                r.is_error,
                r.charged_micro_usd,
                cut(&shown, EXCERPT)
            )
        }
        Err(e) => error(&e),
    }
}

fn count(n: u32, mut f: impl FnMut() -> Result<(), Error>) -> String {
    let mut made = 0;
    while made < n {
        if let Err(e) = f() {
            return format!("{made} calls, then: {}", error(&e));
        }
        made += 1;
    }
    format!("{made} calls, then: nothing")
}

/// `error <kind>: <payload>`.
fn error(e: &Error) -> String {
    let (kind, payload) = match e {
        Error::UnknownTool(m) => ("unknown-tool", m.as_str()),
        Error::InvalidArguments(m) => ("invalid-arguments", m.as_str()),
        Error::TooLarge(m) => ("too-large", m.as_str()),
        Error::ServerError(m) => ("server-error", m.as_str()),
        Error::Unavailable(m) => ("unavailable", m.as_str()),
        Error::Refused(m) => ("refused", m.as_str()),
        Error::Insolvent => ("insolvent", ""),
    };
    format!("error {kind}: {}", cut(payload, EXCERPT))
}

fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

ahp_guest::export_agent!(ToolProber);
