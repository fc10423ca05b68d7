//! Hostile guest: allocates (and touches) one MiB after another until the host's memory
//! ceiling stops it.

use ahp_guest::Agent;

struct MemoryBomb;

impl Agent for MemoryBomb {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(std::hint::black_box(vec![0xA5; 1 << 20]));
        }
    }
}

ahp_guest::export_agent!(MemoryBomb);
