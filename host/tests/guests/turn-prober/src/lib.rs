//! Hostile, controllable guest for the host's conversation-turn tests. `resume` succeeds at
//! once; each `turn` reads its queued deliveries and acts on the body of the *first* one:
//!
//! - `echo`, or anything not listed below: handles every queued delivery by its own body and
//!   consumes each, up to the 64 replies a turn may make (the rest wait for the next wake):
//!   - `ask <agent-id> <text>`: the agent `<agent-id>` replies `<text>`; any other says nothing
//!     (so a test can make one prober talk to another);
//!   - `echo: …` (another prober's echo): no reply, so two probers do not echo each other
//!     forever;
//!   - anything else: replies `echo: <body>`;
//! - `reply-then-sleep <ms>`: replies `replied` to that message, consumes nothing, then sleeps
//!   `<ms>` milliseconds (`std::thread::sleep`, a blocking `wasi:io/poll`) and returns `Ok`: a
//!   window in which to kill the host after the reply and before the wake is consumed;
//! - `slowly <ms> …`: for each queued delivery, sleeps `<ms>` milliseconds, then replies
//!   `echo: <body>` (which consumes it); sleeps once more and returns `Ok`: a window before
//!   each reply and before the turn's end in which to kill the host;
//! - `spin`: loops forever on the CPU, for the tier's fuel and wall clock to stop;
//! - `burn <rounds>`: loops `<rounds>` times on the CPU without a host call, replies
//!   `burnt <rounds> rounds` and returns `Ok` (a turn with a priced amount of compute);
//! - `fail`: returns `Err("asked to fail")`, replying and consuming nothing;
//! - `escape`: prints, and returns as its error, terminal control sequences (a retitle, an OSC 52
//!   clipboard write, a cleared screen, a carriage return, a bidi override), replying nothing;
//! - `flood`: replies `flood <n>` to that message again and again until a reply is refused,
//!   then returns `Err("<n> replies, then: <the refusal>")`;
//! - `big`: replies a 65 KiB body (over the 64 KiB bound) and returns `Err` with the refusal
//!   (or saying that the body was accepted);
//! - `transcript`: replies with the number of messages in that message's conversation, read
//!   page by page through its transcript, and consumes it;
//! - `noop`: returns `Ok` without replying or consuming;
//! - `consume-id <message-id>`: consumes that message by id and replies `consumed` or
//!   `refused: <why>`, consuming nothing else;
//! - `consume-all-but <k>`: consumes every queued delivery but the last `k`, reads the queued
//!   inbox again and replies `<n> consumed, <m> queued`;
//! - `consume-then-read`: consumes that message, reads the queued inbox and the whole one
//!   again, and replies `<n> queued; consumed <Some(true) | Some(false) | None>` (what this
//!   turn sees of its own consume);
//! - `count <call> <n>`: makes `<n>` calls of the host call `<call>` (see [`host_call`]),
//!   stopping at the first refusal, then replies `<k> <call> calls, then: <the refusal, or
//!   nothing>` and returns `Ok` (the message stays queued unless `<call>` is `consume`);
//! - `hammer <call>`: calls `<call>` in a loop, ignoring refusals, until the turn is stopped
//!   (fuel, wall clock, or a trap).
//!
//! With an empty inbox a turn returns `Ok`.

use std::time::Duration;

use ahp_guest::{Agent, checkpoint, conversations, metering, snapshot};

/// The body of the `big` reply: one KiB over a message's bound.
const BIG_REPLY_BYTES: usize = 65 * 1024;

struct TurnProber;

