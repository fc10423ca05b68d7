//! Hostile guest: sends a GET to every MCP server its snapshot names — metadata, loopback and
//! private addresses included — and asks the vault for every credential reference, then
//! prints one line per attempt with everything it could observe (status, body length, the
//! error; for a credential only whether it was revealed and its length, never the value), so
//! the host's tests can assert on what a guest sees. Always resumes.

use ahp_guest::credentials;
use ahp_guest::{Agent, snapshot};
use wasip2::http::types::Method;

struct EgressProber;

impl Agent for EgressProber {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        for server in snapshot::mcp_servers() {
            match http_client::send(Method::Get, &server.server, b"") {
                Ok((status, len)) => println!("GET {} -> {status} ({len} bytes)", server.server),
                Err(e) => println!("GET {} -> refused: {e}", server.server),
            }
            match credentials::resolve(&server.cred_ref) {
                Ok(c) => println!("resolve {} -> revealed ({} bytes)", server.cred_ref, c.value().len()),
                Err(e) => println!("resolve {} -> refused: {e:?}", server.cred_ref),
            }
        }
        Ok(())
    }
}

ahp_guest::export_agent!(EgressProber);
