//! Hostile, controllable guest for the host's conversation-turn tests. `resume` succeeds at
//! once; each `turn` reads its queued deliveries and acts on the body of the *first* one:
//!
//! - `echo`, or anything not listed below: replies `echo: <body>` to every queued delivery and
//!   consumes each, up to the 64 replies a turn may make (the rest wait for the next wake);
//! - `reply-then-sleep <ms>`: replies `replied` to that message, consumes nothing, then sleeps
//!   `<ms>` milliseconds (`std::thread::sleep`, a blocking `wasi:io/poll`) and returns `Ok`: a
//!   window in which to kill the host after the reply and before the wake is consumed;
//! - `spin`: loops forever on the CPU, for the tier's fuel and wall clock to stop;
//! - `fail`: returns `Err("asked to fail")`, replying and consuming nothing;
//! - `flood`: replies `flood <n>` to that message again and again until a reply is refused,
//!   then returns `Err("<n> replies, then: <the refusal>")`;
//! - `big`: replies a 65 KiB body (over the 64 KiB bound) and returns `Err` with the refusal
//!   (or saying that the body was accepted);
//! - `transcript`: replies with the number of messages in that message's conversation, read
//!   page by page through its transcript, and consumes it;
//! - `noop`: returns `Ok` without replying or consuming.
//!
//! With an empty inbox a turn returns `Ok`.

use std::time::Duration;

use ahp_guest::{Agent, conversations};

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
            "spin" => spin(),
            "fail" => return Err("asked to fail".into()),
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
            _ => {
                for delivery in queued.iter().take(conversations::MAX_REPLIES) {
                    delivery.reply(&format!("echo: {}", delivery.message().body))?;
                    delivery.consume()?;
                }
            }
        }
        Ok(())
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
