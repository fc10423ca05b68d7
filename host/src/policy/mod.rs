//! The operator's credential and egress policy: which MCP servers a guest may reach, which
//! credential reference is bound to each, how the host presents it, and which networks are
//! reachable at all.
//!
//! A snapshot's `mcpConfig` is written by whoever calls `snapshot_state` — possibly the source
//! agent itself — so it is not trusted. It can only **narrow** this policy: a guest reaches a
//! server only if both the policy and its snapshot name it, and uses a credential only if the
//! policy binds that very reference to that server and the snapshot names the same pair.
//!
//! # The file
//!
//! `<data-dir>/policy.json`, edited with `ahp policy …` or by hand; read when the host starts
//! (`ahp serve`, `ahp demo`), so a change takes effect at the next start. No file means the
//! empty policy: no server is reachable and no credential can be used.
//!
//! ```json
//! {
//!   "servers": [
//!     {
//!       "server": "https://inventory.example.com",
//!       "credential": {
//!         "credRef": "inventory-api",
//!         "inject": { "header": "authorization", "prefix": "Bearer " },
//!         "reveal": false
//!       }
//!     },
//!     { "server": "http://10.1.2.3:8080" }
//!   ],
//!   "models": [
//!     { "id": "default", "provider": "openai", "endpoint": "https://api.openai.com/v1",
//!       "providerModel": "gpt-4.1-mini", "credential": { "credRef": "openai-key" },
//!       "contextTokens": 128000, "maxOutputTokens": 4096,
//!       "priceMicroUsdPerMTok": { "input": 400000, "output": 1600000, "cacheRead": 100000, "cacheWrite": 0 } }
//!   ],
//!   "allowNetworks": ["10.1.0.0/16"]
//! }
//! ```
//!
//! - `servers[].server`: an `http`/`https` **origin** — scheme, host and port (the scheme's
//!   default if absent); a path is ignored, user info, a query or a fragment are refused. A
//!   request matches a server only if its scheme, host and port are all equal (`http://h:443`
//!   is not `https://h`).
//! - `servers[].credential` (optional): the vault reference bound to that server. For every
//!   request to the server the host **injects** it — the header `inject.header` (default
//!   `authorization`) set to `inject.prefix` (default `"Bearer "`) followed by the secret,
//!   replacing any value the guest set — so the secret never enters the sandbox.
//!   `credentials.resolve` hands the value to the guest only if `reveal` is `true` (default
//!   `false`).
//! - `models` (optional): the models the host's gateway offers guests (`ahp:agent/model`), in
//!   this order. See [`ModelRule`] for each field and its bound. A model's endpoint is the
//!   operator's, so the gateway reaches it whatever the network defaults (a local Ollama on
//!   loopback works) — and no guest ever reaches its origin through `wasi:http`, which would
//!   bypass the meter: a server may not share a model endpoint's origin, and the sandbox's egress
//!   refuses every request to one. A snapshot cannot add a model.
//! - `allowNetworks` (optional): CIDR blocks reachable although the defaults refuse them. By
//!   default every destination whose resolved address is loopback, private (10/8, 172.16/12,
//!   192.168/16, fc00::/7), link-local (169.254/16, fe80::/10 — cloud metadata lives there),
//!   shared (100.64/10), unspecified, multicast, broadcast or reserved is refused. The check is
//!   on the address the name **resolves** to, and the connection is made to that very address
//!   (no second lookup, so no DNS rebinding); IPv4-mapped IPv6 addresses are checked as IPv4.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ahp_store::McpServer;
use ahp_store::snapshot::validate_cred_ref;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};

mod grants;
mod model;
mod network;
mod origin;

pub use grants::{Grants, ServerGrant};
pub use model::{
    MAX_CONTEXT_TOKENS, MAX_ENDPOINT_BYTES, MAX_MODEL_OUTPUT_TOKENS, MAX_MODELS, MAX_PROVIDER_MODEL_BYTES,
    ModelCredential, ModelPriceRule, ModelRule, Provider,
};
pub use network::reachable;
pub use origin::Origin;

/// The policy file inside the data directory.
pub const POLICY_FILE: &str = "policy.json";

