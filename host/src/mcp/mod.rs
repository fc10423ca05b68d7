//! The MCP server orchestrators call: the transfer tools over stdio and Streamable HTTP.

pub mod http;
pub mod schema;
mod transfer_tools;

pub use transfer_tools::TransferTools;

use rmcp::ServiceExt;

/// Serves `tools` over this process's stdin/stdout until the client disconnects.
///
/// # Errors
///
/// If the MCP handshake or the transport fails.
pub async fn serve_stdio(tools: TransferTools) -> std::io::Result<()> {
    let running = tools
        .serve(rmcp::transport::stdio())
        .await
        .map_err(std::io::Error::other)?;
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}
