//! `ahp:agent@0.1.0`: the frozen interfaces of the first contract, for components built
//! before conversation turns. Each function forwards to its `@0.3.0` twin ([`snapshot`],
//! [`credentials`], [`checkpoint`]; `metering` links every version itself), converting only
//! the generated types, so the two versions cannot drift apart.
//!
//! [`snapshot`]: super::snapshot
//! [`credentials`]: super::credentials
//! [`checkpoint`]: super::checkpoint

use super::AgentCtx;
use super::bindings::v0_1::ahp::agent as old;
use super::bindings::v0_3::ahp::agent as new;

impl old::snapshot::Host for AgentCtx {
    fn transfer_id(&mut self) -> String {
        new::snapshot::Host::transfer_id(self)
    }

    fn system_prompt(&mut self) -> String {
        new::snapshot::Host::system_prompt(self)
    }

    fn message_count(&mut self) -> u32 {
        new::snapshot::Host::message_count(self)
    }

    fn messages(&mut self, after: u32, limit: u32) -> Result<Vec<old::snapshot::Message>, old::snapshot::Error> {
        match new::snapshot::Host::messages(self, after, limit) {
            Ok(page) => Ok(page
                .into_iter()
                .map(|m| old::snapshot::Message {
                    role: m.role,
                    content: m.content,
                })
                .collect()),
            Err(new::snapshot::Error::LimitTooLarge(n)) => Err(old::snapshot::Error::LimitTooLarge(n)),
        }
    }

    fn tool_state(&mut self) -> String {
        new::snapshot::Host::tool_state(self)
    }

    fn mcp_servers(&mut self) -> Vec<old::snapshot::McpServer> {
        new::snapshot::Host::mcp_servers(self)
            .into_iter()
            .map(|s| old::snapshot::McpServer {
                server: s.server,
                cred_ref: s.cred_ref,
            })
            .collect()
    }
}

impl old::credentials::Host for AgentCtx {
    fn resolve(&mut self, cred_ref: String) -> Result<old::credentials::Credential, old::credentials::Error> {
        use new::credentials::Error as E;
        match new::credentials::Host::resolve(self, cred_ref) {
            Ok(c) => Ok(old::credentials::Credential {
                cred_ref: c.cred_ref,
                value: c.value,
            }),
            Err(E::NotAllowed(m)) => Err(old::credentials::Error::NotAllowed(m)),
            Err(E::NotFound) => Err(old::credentials::Error::NotFound),
            Err(E::Unavailable(m)) => Err(old::credentials::Error::Unavailable(m)),
        }
    }
}

impl old::checkpoint::Host for AgentCtx {
    fn save(&mut self, state: Vec<u8>) -> Result<(), old::checkpoint::Error> {
        new::checkpoint::Host::save(self, state).map_err(checkpoint_error)
    }

    fn load(&mut self) -> Result<Option<Vec<u8>>, old::checkpoint::Error> {
        new::checkpoint::Host::load(self).map_err(checkpoint_error)
    }
}

fn checkpoint_error(e: new::checkpoint::Error) -> old::checkpoint::Error {
    match e {
        new::checkpoint::Error::TooLarge(n) => old::checkpoint::Error::TooLarge(n),
        new::checkpoint::Error::Unavailable(m) => old::checkpoint::Error::Unavailable(m),
    }
}
