//! Hostile guest: asks the vault for a ref its snapshot does not list and for one that climbs
//! out of the vault directory, then for its own. Resumes only if the host refused both probes
//! and granted its own ref.

use ahp_guest::credentials::{self, Error};
use ahp_guest::{Agent, snapshot};

struct CredentialProber;

impl Agent for CredentialProber {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        for probe in ["someone-elses-key", "../token-key", "../../etc/passwd"] {
            match credentials::resolve(probe) {
                Err(Error::NotAllowed(_)) => {}
                other => return Err(format!("probe {probe:?} was not refused: {other:?}").into()),
            }
        }
        let own = snapshot::mcp_servers().into_iter().next().ok_or("no server")?;
        credentials::resolve(&own.cred_ref)?;
        Ok(())
    }
}

ahp_guest::export_agent!(CredentialProber);