impl Agent for TurnProber {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        Ok(())
    }

    fn turn() -> Result<(), Box<dyn std::error::Error>> {
        let queued = conversations::inbox().collect::<Result<Vec<_>, _>>()?;
        let Some(first) = queued.first() else {
            return Ok(());
        };
        let body = first.message().body.trim();
        let (mode, argument) = body.split_once(' ').unwrap_or((body, ""));
        match mode {
            "reply-then-sleep" => {
                let millis: u64 = argument
                    .trim()
                    .parse()
                    .map_err(|_| "reply-then-sleep needs milliseconds")?;
                first.reply("replied")?;
                std::thread::sleep(Duration::from_millis(millis));
            }
            "slowly" => {
                let millis: u64 = argument
                    .split_whitespace()
                    .next()
                    .and_then(|m| m.parse().ok())
                    .ok_or("slowly needs milliseconds")?;
                for delivery in queued.iter().take(conversations::MAX_REPLIES) {
                    std::thread::sleep(Duration::from_millis(millis));
                    delivery.reply(&format!("echo: {}", delivery.message().body))?;
                }
                std::thread::sleep(Duration::from_millis(millis));
            }
            "spin" => spin(),
            "burn" => {
                let rounds: u64 = argument.trim().parse().map_err(|_| "burn needs a number of rounds")?;
                let mut x = 0_u64;
                for _ in 0..rounds {
                    x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
                }
                first.reply(&format!("burnt {rounds} rounds"))?;
            }
            "fail" => return Err("asked to fail".into()),
            "escape" => {
                // What a hostile component prints to the operator's terminal: a retitle, a
                // clipboard write (OSC 52), a cleared screen, a carriage return, a bidi override.
                println!("title \x1b]0;owned\x07 clipboard \x1b]52;c;aGk=\x07 clear \x1b[2J cr \r bidi \u{202e}");
                return Err("\x1b[31mred\x1b[0m error".into());
            }
            "flood" => {
                let mut sent = 0_u32;
                loop {
                    if let Err(refusal) = first.reply(&format!("flood {sent}")) {
                        return Err(format!("{sent} replies, then: {refusal}").into());
                    }
                    sent += 1;
                }
            }
            "big" => {
                return Err(match first.reply(&"x".repeat(BIG_REPLY_BYTES)) {
                    Ok(_) => format!("a {BIG_REPLY_BYTES}-byte reply was accepted"),
                    Err(refusal) => refusal.to_string(),
                }
                .into());
            }
            "transcript" => {
                let transcript = conversations::transcript(&first.message().conversation_id);
                let messages = transcript.collect::<Result<Vec<_>, _>>()?.len();
                first.reply(&messages.to_string())?;
                first.consume()?;
            }
            "noop" => {}
            "consume-id" => {
                let answer = match conversations::consume(argument.trim()) {
                    Ok(()) => "consumed".to_owned(),
                    Err(e) => format!("refused: {e}"),
                };
                first.reply(&answer)?;
            }
            "consume-all-but" => {
                // Consumes every queued delivery but the last `k`, then counts the queued ones
                // again: the turn's own held consumes skipped, however many pages they fill.
                let keep: usize = argument.trim().parse().map_err(|_| "consume-all-but needs a number")?;
                let consumed = queued.len().saturating_sub(keep);
                for d in &queued[..consumed] {
                    d.consume()?;
                }
                let left = conversations::inbox().collect::<Result<Vec<_>, _>>()?.len();
                first.reply(&format!("{consumed} consumed, {left} queued"))?;
            }
            "consume-then-read" => {
                // What a turn sees of its own consume: skipped from the queued inbox, shown
                // consumed in the whole one.
                first.consume()?;
                let still = conversations::inbox().collect::<Result<Vec<_>, _>>()?.len();
                let whole = conversations::inbox_page(0, conversations::MAX_PAGE, false)?;
                let seen = whole
                    .iter()
                    .find(|d| d.message().id == first.message().id)
                    .map(|d| d.is_consumed());
                first.reply(&format!("{still} queued; consumed {seen:?}"))?;
            }
            "count" => {
                let (call, n) = argument.split_once(' ').ok_or("count needs a call and a number")?;
                let n: u32 = n.trim().parse().map_err(|_| "count needs a number")?;
                let mut made = 0_u32;
                let mut refusal = None;
                while made < n {
                    match host_call(call, first) {
                        Ok(()) => made += 1,
                        Err(e) => {
                            refusal = Some(e);
                            break;
                        }
                    }
                }
                let refusal = refusal.as_deref().unwrap_or("nothing");
                first.reply(&format!("{made} {call} calls, then: {refusal}"))?;
            }
            "hammer" => loop {
                let _ = host_call(argument.trim(), first);
            },
            _ => {
                let me = conversations::wake().map(|w| w.agent_id).unwrap_or_default();
                for delivery in queued.iter().take(conversations::MAX_REPLIES) {
                    let body = delivery.message().body.trim();
                    match body.split_once(' ') {
                        Some(("ask", rest)) => {
                            if let Some((whom, text)) = rest.split_once(' ')
                                && whom == me
                            {
                                delivery.reply(text)?;
                            }
                        }
                        _ if body.starts_with("echo: ") => {}
                        _ => {
                            delivery.reply(&format!("echo: {}", delivery.message().body))?;
                        }
                    }
                    delivery.consume()?;
                }
            }
        }
        Ok(())
    }
}

/// One host call by name, for `count` and `hammer`: `load` (`checkpoint.load`), `save`
/// (`checkpoint.save` of one byte), `budget` (`metering.budget`, which has no error: past its
/// bound it traps), `report` (`metering.report` of 1 micro-USD), `consume` (of `delivery`),
/// `inbox` and `transcript` (one-entry pages), `messages` (a one-entry page of the snapshot's
/// history) — the refusal as text.
fn host_call(call: &str, delivery: &conversations::Delivery) -> Result<(), String> {
    let text = |e: &dyn std::fmt::Display| e.to_string();
    match call {
        "load" => checkpoint::load_bytes().map(drop).map_err(|e| text(&e)),
        "save" => checkpoint::save_bytes(b"x").map_err(|e| text(&e)),
        "budget" => {
            std::hint::black_box(metering::budget());
            Ok(())
        }
        "report" => metering::report("search_api", 1).map(drop).map_err(|e| text(&e)),
        "consume" => delivery.consume().map_err(|e| text(&e)),
        "inbox" => conversations::inbox_page(0, 1, false).map(drop).map_err(|e| text(&e)),
        "transcript" => conversations::transcript_page(&delivery.message().conversation_id, 0, 1)
            .map(drop)
            .map_err(|e| text(&e)),
        "messages" => snapshot::messages_page(0, 1).map(drop).map_err(|e| text(&e)),
        other => Err(format!("no host call named {other:?}")),
    }
}

/// Burns CPU forever without a host call.
fn spin() -> ! {
    let mut x = 0_u64;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
    }
}

ahp_guest::export_agent!(TurnProber);
