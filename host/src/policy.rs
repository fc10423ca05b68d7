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
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use ahp_store::McpServer;
use ahp_store::snapshot::validate_cred_ref;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};

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

/// Most models a policy may list.
pub const MAX_MODELS: usize = 64;
/// Longest `providerModel`, in bytes.
pub const MAX_PROVIDER_MODEL_BYTES: usize = 256;
/// Longest model `endpoint`, in bytes.
pub const MAX_ENDPOINT_BYTES: usize = 2048;
/// The largest `contextTokens` a model may declare: ten million, beyond every model offered.
pub const MAX_CONTEXT_TOKENS: u32 = 10_000_000;
/// The largest `maxOutputTokens` a model may declare.
pub const MAX_MODEL_OUTPUT_TOKENS: u32 = 1_000_000;

/// Which protocol a model's endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// OpenAI Chat Completions at `{endpoint}/chat/completions`, the key as
    /// `Authorization: Bearer` (OpenAI, Ollama, vLLM, llama.cpp server, LM Studio, LiteLLM,
    /// OpenRouter).
    Openai,
    /// Anthropic Messages at `{endpoint}/messages`, the key as `x-api-key`.
    Anthropic,
}

impl Provider {
    /// Its name in the policy (`openai`, `anthropic`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
        }
    }
}

impl std::str::FromStr for Provider {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "openai" => Ok(Self::Openai),
            "anthropic" => Ok(Self::Anthropic),
            _ => Err(format!("{s:?} is not a provider (openai, anthropic)")),
        }
    }
}

/// The vault reference of a model's API key; the gateway sends it as the provider expects and
/// it never enters a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelCredential {
    /// The vault reference.
    pub cred_ref: String,
}

/// A model's prices in integer micro-USD per million tokens, each at most
/// [`ahp_store::model_call::MAX_PRICE_MICRO_USD_PER_MTOK`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelPriceRule {
    /// Input tokens neither read from nor written to a prompt cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write: u64,
}

impl From<ModelPriceRule> for ahp_store::ModelPrices {
    fn from(p: ModelPriceRule) -> Self {
        Self {
            input: p.input,
            output: p.output,
            cache_read: p.cache_read,
            cache_write: p.cache_write,
        }
    }
}

/// One model of the policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelRule {
    /// The id guests pass as `request.model`: 1 to 64 of `a-z A-Z 0-9 . _ -`, unique.
    pub id: String,
    /// The protocol its endpoint speaks.
    pub provider: Provider,
    /// The provider's base URL (`http`/`https`, at most [`MAX_ENDPOINT_BYTES`], no user info,
    /// query or fragment), e.g. `https://api.openai.com/v1`.
    pub endpoint: String,
    /// The provider's name of the model (1 to [`MAX_PROVIDER_MODEL_BYTES`] of visible ASCII).
    pub provider_model: String,
    /// Its API key, if the endpoint needs one (a local Ollama does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<ModelCredential>,
    /// The most tokens it reads in one call, input and output together (1 to
    /// [`MAX_CONTEXT_TOKENS`]).
    pub context_tokens: u32,
    /// The most tokens one call may produce ([`ahp_store::MIN_OUTPUT_TOKENS`] to the least of
    /// `contextTokens` and [`MAX_MODEL_OUTPUT_TOKENS`]).
    pub max_output_tokens: u32,
    /// What its tokens cost.
    pub price_micro_usd_per_m_tok: ModelPriceRule,
}

impl ModelRule {
    /// The origin of its endpoint (validated, so it parses).
    pub fn origin(&self) -> Option<Origin> {
        Origin::parse(&self.endpoint).ok()
    }

