//! `ahp-conformance`: the `ahp` command, built with the `conformance` feature, whose MCP
//! surfaces also serve the official conformance suite's fixture tools
//! (`host/src/mcp/conformance.rs`). `.ci/conformance` builds it
//! (`cargo build -p ahp-host --features conformance --bin ahp-conformance`) and runs the
//! suite's `tasks-*` scenarios against it; nothing else does.

#[path = "../main.rs"]
mod ahp;

fn main() -> std::process::ExitCode {
    ahp::main()
}
