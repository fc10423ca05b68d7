//! Hostile guest: spins forever. With the tool state `{"resumeFirst": true}` its first turn
//! returns at once (so the transfer becomes active) and every later turn spins.

use std::sync::atomic::{AtomicU32, Ordering};

use ahp_guest::{Agent, snapshot};

static TURNS: AtomicU32 = AtomicU32::new(0);

struct LoopForever;

impl Agent for LoopForever {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        let turn = TURNS.fetch_add(1, Ordering::Relaxed);
        if turn == 0 && snapshot::tool_state().contains("\"resumeFirst\":true") {
            return Ok(());
        }
        let mut x: u64 = 1;
        loop {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

ahp_guest::export_agent!(LoopForever);