/// Most servers a policy may list: far more than any host serves, small enough to scan.
pub const MAX_SERVERS: usize = 1024;

/// Most extra networks a policy may allow.
pub const MAX_NETWORKS: usize = 256;

/// Longest injection prefix, in bytes.
pub const MAX_PREFIX_BYTES: usize = 64;

/// Why a policy could not be read, written or changed. Nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The policy breaks a rule; the message says which entry and why.
    #[error("invalid policy: {0}")]
    Invalid(String),
    /// The file is not the policy's JSON.
    #[error("{path} is not a valid policy: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its line and column.
        message: String,
    },
    /// The file could not be read or written.
    #[error("I/O on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

/// The operator's policy. See the [module docs](self) for the format.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Policy {
    /// The servers guests may reach, each with its credential binding.
    #[serde(default)]
    pub servers: Vec<ServerRule>,
    /// The models the gateway offers, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelRule>,
    /// CIDR blocks reachable although the default refuses them (e.g. `127.0.0.0/8` for a test).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_networks: Vec<String>,
}

/// One server of the policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServerRule {
    /// Its origin, as an `http`/`https` URL.
    pub server: String,
    /// The credential bound to it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<CredentialRule>,
    /// What each `tools.call` to this server costs the transfer, in micro-USD (default 0,
    /// at most `MAX_USAGE_REPORT_MICRO_USD`): charged under the host-reserved kind
    /// `tool_calls` for each call the host sends (see `crate::tools`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_call_micro_usd: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A credential bound to a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CredentialRule {
    /// The vault reference.
    pub cred_ref: String,
    /// How the host adds it to each request.
    #[serde(default)]
    pub inject: Injection,
    /// Whether `credentials.resolve` may hand the value to the guest.
    #[serde(default)]
    pub reveal: bool,
}

/// The header the host sets on each request to a server with a credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Injection {
    /// The header's name (lowercase on the wire).
    #[serde(default = "default_header")]
    pub header: String,
    /// What precedes the secret in the header's value.
    #[serde(default = "default_prefix")]
    pub prefix: String,
}

fn default_header() -> String {
    "authorization".into()
}

fn default_prefix() -> String {
    "Bearer ".into()
}

impl Default for Injection {
    fn default() -> Self {
        Self {
            header: default_header(),
            prefix: default_prefix(),
        }
    }
}

