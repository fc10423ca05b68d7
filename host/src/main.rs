//! `ahp` — the operator's command: transfers, tokens, reapers and the demo.
//!
//! Logs go to stderr through `tracing` (`RUST_LOG` filters them) — the demo's to a file, out of
//! its narrated output; stdout carries only each command's result, so `ahp token issue` can be
//! captured by a script.
//!
//! Logging never stops the server: log lines go through a bounded in-memory queue drained by a
//! writer thread (`tracing-appender`, lossy), so a stderr pipe nobody reads, or one that was
//! closed, costs dropped log lines — never a blocked request.

mod cli;

use std::io::{IsTerminal, Write};

use clap::Parser;

/// Log lines buffered while stderr is slow or blocked; past this, new lines are dropped.
const LOG_QUEUE_LINES: usize = 16 * 1024;

/// The `ahp` command (also run by `ahp-conformance`).
pub(crate) fn main() -> std::process::ExitCode {
    let args = cli::Cli::parse();
    let (log, _flush_on_exit) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .lossy(true)
        .thread_name("ahp-log")
        .finish(cli::log::Sink);
    tracing_subscriber::fmt()
        .with_writer(log)
        // No colour codes in a log the command sends to a file (the demo's).
        .with_ansi(std::io::stderr().is_terminal() && args.logs_to_stderr())
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .init();
    match cli::run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            // A closed stderr must not turn a clean error exit into a panic.
            let _ = writeln!(std::io::stderr(), "error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
