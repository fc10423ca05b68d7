//! The MCP servers: the transfer tools orchestrators call (`/mcp`, `serve --stdio`) and the
//! conversation tools (`/mcp/conversations`, `serve --stdio --surface conversations`), over
//! stdio and Streamable HTTP.
//!
//! Each tool set is a module of its own ([`transfer_tools`], [`conversation_tools`] with the
//! delegation tools it also serves, [`delegation_tools`], and the MCP App cards' tools,
//! [`app_tools`], with their UI resources, [`app_card`]: its tools,
//! their arguments and the scope each needs), built the same way and served by the same
//! [`http`] router and [`serve_stdio`]; who a call acts as is decided below both, by
//! [`identity`].

pub mod app_card;
pub mod app_tools;
pub mod arguments;
pub mod changed;
#[cfg_attr(not(feature = "conformance"), allow(dead_code))]
pub(crate) mod conformance;
pub mod conversation_schema;
pub mod conversation_tools;
pub mod cors;
pub mod delegation_schema;
pub mod delegation_tools;
pub mod http;
pub mod identity;
pub mod listener;
pub mod oauth;
pub mod schema;
pub mod scopes;
pub mod tasks;
pub mod tool_error;
pub mod transfer_tools;

pub use conversation_tools::ConversationTools;
pub use transfer_tools::TransferTools;

use rmcp::ServiceExt;

/// Serves `tools` (either surface) over this process's stdin/stdout until the client disconnects.
///
/// When both are pipes (how an MCP client runs a server) they are read and written
/// asynchronously on the runtime's own event loop; otherwise (a terminal, a file) through
/// tokio's stdio, which hops to a blocking thread for every read and write. The pipes save two
/// thread hand-offs per request (see BENCHMARKS.md, MCP round trip).
///
/// # Errors
///
/// If the MCP handshake or the transport fails.
pub async fn serve_stdio<S: rmcp::ServerHandler>(tools: S) -> std::io::Result<()> {
    let running = match stdio_pipes() {
        Some(pipes) => tools.serve(pipes).await,
        None => tools.serve(rmcp::transport::stdio()).await,
    }
    .map_err(std::io::Error::other)?;
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}

/// Stdin and stdout as non-blocking pipes registered with the runtime, if both are pipes.
#[cfg(unix)]
fn stdio_pipes() -> Option<(tokio::net::unix::pipe::Receiver, tokio::net::unix::pipe::Sender)> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileTypeExt;
    use tokio::net::unix::pipe;
    // Check both before converting either: conversion makes the descriptor non-blocking, which
    // tokio's blocking stdio fallback could not read or write.
    let fifo = |fd: std::os::fd::BorrowedFd<'_>| {
        let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
        file.metadata().ok()?.file_type().is_fifo().then_some(file)
    };
    let (input, output) = (fifo(std::io::stdin().as_fd())?, fifo(std::io::stdout().as_fd())?);
    Some((
        pipe::Receiver::from_file(input).ok()?,
        pipe::Sender::from_file(output).ok()?,
    ))
}

#[cfg(not(unix))]
fn stdio_pipes() -> Option<(tokio::io::Stdin, tokio::io::Stdout)> {
    None
}