    /// Checks its fields (see each one's doc); `at` names it in the message.
    fn validate(&self, at: &str) -> Result<(), Error> {
        let invalid = |m: String| Err(Error::Invalid(format!("{at}: {m}")));
        let id_ok = !self.id.is_empty()
            && self.id.len() <= ahp_store::model_call::MAX_MODEL_ID_BYTES
            && self
                .id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !id_ok {
            return invalid(format!(
                "id {:?} must be 1 to {} of a-z, A-Z, 0-9, '.', '_', '-'",
                self.id,
                ahp_store::model_call::MAX_MODEL_ID_BYTES
            ));
        }
        if self.endpoint.len() > MAX_ENDPOINT_BYTES {
            return invalid(format!("the endpoint is longer than {MAX_ENDPOINT_BYTES} bytes"));
        }
        Origin::parse(&self.endpoint).map_err(|m| Error::Invalid(format!("{at}.endpoint: {m}")))?;
        let name_ok = !self.provider_model.is_empty()
            && self.provider_model.len() <= MAX_PROVIDER_MODEL_BYTES
            && self.provider_model.bytes().all(|b| b.is_ascii_graphic());
        if !name_ok {
            return invalid(format!(
                "providerModel must be 1 to {MAX_PROVIDER_MODEL_BYTES} bytes of visible ASCII"
            ));
        }
        if let Some(c) = &self.credential {
            validate_cred_ref(&c.cred_ref).map_err(|r| Error::Invalid(format!("{at}.credential.credRef {r}")))?;
        }
        if self.context_tokens == 0 || self.context_tokens > MAX_CONTEXT_TOKENS {
            return invalid(format!("contextTokens must be 1 to {MAX_CONTEXT_TOKENS}"));
        }
        let most = self.context_tokens.min(MAX_MODEL_OUTPUT_TOKENS);
        if self.max_output_tokens < ahp_store::MIN_OUTPUT_TOKENS || self.max_output_tokens > most {
            return invalid(format!(
                "maxOutputTokens must be {} to {most} (at most contextTokens and {MAX_MODEL_OUTPUT_TOKENS})",
                ahp_store::MIN_OUTPUT_TOKENS
            ));
        }
        let p = &self.price_micro_usd_per_m_tok;
        for (name, price) in [
            ("input", p.input),
            ("output", p.output),
            ("cacheRead", p.cache_read),
            ("cacheWrite", p.cache_write),
        ] {
            if price > ahp_store::model_call::MAX_PRICE_MICRO_USD_PER_MTOK {
                return invalid(format!(
                    "priceMicroUsdPerMTok.{name} must be at most {}",
                    ahp_store::model_call::MAX_PRICE_MICRO_USD_PER_MTOK
                ));
            }
        }
        Ok(())
    }
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

/// A scheme, host and port: what a request must match exactly.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    /// `http` or `https`.
    pub scheme: String,
    /// The host, lowercase (an IPv6 address without brackets).
    pub host: String,
    /// The port (the scheme's default if the URL has none).
    pub port: u16,
}

impl Origin {
    /// The origin of `url`.
    ///
    /// # Errors
    ///
    /// A sentence saying what is wrong: not a URL, not http(s), no host, user info, a query.
    pub fn parse(url: &str) -> Result<Self, String> {
        let u = url::Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        if !matches!(u.scheme(), "http" | "https") {
            return Err(format!("{url:?} is not an http or https URL"));
        }
        if !u.username().is_empty() || u.password().is_some() || u.query().is_some() || u.fragment().is_some() {
            return Err(format!("{url:?} may not carry user info, a query or a fragment"));
        }
        let host = match u.host() {
            Some(url::Host::Ipv6(a)) => a.to_string(),
            Some(h) => h.to_string().to_ascii_lowercase(),
            None => return Err(format!("{url:?} names no host")),
        };
        let port = u
            .port_or_known_default()
            .ok_or_else(|| format!("{url:?} has no port"))?;
        Ok(Self {
            scheme: u.scheme().to_owned(),
            host,
            port,
        })
    }

    /// The origin a request URI addresses, or `None` if it is not absolute http(s).
    pub fn of_uri(uri: &http::Uri) -> Option<Self> {
        let scheme = uri.scheme_str()?;
        let default = match scheme {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        let host = uri.host()?;
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        Some(Self {
            scheme: scheme.to_owned(),
            host: host.to_ascii_lowercase(),
            port: uri.port_u16().unwrap_or(default),
        })
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "{}://[{}]:{}", self.scheme, self.host, self.port)
        } else {
            write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
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

/// Whether `ip` may be connected to: inside one of `allowed`, or outside every range refused by
/// default (see the [module docs](self)). An IPv4-mapped IPv6 address is judged as IPv4.
pub fn reachable(ip: IpAddr, allowed: &[IpNet]) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    allowed.iter().any(|n| n.contains(&ip)) || !refused_by_default(ip)
}

fn refused_by_default(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => v4_refused(a),
        IpAddr::V6(a) => v6_refused(a),
    }
}

