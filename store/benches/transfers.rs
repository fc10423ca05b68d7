//! Store benchmarks (being written).
fn main() {}
