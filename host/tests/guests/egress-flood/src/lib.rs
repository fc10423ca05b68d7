//! Hostile guest: POSTs 256 KiB bodies to its own (allowed) MCP server until the host cuts it
//! off at the tier's egress ceiling. Resumes only if it was cut off; prints what got through.

use ahp_guest::{Agent, snapshot};
use wasip2::http::types::Method;

struct EgressFlood;

impl Agent for EgressFlood {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        let server = snapshot::mcp_servers().into_iter().next().ok_or("no server")?.server;
        let body = vec![b'x'; 256 * 1024];
        let mut sent = 0usize;
        for _ in 0..10_000 {
            match http_client::send(Method::Post, &server, &body) {
                Ok((_, received)) => sent += body.len() + received,
                Err(e) => {
                    println!("cut off after {sent} bytes: {e}");
                    return Ok(());
                }
            }
        }
        Err(format!("never cut off after {sent} bytes").into())
    }
}

ahp_guest::export_agent!(EgressFlood);
