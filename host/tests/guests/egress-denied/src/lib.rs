//! Hostile guest: sends HTTP to hosts its snapshot does not name (another host, and its own
//! server's address under a different name). Resumes only if every request was refused, then
//! reaches its own server once to show egress itself works.

use ahp_guest::{Agent, snapshot};
use wasip2::http::types::Method;

struct EgressDenied;

impl Agent for EgressDenied {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        let server = snapshot::mcp_servers().into_iter().next().ok_or("no server")?.server;
        let port = server
            .rsplit_once(':')
            .map_or("80", |(_, p)| p.split('/').next().unwrap_or("80"));
        for url in ["http://example.com/".to_owned(), format!("http://localhost:{port}/")] {
            if let Ok((status, _)) = http_client::send(Method::Get, &url, b"") {
                return Err(format!("{url} was reachable (status {status})").into());
            }
        }
        let (status, _) = http_client::send(Method::Get, &server, b"")?;
        println!("own server answered {status}");
        Ok(())
    }
}

ahp_guest::export_agent!(EgressDenied);
