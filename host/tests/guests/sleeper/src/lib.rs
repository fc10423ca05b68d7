//! Hostile guest: blocks inside a WASI host call for far longer than any tier's wall clock,
//! where neither fuel nor epoch interruption can reach it. The tool state picks the wait:
//!
//! - `{"mode": "sleep"}`: `std::thread::sleep` of 30 s (a blocking `wasi:io/poll`);
//! - `{"mode": "poll"}`: `wasi:io/poll.poll` on a 30 s monotonic-clock pollable;
//! - `{"mode": "block"}`: `pollable.block` on a 30 s monotonic-clock pollable;
//! - `{"mode": "stream"}`: reads the body of its MCP server's response, which stalls mid-body
//!   (a blocking stream read);
//! - `{"mode": "http"}`: waits for its MCP server's response, which never comes, request
//!   after request.
//!
//! With `"resumeFirst": true` the first turn returns at once (so the transfer becomes active)
//! and every later turn blocks. A turn that ever returns is a failure of the host: the guest
//! then returns an error saying how long it waited.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ahp_guest::{Agent, snapshot};
use wasip2::clocks::monotonic_clock;
use wasip2::http::types::Method;

const WAIT: Duration = Duration::from_secs(30);

static TURNS: AtomicU32 = AtomicU32::new(0);

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Plan {
    mode: String,
    #[serde(default)]
    resume_first: bool,
}

struct Sleeper;

impl Agent for Sleeper {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        let plan: Plan = snapshot::tool_state_as()?;
        if TURNS.fetch_add(1, Ordering::Relaxed) == 0 && plan.resume_first {
            return Ok(());
        }
        let started = Instant::now();
        let nanos = WAIT.as_nanos() as u64;
        match plan.mode.as_str() {
            "sleep" => std::thread::sleep(WAIT),
            "poll" => {
                let p = monotonic_clock::subscribe_duration(nanos);
                wasip2::io::poll::poll(&[&p]);
            }
            "block" => monotonic_clock::subscribe_duration(nanos).block(),
            "stream" | "http" => {
                let server = snapshot::mcp_servers().into_iter().next().ok_or("no server")?.server;
                while started.elapsed() < WAIT {
                    let outcome = http_client::send(Method::Get, &server, b"");
                    println!("{outcome:?} after {:?}", started.elapsed());
                }
            }
            other => return Err(format!("unknown mode {other:?}").into()),
        }
        Err(format!("the host let a {} wait run for {:?}", plan.mode, started.elapsed()).into())
    }
}

ahp_guest::export_agent!(Sleeper);
