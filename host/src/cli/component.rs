//! `ahp component add`: register a guest component (compiled once, cached by digest).

use std::path::PathBuf;

use clap::Subcommand;

use super::DataDir;

#[derive(Debug, Subcommand)]
pub(crate) enum ComponentCommand {
    /// Register a WebAssembly component; prints its digest (what provision_runtime takes).
    Add {
        /// The component file (.wasm, built for wasm32-wasip2).
        path: PathBuf,
        /// A name provision_runtime can use instead of the digest (a-z, 0-9, '.', '_', '-').
        #[arg(long)]
        name: Option<String>,
    },
}

pub(crate) fn run(dir: &DataDir, command: ComponentCommand) -> anyhow::Result<()> {
    let ComponentCommand::Add { path, name } = command;
    let host = dir.open_host()?;
    let sandboxes = host.sandboxes();
    let record = sandboxes.register_component_file(&path, name.as_deref())?;
    println!("{}", record.digest);
    Ok(())
}
