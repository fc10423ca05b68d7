//! `ahp policy show|allow-server|remove-server|allow-network|remove-network|model …`: the
//! operator's credential, egress and model policy (`<data-dir>/policy.json`, format in
//! `ahp_host::policy`).
//!
//! Every change is validated as a whole before the file is replaced (atomically); a refused
//! change leaves the file as it was. `ahp serve` reads the policy when it starts.

use ahp_host::policy::{
    CredentialRule, Injection, ModelCredential, ModelPriceRule, ModelRule, Origin, POLICY_FILE, Policy, Provider,
    ServerRule,
};
use anyhow::bail;
use clap::Subcommand;

use super::{DataDir, table};

#[derive(Debug, Subcommand)]
pub(crate) enum PolicyCommand {
    /// Show the servers guests may reach, their credential bindings and the extra networks.
    Show {
        /// Print the policy file's JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Let guests reach a server (an http/https origin), optionally with a credential the host
    /// injects into its requests. Replaces the server's entry if it has one.
    AllowServer {
        /// The server's origin, e.g. `https://inventory.example.com` (a path is ignored).
        server: String,
        /// The vault reference bound to this server.
        #[arg(long)]
        credential: Option<String>,
        /// The header the host sets to the credential.
        #[arg(long, default_value = "authorization", requires = "credential")]
        header: String,
        /// What precedes the secret in the header.
        #[arg(long, default_value = "Bearer ", requires = "credential")]
        prefix: String,
        /// Also hand the value to the guest through `credentials.resolve`.
        #[arg(long, requires = "credential")]
        reveal: bool,
        /// What each MCP tool call to this server costs the transfer, in micro-USD.
        #[arg(long, default_value_t = 0)]
        tool_call_micro_usd: u64,
    },
    /// Stop guests from reaching a server.
    RemoveServer {
        /// The server's origin, as listed by `ahp policy show`.
        server: String,
    },
    /// Make a network reachable although the defaults refuse it (loopback, private, …).
    AllowNetwork {
        /// A CIDR block, e.g. 10.1.0.0/16.
        cidr: String,
    },
    /// Remove a network added with `allow-network`.
    RemoveNetwork {
        /// The CIDR block, as listed by `ahp policy show`.
        cidr: String,
    },
    /// The models the host's gateway offers guests.
    #[command(subcommand)]
    Model(ModelCommand),
}

#[derive(Debug, Subcommand)]
pub(crate) enum ModelCommand {
    /// List the models, in the order guests see them.
    List,
    /// Offer a model (replaces the entry of the same id, keeping its place).
    Add(ModelArgs),
    /// Stop offering a model.
    Remove {
        /// Its id, as listed by `ahp policy model list`.
        id: String,
    },
}

#[derive(Debug, clap::Args)]
pub(crate) struct ModelArgs {
    /// The id guests ask for, e.g. `default`.
    id: String,
    /// The protocol of the endpoint: `openai` (Chat Completions) or `anthropic` (Messages).
    #[arg(long)]
    provider: Provider,
    /// The provider's base URL, e.g. `https://api.openai.com/v1` (its origin is then refused to
    /// guests' own HTTP).
    #[arg(long)]
    endpoint: String,
    /// The provider's name of the model, e.g. `gpt-4.1-mini`.
    #[arg(long)]
    provider_model: String,
    /// The vault reference of the API key (none for an endpoint without auth).
    #[arg(long)]
    credential: Option<String>,
    /// The most tokens the model reads in one call, input and output together.
    #[arg(long)]
    context_tokens: u32,
    /// The most tokens one call may produce.
    #[arg(long)]
    max_output_tokens: u32,
    /// Micro-USD per million input tokens.
    #[arg(long)]
    input_price: u64,
    /// Micro-USD per million output tokens.
    #[arg(long)]
    output_price: u64,
    /// Micro-USD per million input tokens read from the prompt cache (default: the input price).
    #[arg(long)]
    cache_read_price: Option<u64>,
    /// Micro-USD per million input tokens written to the prompt cache (default: the input price).
    #[arg(long)]
    cache_write_price: Option<u64>,
}

impl From<ModelArgs> for ModelRule {
    fn from(a: ModelArgs) -> Self {
        Self {
            id: a.id,
            provider: a.provider,
            endpoint: a.endpoint,
            provider_model: a.provider_model,
            credential: a.credential.map(|cred_ref| ModelCredential { cred_ref }),
            context_tokens: a.context_tokens,
            max_output_tokens: a.max_output_tokens,
            price_micro_usd_per_m_tok: ModelPriceRule {
                input: a.input_price,
                output: a.output_price,
                cache_read: a.cache_read_price.unwrap_or(a.input_price),
                cache_write: a.cache_write_price.unwrap_or(a.input_price),
            },
        }
    }
}

pub(crate) fn run(dir: &DataDir, command: PolicyCommand) -> anyhow::Result<()> {
    let mut policy = dir.policy()?;
    match command {
        PolicyCommand::Show { json } => {
            if json {
                println!("{}", serde_json::to_string_pretty(&policy)?);
            } else {
                print!("{}", render(&policy));
            }
            return Ok(());
        }
        PolicyCommand::AllowServer {
            server,
            credential,
            header,
            prefix,
            reveal,
            tool_call_micro_usd,
        } => {
            let origin = Origin::parse(&server).map_err(anyhow::Error::msg)?;
            let rule = ServerRule {
                server: origin.to_string(),
                credential: credential.map(|cred_ref| CredentialRule {
                    cred_ref,
                    inject: Injection { header, prefix },
                    reveal,
                }),
                tool_call_micro_usd,
            };
            policy
                .servers
                .retain(|s| Origin::parse(&s.server).ok() != Some(origin.clone()));
            policy.servers.push(rule);
        }
        PolicyCommand::RemoveServer { server } => {
            let origin = Origin::parse(&server).map_err(anyhow::Error::msg)?;
            let before = policy.servers.len();
            policy
                .servers
                .retain(|s| Origin::parse(&s.server).ok() != Some(origin.clone()));
            if policy.servers.len() == before {
                bail!("{origin} is not in the policy");
            }
        }
        PolicyCommand::AllowNetwork { cidr } => {
            let net: ipnet::IpNet = cidr
                .parse()
                .map_err(|_| anyhow::anyhow!("{cidr:?} is not a CIDR block (e.g. 10.1.0.0/16)"))?;
            if !policy
                .allow_networks
                .iter()
                .any(|n| n.parse::<ipnet::IpNet>().ok() == Some(net))
            {
                policy.allow_networks.push(net.to_string());
            }
        }
        PolicyCommand::Model(ModelCommand::List) => {
            print!("{}", render_models(&policy));
            return Ok(());
        }
        PolicyCommand::Model(ModelCommand::Add(args)) => {
            let rule = ModelRule::from(args);
            match policy.models.iter_mut().find(|m| m.id == rule.id) {
                Some(m) => *m = rule,
                None => policy.models.push(rule),
            }
        }
        PolicyCommand::Model(ModelCommand::Remove { id }) => {
            let before = policy.models.len();
            policy.models.retain(|m| m.id != id);
            if policy.models.len() == before {
                bail!("no model {id:?} in the policy");
            }
        }
        PolicyCommand::RemoveNetwork { cidr } => {
            let net = cidr.parse::<ipnet::IpNet>().ok();
            let before = policy.allow_networks.len();
            policy
                .allow_networks
                .retain(|n| *n != cidr && (net.is_none() || n.parse::<ipnet::IpNet>().ok() != net));
            if policy.allow_networks.len() == before {
                bail!("{cidr} is not in the policy");
            }
        }
    }
    policy.save(dir.path())?;
    println!(
        "{} updated; `ahp serve` applies it when it starts",
        dir.path().join(POLICY_FILE).display()
    );
    print!("{}", render(&policy));
    Ok(())
}

/// The policy as two tables (never a secret: the policy holds only references).
fn render(policy: &Policy) -> String {
    let rows: Vec<Vec<String>> = policy
        .servers
        .iter()
        .map(|s| match &s.credential {
            Some(c) => vec![
                s.server.clone(),
                c.cred_ref.clone(),
                format!("{}: {}…", c.inject.header, c.inject.prefix),
                if c.reveal { "yes" } else { "no" }.into(),
            ],
            None => vec![s.server.clone(), "-".into(), "-".into(), "-".into()],
        })
        .collect();
    let mut out = table::render(&["server", "credential", "injected as", "revealed"], &rows);
    let networks = if policy.allow_networks.is_empty() {
        "none".to_owned()
    } else {
        policy.allow_networks.join(", ")
    };
    out.push_str(&format!(
        "\nextra networks: {networks}\n(loopback, private, link-local, shared, unspecified, multicast and reserved addresses are refused unless listed)\n"
    ));
    out.push('\n');
    out.push_str(&render_models(policy));
    out
}

/// The models as a table: prices in micro-USD per million tokens (never a secret).
fn render_models(policy: &Policy) -> String {
    if policy.models.is_empty() {
        return "models: none (guests' model calls fail as unknown-model)\n".into();
    }
    let rows: Vec<Vec<String>> = policy
        .models
        .iter()
        .map(|m| {
            let p = &m.price_micro_usd_per_m_tok;
            vec![
                m.id.clone(),
                m.provider.as_str().into(),
                m.endpoint.clone(),
                m.provider_model.clone(),
                m.credential.as_ref().map_or("-".into(), |c| c.cred_ref.clone()),
                format!("{}/{}", m.context_tokens, m.max_output_tokens),
                format!("{}/{}/{}/{}", p.input, p.output, p.cache_read, p.cache_write),
            ]
        })
        .collect();
    table::render(
        &[
            "model",
            "provider",
            "endpoint",
            "provider model",
            "credential",
            "context/output",
            "µUSD/MTok in/out/cache-read/cache-write",
        ],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(dir: &DataDir, server: &str, credential: Option<&str>, reveal: bool) -> anyhow::Result<()> {
        run(
            dir,
            PolicyCommand::AllowServer {
                server: server.into(),
                credential: credential.map(Into::into),
                header: "authorization".into(),
                prefix: "Bearer ".into(),
                reveal,
                tool_call_micro_usd: 0,
            },
        )
    }

    #[test]
    fn commands_edit_the_file_and_a_refused_one_changes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::at(tmp.path().to_path_buf()).unwrap();
        let file = tmp.path().join(POLICY_FILE);
        allow(&dir, "https://inventory.example.com/mcp", Some("inventory-api"), false).unwrap();
        allow(&dir, "http://10.1.2.3:8080", None, false).unwrap();
        run(
            &dir,
            PolicyCommand::AllowNetwork {
                cidr: "10.1.0.0/16".into(),
            },
        )
        .unwrap();
        // The same origin again replaces its entry.
        allow(&dir, "https://INVENTORY.example.com:443", Some("inventory-api"), true).unwrap();
        let p = dir.policy().unwrap();
        assert_eq!(p.servers.len(), 2);
        assert_eq!(p.servers[1].server, "https://inventory.example.com:443");
        assert!(p.servers[1].credential.as_ref().unwrap().reveal);
        assert_eq!(p.allow_networks, ["10.1.0.0/16"]);

        let before = std::fs::read(&file).unwrap();
        for refused in [
            allow(&dir, "ftp://x.example", None, false),
            allow(&dir, "https://x.example", Some("../token-key"), false),
            run(
                &dir,
                PolicyCommand::AllowNetwork {
                    cidr: "10.0.0.0/40".into(),
                },
            ),
            run(
                &dir,
                PolicyCommand::RemoveServer {
                    server: "https://absent.example".into(),
                },
            ),
            run(
                &dir,
                PolicyCommand::RemoveNetwork {
                    cidr: "192.168.0.0/16".into(),
                },
            ),
        ] {
            assert!(refused.is_err());
            assert_eq!(
                std::fs::read(&file).unwrap(),
                before,
                "a refused command changed the file"
            );
        }
        run(
            &dir,
            PolicyCommand::RemoveServer {
                server: "http://10.1.2.3:8080/".into(),
            },
        )
        .unwrap();
        run(
            &dir,
            PolicyCommand::RemoveNetwork {
                cidr: "10.1.0.0/16".into(),
            },
        )
        .unwrap();
        let p = dir.policy().unwrap();
        assert_eq!(p.servers.len(), 1);
        assert!(p.allow_networks.is_empty());
        assert!(render(&p).contains("inventory-api"));
    }

    fn add(dir: &DataDir, id: &str, endpoint: &str, max_output: u32) -> anyhow::Result<()> {
        run(
            dir,
            PolicyCommand::Model(ModelCommand::Add(ModelArgs {
                id: id.into(),
                provider: Provider::Anthropic,
                endpoint: endpoint.into(),
                provider_model: "claude-sonnet-4-5".into(),
                credential: Some("anthropic-key".into()),
                context_tokens: 200_000,
                max_output_tokens: max_output,
                input_price: 3_000_000,
                output_price: 15_000_000,
                cache_read_price: Some(300_000),
                cache_write_price: None,
            })),
        )
    }

    #[test]
    fn model_commands_edit_the_file_and_a_refused_one_changes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::at(tmp.path().to_path_buf()).unwrap();
        let file = tmp.path().join(POLICY_FILE);
        add(&dir, "default", "https://api.anthropic.com/v1", 8192).unwrap();
        add(&dir, "local", "http://127.0.0.1:11434/v1", 1024).unwrap();
        add(&dir, "default", "https://api.anthropic.com/v1", 4096).unwrap();
        let p = dir.policy().unwrap();
        assert_eq!(
            p.models.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
            ["default", "local"]
        );
        assert_eq!(p.models[0].max_output_tokens, 4096, "replaced in place");
        assert_eq!(
            p.models[0].price_micro_usd_per_m_tok.cache_write, 3_000_000,
            "defaults to the input price"
        );
        assert!(render_models(&p).contains("claude-sonnet-4-5"));
        allow(&dir, "https://inventory.example.com", None, false).unwrap();
        let before = std::fs::read(&file).unwrap();
        for refused in [
            add(&dir, "bad id", "https://x.example", 16),
            add(&dir, "small", "https://x.example", 15),
            add(&dir, "ftp", "ftp://x.example", 16),
            add(&dir, "shared", "https://inventory.example.com/v1", 16),
            allow(&dir, "http://127.0.0.1:11434", None, false),
            run(&dir, PolicyCommand::Model(ModelCommand::Remove { id: "absent".into() })),
        ] {
            assert!(refused.is_err());
            assert_eq!(
                std::fs::read(&file).unwrap(),
                before,
                "a refused command changed the file"
            );
        }
        run(&dir, PolicyCommand::Model(ModelCommand::Remove { id: "local".into() })).unwrap();
        assert_eq!(dir.policy().unwrap().models.len(), 1);
    }
}
