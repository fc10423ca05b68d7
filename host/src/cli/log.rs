//! Where the operator's log lines go: stderr, unless a command sends them to a file — the demo
//! does, so that `WARN` lines, traps and wasm backtraces stay out of the story it narrates on
//! stdout (and it says where they went).
//!
//! `main` installs [`Sink`] as the writer under the non-blocking log queue; [`to_file`] turns
//! it to a file for the rest of the process.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// The file the log goes to once [`to_file`] was called.
static FILE: OnceLock<Mutex<File>> = OnceLock::new();

/// The log's writer: the file of [`to_file`], else stderr.
pub(crate) struct Sink;

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match FILE.get() {
            Some(f) => f.lock().unwrap_or_else(std::sync::PoisonError::into_inner).write(buf),
            None => std::io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match FILE.get() {
            Some(f) => f.lock().unwrap_or_else(std::sync::PoisonError::into_inner).flush(),
            None => std::io::stderr().flush(),
        }
    }
}

/// Sends every log line from now on to `path` (created or truncated), instead of stderr.
///
/// # Errors
///
/// When `path` cannot be created, or the log already goes to a file.
pub(crate) fn to_file(path: &Path) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let file = File::create(path).with_context(|| format!("creating the log file {}", path.display()))?;
    FILE.set(Mutex::new(file))
        .map_err(|_| anyhow::anyhow!("the log already goes to a file"))
}