fn v4_refused(a: Ipv4Addr) -> bool {
    let [b0, b1, ..] = a.octets();
    a.is_loopback()
        || a.is_private()
        || a.is_link_local()
        || a.is_unspecified()
        || a.is_multicast()
        || a.is_broadcast()
        || a.is_documentation()
        || b0 == 0
        || (b0 == 100 && (64..128).contains(&b1))
        || b0 >= 240
}

fn v6_refused(a: Ipv6Addr) -> bool {
    let s = a.segments();
    a.is_loopback()
        || a.is_unspecified()
        || a.is_multicast()
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        || (s[0] & 0xfe00) == 0xfc00
        // NAT64 (64:ff9b::/96) reaches the embedded IPv4 address: judge that.
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] && v4_refused(Ipv4Addr::new(
            (s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8)))
        || (s[0] == 0x2001 && s[1] == 0x0db8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn special_addresses_are_refused_by_default_and_public_ones_reached() {
        for refused in [
            "127.0.0.1",
            "127.255.255.254",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "100.64.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "fc00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(!reachable(ip(refused), &[]), "{refused}");
        }
        for public in [
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "8.8.8.8",
        ] {
            assert!(reachable(ip(public), &[]), "{public}");
        }
        let loopback: Vec<IpNet> = vec!["127.0.0.0/8".parse().unwrap()];
        assert!(reachable(ip("127.0.0.1"), &loopback));
        assert!(reachable(ip("::ffff:127.0.0.1"), &loopback), "mapped, judged as IPv4");
        assert!(!reachable(ip("169.254.169.254"), &loopback));
        assert!(!reachable(ip("::1"), &loopback), "IPv6 loopback is another network");
    }

    #[test]
    fn origins_match_scheme_host_and_port() {
        let o = Origin::parse("https://Inventory.Example.com/mcp").unwrap();
        assert_eq!(o.to_string(), "https://inventory.example.com:443");
        assert_eq!(
            Origin::of_uri(&"https://inventory.example.com:443/x".parse().unwrap()),
            Some(o.clone())
        );
        assert_ne!(
            Origin::of_uri(&"http://inventory.example.com:443/".parse().unwrap()),
            Some(o.clone())
        );
        assert_ne!(Origin::parse("https://inventory.example.com:8443").unwrap(), o);
        assert_eq!(
            Origin::parse("http://[::1]:8080").unwrap().to_string(),
            "http://[::1]:8080"
        );
        assert_eq!(
            Origin::of_uri(&"http://[::1]:8080/".parse().unwrap()).unwrap().host,
            "::1"
        );
        assert!(Origin::parse("ftp://x").is_err());
        assert!(Origin::parse("https://u:p@x").is_err());
        assert!(Origin::parse("https://x/?token=1").is_err());
    }

    fn rule(server: &str, cred: Option<(&str, bool)>) -> ServerRule {
        ServerRule {
            server: server.into(),
            credential: cred.map(|(r, reveal)| CredentialRule {
                cred_ref: r.into(),
                inject: Injection::default(),
                reveal,
            }),
            tool_call_micro_usd: 0,
        }
    }

    fn mcp(server: &str, cred_ref: &str) -> McpServer {
        McpServer {
            server: server.into(),
            cred_ref: cred_ref.into(),
        }
    }

    #[test]
    fn a_snapshot_only_narrows_the_policy() {
        let policy = Policy {
            servers: vec![
                rule("https://inventory.example.com", Some(("inventory-api", false))),
                rule("https://crm.example.com", Some(("crm-key", true))),
                rule("https://open.example.com", None),
            ],
            models: vec![],
            allow_networks: vec![],
        };
        let g = policy.grants(&[
            mcp("https://inventory.example.com/mcp", "inventory-api"),
            // The policy binds crm-key there, not this ref: no credential for it.
            mcp("https://crm.example.com/mcp", "inventory-api"),
            // Not in the policy at all.
            mcp("https://evil.example.com/mcp", "crm-key"),
            mcp("http://127.0.0.1:8080/mcp", "inventory-api"),
        ]);
        assert_eq!(g.servers.len(), 2);
        let inv = g
            .server(&Origin::parse("https://inventory.example.com").unwrap())
            .unwrap();
        assert_eq!(inv.credential.as_ref().unwrap().cred_ref, "inventory-api");
        let crm = g.server(&Origin::parse("https://crm.example.com").unwrap()).unwrap();
        assert!(crm.credential.is_none());
        assert!(g.server(&Origin::parse("https://evil.example.com").unwrap()).is_none());
        assert!(
            g.server(&Origin::parse("https://open.example.com").unwrap()).is_none(),
            "not in the snapshot"
        );
        assert!(
            g.binds("inventory-api") && !g.reveals("inventory-api"),
            "injected, not revealed"
        );
        assert!(!g.binds("crm-key") && !g.reveals("crm-key"));
        assert!(
            Policy::default()
                .grants(&[mcp("https://inventory.example.com", "inventory-api")])
                .servers
                .is_empty()
        );
    }

    #[test]
    fn bad_policies_are_refused_and_the_file_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            Policy::load(dir.path()).unwrap(),
            Policy::default(),
            "no file: empty policy"
        );
        let good = Policy {
            servers: vec![rule("https://inventory.example.com", Some(("inventory-api", true)))],
            models: vec![],
            allow_networks: vec!["127.0.0.0/8".into()],
        };
        good.save(dir.path()).unwrap();
        let before = std::fs::read(dir.path().join(POLICY_FILE)).unwrap();
        assert_eq!(Policy::load(dir.path()).unwrap(), good);
        let mut bad = vec![];
        let mut twice = good.clone();
        twice
            .servers
            .push(rule("https://INVENTORY.example.com:443/other", None));
        bad.push(twice);
        let mut net = good.clone();
        net.allow_networks.push("10.0.0.0/33".into());
        bad.push(net);
        let mut cred = good.clone();
        cred.servers[0].credential.as_mut().unwrap().cred_ref = "../token-key".into();
        bad.push(cred);
        let mut header = good.clone();
        header.servers[0].credential.as_mut().unwrap().inject.header = "host".into();
        bad.push(header);
        let mut prefix = good.clone();
        prefix.servers[0].credential.as_mut().unwrap().inject.prefix = "Bearer\n".into();
        bad.push(prefix);
        let mut scheme = good.clone();
        scheme.servers.push(rule("ftp://files.example.com", None));
        bad.push(scheme);
        for p in bad {
            assert!(matches!(p.save(dir.path()), Err(Error::Invalid(_))), "{p:?}");
            assert_eq!(std::fs::read(dir.path().join(POLICY_FILE)).unwrap(), before);
        }
        std::fs::write(dir.path().join(POLICY_FILE), r#"{"servers": [], "extra": 1}"#).unwrap();
        assert!(matches!(Policy::load(dir.path()), Err(Error::Parse { .. })));
    }

    fn model(id: &str, endpoint: &str) -> ModelRule {
        serde_json::from_value(serde_json::json!({
            "id": id, "provider": "openai", "endpoint": endpoint, "providerModel": "gpt-4.1-mini",
            "credential": { "credRef": "openai-key" }, "contextTokens": 128000, "maxOutputTokens": 4096,
            "priceMicroUsdPerMTok": { "input": 400000, "output": 1600000, "cacheRead": 100000, "cacheWrite": 0 }
        }))
        .unwrap()
    }

    #[test]
    fn the_issues_models_entry_parses_and_round_trips() {
        let text = r#"{ "models": [
          { "id": "default", "provider": "openai", "endpoint": "https://api.openai.com/v1",
            "providerModel": "gpt-4.1-mini", "credential": { "credRef": "openai-key" },
            "contextTokens": 128000, "maxOutputTokens": 4096,
            "priceMicroUsdPerMTok": { "input": 400000, "output": 1600000, "cacheRead": 100000, "cacheWrite": 0 } }
        ] }"#;
        let p: Policy = serde_json::from_str(text).unwrap();
        p.validate().unwrap();
        assert_eq!(p.models[0], model("default", "https://api.openai.com/v1"));
        assert_eq!(p.models[0].provider, Provider::Openai);
        let again: Policy = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(again, p);
        assert!(serde_json::from_str::<Policy>(&text.replace("\"openai\"", "\"gemini\"")).is_err());
    }

    #[test]
    fn models_are_validated_at_each_bound_and_one_past() {
        let ok = |m: ModelRule| {
            Policy {
                models: vec![m],
                ..Policy::default()
            }
            .validate()
        };
        let base = model("default", "https://api.openai.com/v1");
        let edit = |f: &dyn Fn(&mut ModelRule)| {
            let mut m = base.clone();
            f(&mut m);
            m
        };
        let max_price = ahp_store::model_call::MAX_PRICE_MICRO_USD_PER_MTOK;
        let at_limit = [
            edit(&|m| m.id = "m".repeat(64)),
            edit(&|m| m.context_tokens = MAX_CONTEXT_TOKENS),
            edit(&|m| {
                m.context_tokens = MAX_CONTEXT_TOKENS;
                m.max_output_tokens = MAX_MODEL_OUTPUT_TOKENS;
            }),
            edit(&|m| m.max_output_tokens = 16),
            edit(&|m| {
                m.context_tokens = 4096;
                m.max_output_tokens = 4096;
            }),
            edit(&|m| m.price_micro_usd_per_m_tok.output = max_price),
            edit(&|m| m.provider_model = "x".repeat(MAX_PROVIDER_MODEL_BYTES)),
            edit(&|m| m.endpoint = "http://127.0.0.1:11434/v1".into()),
            edit(&|m| m.credential = None),
        ];
        for m in at_limit {
            ok(m.clone()).unwrap_or_else(|e| panic!("{m:?}: {e}"));
        }
        let past = [
            edit(&|m| m.id = "m".repeat(65)),
            edit(&|m| m.id = String::new()),
            edit(&|m| m.id = "a b".into()),
            edit(&|m| m.context_tokens = MAX_CONTEXT_TOKENS + 1),
            edit(&|m| m.context_tokens = 0),
            edit(&|m| {
                m.context_tokens = MAX_CONTEXT_TOKENS;
                m.max_output_tokens = MAX_MODEL_OUTPUT_TOKENS + 1;
            }),
            edit(&|m| m.max_output_tokens = 15),
            edit(&|m| {
                m.context_tokens = 4096;
                m.max_output_tokens = 4097;
            }),
            edit(&|m| m.price_micro_usd_per_m_tok.output = max_price + 1),
            edit(&|m| m.price_micro_usd_per_m_tok.cache_write = max_price + 1),
            edit(&|m| m.provider_model = "x".repeat(MAX_PROVIDER_MODEL_BYTES + 1)),
            edit(&|m| m.provider_model = "has space".into()),
            edit(&|m| m.endpoint = "ftp://api.openai.com/v1".into()),
            edit(&|m| m.endpoint = "https://api.openai.com/v1?key=1".into()),
            edit(&|m| m.endpoint = format!("https://api.openai.com/{}", "v".repeat(MAX_ENDPOINT_BYTES))),
            edit(&|m| {
                m.credential = Some(ModelCredential {
                    cred_ref: "../x".into(),
                })
            }),
        ];
        for m in past {
            assert!(matches!(ok(m.clone()), Err(Error::Invalid(_))), "{m:?}");
        }
        let twice = Policy {
            models: vec![base.clone(), model("default", "https://other.example.com")],
            ..Policy::default()
        };
        assert!(twice.validate().unwrap_err().to_string().contains("listed twice"));
        let many = Policy {
            models: (0..=MAX_MODELS)
                .map(|i| model(&format!("m{i}"), "https://a.example.com"))
                .collect(),
            ..Policy::default()
        };
        assert!(many.validate().is_err());
        let shared = Policy {
            servers: vec![rule("https://api.openai.com", None)],
            models: vec![base],
            allow_networks: vec![],
        };
        assert!(
            shared
                .validate()
                .unwrap_err()
                .to_string()
                .contains("never reach a model endpoint")
        );
    }

    #[test]
    fn a_model_endpoints_origin_is_never_granted_to_a_guest() {
        // Built in code (never validated): the grants still leave the model's origin out.
        let policy = Policy {
            servers: vec![
                rule("http://127.0.0.1:9000", None),
                rule("https://inventory.example.com", None),
            ],
            models: vec![model("default", "http://127.0.0.1:9000/v1")],
            allow_networks: vec![],
        };
        let g = policy.grants(&[
            mcp("http://127.0.0.1:9000/v1/chat/completions", "r"),
            mcp("https://inventory.example.com/mcp", "r"),
        ]);
        let model_origin = Origin::parse("http://127.0.0.1:9000").unwrap();
        assert!(g.is_model_origin(&model_origin));
        assert!(g.server(&model_origin).is_none());
        assert_eq!(g.servers.len(), 1);
        assert!(
            g.server(&Origin::parse("https://inventory.example.com").unwrap())
                .is_some()
        );
    }
}
