//! The models of the policy: which provider each speaks, its endpoint, credential, bounds and
//! prices, and the checks each rule must pass.

use serde::{Deserialize, Serialize};

use ahp_store::snapshot::validate_cred_ref;

use super::{Error, Origin};

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
    pub(super) fn validate(&self, at: &str) -> Result<(), Error> {
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
