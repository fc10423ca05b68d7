//! The policy's rules, bounds and narrowing.

use std::net::IpAddr;

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