impl Policy {
    /// Reads the policy of the data directory `dir`; the empty policy if it has no file.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the file exists but cannot be read, [`Error::Parse`] if it is not the
    /// policy's JSON, [`Error::Invalid`] if it breaks a rule.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        let path = dir.join(POLICY_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => return Err(Error::Io { path, source }),
        };
        let policy: Self = serde_json::from_str(&text).map_err(|e| Error::Parse {
            path: path.clone(),
            message: e.to_string(),
        })?;
        policy.validate()?;
        Ok(policy)
    }

    /// Writes the policy to the data directory `dir`, atomically (a reader sees the old file or
    /// the new one), after validating it.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] (nothing is written) or [`Error::Io`].
    pub fn save(&self, dir: &Path) -> Result<(), Error> {
        self.validate()?;
        let path = dir.join(POLICY_FILE);
        let tmp = dir.join(format!(".{POLICY_FILE}.tmp{}", std::process::id()));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        let mut text = serde_json::to_string_pretty(self).expect("a policy serializes");
        text.push('\n');
        std::fs::write(&tmp, text).map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))
    }

    /// Checks every rule of the format (see the [module docs](self)).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] naming the first entry that breaks one.
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |m: String| Err(Error::Invalid(m));
        if self.servers.len() > MAX_SERVERS {
            return invalid(format!("at most {MAX_SERVERS} servers"));
        }
        if self.allow_networks.len() > MAX_NETWORKS {
            return invalid(format!("at most {MAX_NETWORKS} networks"));
        }
        let mut seen = BTreeSet::new();
        for (i, s) in self.servers.iter().enumerate() {
            let origin = Origin::parse(&s.server).map_err(|m| Error::Invalid(format!("servers[{i}]: {m}")))?;
            if !seen.insert(origin.clone()) {
                return invalid(format!("servers[{i}]: {origin} is listed twice"));
            }
            if s.tool_call_micro_usd > ahp_store::MAX_USAGE_REPORT_MICRO_USD {
                return invalid(format!(
                    "servers[{i}].toolCallMicroUsd: at most {}",
                    ahp_store::MAX_USAGE_REPORT_MICRO_USD
                ));
            }
            if let Some(c) = &s.credential {
                validate_cred_ref(&c.cred_ref)
                    .map_err(|r| Error::Invalid(format!("servers[{i}].credential.credRef {r}")))?;
                let name = http::HeaderName::from_bytes(c.inject.header.as_bytes())
                    .map_err(|_| Error::Invalid(format!("servers[{i}]: {:?} is not a header name", c.inject.header)))?;
                if matches!(
                    name.as_str(),
                    "host" | "content-length" | "transfer-encoding" | "connection" | "upgrade" | "te" | "trailer"
                ) {
                    return invalid(format!("servers[{i}]: the host cannot inject the {name} header"));
                }
                if c.inject.prefix.len() > MAX_PREFIX_BYTES || http::HeaderValue::from_str(&c.inject.prefix).is_err() {
                    return invalid(format!(
                        "servers[{i}]: the prefix must be at most {MAX_PREFIX_BYTES} bytes of visible ASCII"
                    ));
                }
            }
        }
        if self.models.len() > MAX_MODELS {
            return invalid(format!("at most {MAX_MODELS} models"));
        }
        let mut ids = BTreeSet::new();
        for (i, m) in self.models.iter().enumerate() {
            m.validate(&format!("models[{i}]"))?;
            if !ids.insert(m.id.as_str()) {
                return invalid(format!("models[{i}]: the id {:?} is listed twice", m.id));
            }
            let origin = m.origin().expect("validated");
            if seen.contains(&origin) {
                return invalid(format!(
                    "models[{i}]: {origin} is also a server's origin; guests may never reach a model endpoint directly"
                ));
            }
        }
        for (i, n) in self.allow_networks.iter().enumerate() {
            n.parse::<IpNet>()
                .map_err(|_| Error::Invalid(format!("allowNetworks[{i}]: {n:?} is not a CIDR block")))?;
        }
        Ok(())
    }

    /// The networks this policy allows beyond the defaults (validated, so they parse).
    pub fn networks(&self) -> Vec<IpNet> {
        self.allow_networks.iter().filter_map(|n| n.parse().ok()).collect()
    }

    /// The model of id `id`, if the policy offers it.
    pub fn model(&self, id: &str) -> Option<&ModelRule> {
        self.models.iter().find(|m| m.id == id)
    }

    /// The origins of every model endpoint: refused to guests' `wasi:http`.
    pub fn model_origins(&self) -> Vec<Origin> {
        self.models.iter().filter_map(ModelRule::origin).collect()
    }

    /// What a guest whose snapshot lists `mcp_config` may do under this policy: the servers
    /// both name, each with the credential only where both bind the same reference to it —
    /// never a model endpoint's origin.
    pub fn grants(&self, mcp_config: &[McpServer]) -> Grants {
        let model_origins = self.model_origins();
        let wanted: Vec<(Origin, &str)> = mcp_config
            .iter()
            .filter_map(|m| Some((Origin::parse(&m.server).ok()?, m.cred_ref.as_str())))
            .collect();
        let servers = self
            .servers
            .iter()
            .filter_map(|rule| {
                let origin = Origin::parse(&rule.server).ok()?;
                if model_origins.contains(&origin) {
                    return None;
                }
                let asked: Vec<&str> = wanted.iter().filter(|(o, _)| *o == origin).map(|(_, r)| *r).collect();
                if asked.is_empty() {
                    return None;
                }
                let credential = rule.credential.clone().filter(|c| asked.contains(&c.cred_ref.as_str()));
                Some(ServerGrant {
                    origin,
                    credential,
                    tool_call_micro_usd: rule.tool_call_micro_usd,
                })
            })
            .collect();
        Grants {
            servers,
            networks: self.networks(),
            model_origins,
            models: self.models.clone().into(),
        }
    }
}

#[cfg(test)]
mod tests;
