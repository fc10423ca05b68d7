//! The `ahp` command.
fn main() {}
