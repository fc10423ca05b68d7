//! `ahp` — the operator's command: transfers, tokens, reapers and the demo.
//!
//! Logs go to stderr through `tracing` (`RUST_LOG` filters them); stdout carries only each
//! command's result, so `ahp token issue` can be captured by a script.

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .init();
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
