//! What one sandbox may reach and use: its snapshot's servers narrowed by the policy.

use std::net::IpAddr;

use ipnet::IpNet;

use super::{CredentialRule, ModelRule, Origin, reachable};

/// What one sandbox may reach and use: its snapshot's servers narrowed by the policy.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// The servers it may reach.
    pub servers: Vec<ServerGrant>,
    /// Networks reachable beyond the defaults.
    pub networks: Vec<IpNet>,
    /// The origins of the policy's model endpoints, which a guest may never reach itself.
    pub model_origins: Vec<Origin>,
    /// The policy's models, which the gateway offers every guest (a snapshot cannot add one).
    pub models: std::sync::Arc<[ModelRule]>,
}

/// One server a sandbox may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerGrant {
    /// Its origin.
    pub origin: Origin,
    /// The credential injected into its requests (and perhaps revealed), if any.
    pub credential: Option<CredentialRule>,
    /// What each tool call to it costs, in micro-USD.
    pub tool_call_micro_usd: u64,
}

impl Grants {
    /// The grant for requests to `origin`, if any (never for a model endpoint's origin).
    pub fn server(&self, origin: &Origin) -> Option<&ServerGrant> {
        if self.is_model_origin(origin) {
            return None;
        }
        self.servers.iter().find(|s| s.origin == *origin)
    }

    /// Whether `origin` is a model endpoint's.
    pub fn is_model_origin(&self, origin: &Origin) -> bool {
        self.model_origins.contains(origin)
    }

    /// Whether `credentials.resolve(cred_ref)` may return the value.
    pub fn reveals(&self, cred_ref: &str) -> bool {
        self.servers
            .iter()
            .filter_map(|s| s.credential.as_ref())
            .any(|c| c.cred_ref == cred_ref && c.reveal)
    }

    /// Whether the policy binds `cred_ref` to one of this sandbox's servers at all.
    pub fn binds(&self, cred_ref: &str) -> bool {
        self.servers
            .iter()
            .filter_map(|s| s.credential.as_ref())
            .any(|c| c.cred_ref == cred_ref)
    }

    /// Whether a connection to `ip` is allowed: it is in an allowed network, or in none of the
    /// ranges refused by default.
    pub fn reachable(&self, ip: IpAddr) -> bool {
        reachable(ip, &self.networks)
    }
}
