//! Hostile guest: passes one buffer to a host call as many *aliased* descriptors — every
//! `(pointer, length)` of a list pointing at the same bytes — so that it spends 8 bytes of its
//! memory per copy, and a host that copied arguments before weighing them would spend the whole
//! buffer per copy. Each turn acts on the first queued message's body:
//!
//! - `alias <call> <copies> <bytes>`: fills its buffer with `<bytes>` bytes of `a`, passes it
//!   `<copies>` times to `<call>`, consumes the message and replies `<call> x<copies>:
//!   refused <the error>` or `<call> x<copies>: accepted`. `<call>` is one of
//!   - `register-wait` (the wait's sources), `create-goal` and `checkpoint-goal` (the plan's
//!     step titles), `estimate` and `complete` (a message's text parts),
//!     `fields.from-list` (entries' values), `fields.set` (its values): lists;
//!   - `fields.append` (its name and value) and `create-task` (the four strings of its task),
//!     which take a fixed number of strings, `<copies>` ignored;
//! - anything else: replies `echo: <body>` and consumes it.
//!
//! The aliased strings are never dropped (each would free the same buffer): they are leaked
//! with the descriptors that hold them, a few bytes per copy.

use std::cell::RefCell;
use std::mem::ManuallyDrop;

use ahp_guest::delegation::{self, NewGoal, NewTask, PlanStep, StepStatus, WaitMode};
use ahp_guest::model::{self, Message, Part, Request, Role, ToolChoice};
use ahp_guest::{Agent, conversations};
use wasip2::http::types::Fields;

/// The longest reply: an error's text is cut to fit.
const MAX_REPLY_BYTES: usize = 512;

thread_local! {
    /// The one buffer every call aliases, kept for the guest's life: a new 16 MiB buffer per
    /// turn could find the old one's space split by smaller allocations and grow the memory
    /// past `nano`'s 32 MiB.
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

struct AliasingCaller;

impl Agent for AliasingCaller {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        Ok(())
    }

    fn turn() -> Result<(), Box<dyn std::error::Error>> {
        let queued = conversations::inbox().collect::<Result<Vec<_>, _>>()?;
        let Some(first) = queued.first() else {
            return Ok(());
        };
        let body = first.message().body.trim().to_owned();
        let words: Vec<&str> = body.split_whitespace().collect();
        let reply = match words.as_slice() {
            ["alias", call, copies, bytes] => {
                let copies: usize = copies.parse().map_err(|_| "copies is a number")?;
                let bytes: usize = bytes.parse().map_err(|_| "bytes is a number")?;
                let outcome = BUFFER.with_borrow_mut(|buffer| {
                    buffer.clear();
                    buffer.resize(bytes, b'a');
                    call_aliased(call, buffer, copies)
                });
                let mut reply = format!("{call} x{copies}: {outcome}");
                reply.truncate(MAX_REPLY_BYTES);
                reply
            }
            _ => format!("echo: {body}"),
        };
        first.reply(&reply)?;
        Ok(())
    }
}

/// `copies` strings that all own `buffer`'s bytes, never dropped.
fn aliases(buffer: &mut [u8], copies: usize) -> Vec<String> {
    let (ptr, len) = (buffer.as_mut_ptr(), buffer.len());
    // SAFETY: the bytes are ASCII; the strings are only read (lowered to the host) and are
    // never dropped or grown, so no two of them free or write the same buffer.
    (0..copies)
        .map(|_| unsafe { String::from_raw_parts(ptr, len, len) })
        .collect()
}

/// `copies` byte vectors that all own `buffer`'s bytes, never dropped.
fn byte_aliases(buffer: &mut [u8], copies: usize) -> Vec<Vec<u8>> {
    let (ptr, len) = (buffer.as_mut_ptr(), buffer.len());
    // SAFETY: as for `aliases`.
    (0..copies)
        .map(|_| unsafe { Vec::from_raw_parts(ptr, len, len) })
        .collect()
}

fn refused(e: impl std::fmt::Debug) -> String {
    format!("refused {e:?}")
}

fn call_aliased(call: &str, buffer: &mut [u8], copies: usize) -> String {
    match call {
        "register-wait" => {
            let sources = ManuallyDrop::new(aliases(buffer, copies));
            delegation::register_wait(&sources, WaitMode::Any).map_or_else(refused, |_| "accepted".into())
        }
        "create-goal" | "checkpoint-goal" => {
            let plan = ManuallyDrop::new(
                aliases(buffer, copies)
                    .into_iter()
                    .map(|title| PlanStep {
                        title,
                        status: StepStatus::Pending,
                    })
                    .collect::<Vec<_>>(),
            );
            let done = if call == "create-goal" {
                let goal = ManuallyDrop::new(NewGoal {
                    title: "aliased".into(),
                    completion_intent: "never".into(),
                    plan: ManuallyDrop::into_inner(plan),
                    controller: None,
                });
                delegation::create_goal(&goal).map(|_| ())
            } else {
                delegation::checkpoint_goal("goal_000000000000000000000000", 1, &plan, "aliased").map(|_| ())
            };
            done.map_or_else(refused, |()| "accepted".into())
        }
        "estimate" | "complete" => {
            let request = ManuallyDrop::new(Request {
                model: "any".into(),
                system: String::new(),
                messages: vec![Message {
                    role: Role::User,
                    parts: aliases(buffer, copies).into_iter().map(Part::Text).collect(),
                }],
                tools: Vec::new(),
                tool_choice: ToolChoice::Auto,
                max_output_tokens: None,
            });
            let done = if call == "estimate" {
                model::estimate(&request).map(|_| ())
            } else {
                model::complete(&request).map(|_| ())
            };
            done.map_or_else(refused, |()| "accepted".into())
        }
        "fields.from-list" => {
            let entries = ManuallyDrop::new(
                byte_aliases(buffer, copies)
                    .into_iter()
                    .map(|value| ("x-aliased".to_owned(), value))
                    .collect::<Vec<_>>(),
            );
            Fields::from_list(&entries).map_or_else(refused, |_| "accepted".into())
        }
        "fields.set" => {
            let values = ManuallyDrop::new(byte_aliases(buffer, copies));
            Fields::new()
                .set("x-aliased", &values)
                .map_or_else(refused, |()| "accepted".into())
        }
        "fields.append" => {
            let name = ManuallyDrop::new(aliases(buffer, 1));
            Fields::new()
                .append(&name[0], buffer)
                .map_or_else(refused, |()| "accepted".into())
        }
        "create-task" => {
            let mut four = aliases(buffer, 4).into_iter();
            let mut next = || four.next().unwrap_or_default();
            let task = ManuallyDrop::new(NewTask {
                assignee: next(),
                title: next(),
                instructions: next(),
                goal_id: Some(next()),
            });
            delegation::create_task(&task).map_or_else(refused, |_| "accepted".into())
        }
        other => format!("unknown call {other}"),
    }
}

ahp_guest::export_agent!(AliasingCaller);
