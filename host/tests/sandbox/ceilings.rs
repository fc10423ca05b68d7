//! Each compute and memory ceiling stops the hostile guest that breaks it, audited, on the first
//! turn and a later one.

#[allow(unused_imports)]
use super::*;

#[test]
pub(super) fn loop_forever() {
    // Nano: 0.25 CPU-s of fuel, 2 s of wall clock: the fuel ceiling bites first.
    host().assert_stopped_by("loop-forever", Tier::Nano, Ceiling::FuelPerTurn);
}

#[test]
pub(super) fn wall_clock_ceiling_stops_a_spinning_guest() {
    let cap = CeilingCap {
        wall_clock_per_turn: Some(Duration::from_millis(30)),
        ..CeilingCap::default()
    };
    let h = host_with(cap, None);
    let started = std::time::Instant::now();
    h.assert_stopped_by("loop-forever", Tier::Small, Ceiling::WallClock);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
pub(super) fn memory_bomb() {
    host().assert_stopped_by("memory-bomb", Tier::Nano, Ceiling::Memory);
}

#[test]
pub(super) fn table_bomb() {
    host().assert_stopped_by("table-bomb", Tier::Nano, Ceiling::TableElements);
}

#[test]
pub(super) fn many_instances() {
    host().assert_refused_by_count("many-instances", Ceiling::Instances, 18);
}

#[test]
pub(super) fn many_memories() {
    host().assert_refused_by_count("many-memories", Ceiling::Memories, 2);
}

#[test]
pub(super) fn many_tables() {
    host().assert_refused_by_count("many-tables", Ceiling::Tables, 5);
}

#[test]
pub(super) fn a_memory_breach_on_a_later_turn_terminates_the_transfer() {
    host().assert_later_turn_terminates("memory-bomb", Ceiling::Memory);
}

#[test]
pub(super) fn a_fuel_breach_on_a_later_turn_terminates_the_transfer() {
    host().assert_later_turn_terminates("loop-forever", Ceiling::FuelPerTurn);
}

#[test]
pub(super) fn deep_recursion() {
    let h = host();
    h.assert_stopped_by("deep-recursion", Tier::Nano, Ceiling::Stack);
    // Its backtrace has a frame per recursive call: what the author is shown is bounded.
    let id = h.pushed(&snapshot(3, json!({})), Tier::Nano, 1_000_000, "deep-recursion");
    let report = h.activate(&id);
    let trace = report.diagnosis.and_then(|d| d.trace).expect("a trap has a trace");
    assert!(trace.len() <= ahp_host::sandbox::MAX_DIAGNOSIS_TRACE_BYTES + '…'.len_utf8());
    assert!(trace.contains("wasm backtrace") || trace.contains("stack"), "{trace}");
}
