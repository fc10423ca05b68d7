//! Hostile guest: allocates (and touches) one MiB after another until the host's memory
//! ceiling stops it. With the tool state `{"resumeFirst": true}` its first turn returns at
//! once (so the transfer becomes active) and every later turn allocates.

use std::sync::atomic::{AtomicU32, Ordering};

use ahp_guest::{Agent, snapshot};

static TURNS: AtomicU32 = AtomicU32::new(0);

struct MemoryBomb;

impl Agent for MemoryBomb {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        let turn = TURNS.fetch_add(1, Ordering::Relaxed);
        if turn == 0 && snapshot::tool_state().contains("\"resumeFirst\":true") {
            return Ok(());
        }
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(std::hint::black_box(vec![0xA5; 1 << 20]));
        }
    }
}

ahp_guest::export_agent!(MemoryBomb);
