//! The resource server against a local issuer that speaks the real protocol (metadata, JWKS
//! over HTTP, ES256/ES384 tokens signed with `jsonwebtoken`): every token the specification
//! says to refuse is refused, with the status and header it says, and no refusal costs a fetch
//! from an address the token chose.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ahp_store::{ApiScope, Store};
use axum::body::Body;
use axum::http::{StatusCode, header};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, ECDSA_P384_SHA384_FIXED_SIGNING, EcdsaKeyPair, EcdsaSigningAlgorithm, KeyPair,
};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::{Refusal, ResourceServer};
use crate::shared_store::{SharedStore, StoreLock};

const PUBLIC: &str = "http://127.0.0.1:7070";
const TRANSFERS: &str = "http://127.0.0.1:7070/mcp";
const CONVERSATIONS: &str = "http://127.0.0.1:7070/mcp/conversations";

/// A signing key and its public JWK.
struct Key {
    kid: &'static str,
    alg: Algorithm,
    pkcs8: Vec<u8>,
    jwk: Value,
}

fn key(kid: &'static str, alg: Algorithm) -> Key {
    let (curve, signing): (&str, &'static EcdsaSigningAlgorithm) = match alg {
        Algorithm::ES256 => ("P-256", &ECDSA_P256_SHA256_FIXED_SIGNING),
        Algorithm::ES384 => ("P-384", &ECDSA_P384_SHA384_FIXED_SIGNING),
        other => panic!("no test key for {other:?}"),
    };
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(signing, &rng).unwrap().as_ref().to_vec();
    let pair = EcdsaKeyPair::from_pkcs8(signing, &pkcs8, &rng).unwrap();
    let point = &pair.public_key().as_ref()[1..];
    let (x, y) = point.split_at(point.len() / 2);
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let jwk = json!({"kty": "EC", "crv": curve, "x": b64(x), "y": b64(y), "kid": kid, "use": "sig", "alg": format!("{alg:?}")});
    Key { kid, alg, pkcs8, jwk }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// A token signed by `key`, its header naming `kid`.
fn sign_as(key: &Key, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(key.alg);
    header.kid = Some(kid.to_owned());
    header.typ = Some("at+jwt".into());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_der(&key.pkcs8)).unwrap()
}

fn sign(key: &Key, claims: &Value) -> String {
    sign_as(key, key.kid, claims)
}

/// An issuer on loopback: its metadata and its JWKS (which a test may change), counting fetches.
struct Issuer {
    url: String,
    jwks: Arc<Mutex<Value>>,
    fetches: Arc<AtomicUsize>,
}

impl Issuer {
    async fn start(keys: &[&Key]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let jwks = Arc::new(Mutex::new(
            json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()}),
        ));
        let fetches = Arc::new(AtomicUsize::new(0));
        let metadata = json!({"issuer": url, "jwks_uri": format!("{url}/jwks")}).to_string();
        let (served, counted) = (jwks.clone(), fetches.clone());
        let app = axum::Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                axum::routing::get(move || async move { metadata }),
            )
            .route(
                "/jwks",
                axum::routing::get(move || async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    served.lock().unwrap().to_string()
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, jwks, fetches }
    }

    fn publish(&self, keys: &[&Key]) {
        *self.jwks.lock().unwrap() = json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()});
    }

    fn claims(&self, aud: &str, scope: &str) -> Value {
        json!({"iss": self.url, "sub": "alice", "aud": aud, "exp": now() + 300, "iat": now(), "scope": scope})
    }
}

fn store_with(issuer: &str, algorithms: &[&str]) -> SharedStore {
    let mut store = Store::open_in_memory().unwrap();
    let algorithms: Vec<String> = algorithms.iter().map(|a| (*a).to_owned()).collect();
    store
        .add_token_issuer(issuer, None, &algorithms, &ApiScope::ALL)
        .unwrap();
    crate::shared_store::share(store)
}

fn server(store: &SharedStore) -> ResourceServer {
    ResourceServer::new(&url::Url::parse(PUBLIC).unwrap(), store.clone()).unwrap()
}

fn invalid(r: Result<ahp_store::Principal, Refusal>) -> String {
    match r {
        Err(Refusal::Invalid(why)) => why,
        other => panic!("expected an invalid_token refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_valid_token_acts_as_its_subjects_principal_with_the_scopes_it_grants() {
    let k1 = key("k1", Algorithm::ES256);
    let issuer = Issuer::start(&[&k1]).await;
    let store = store_with(&issuer.url, &["ES256"]);
    let rs = server(&store);
    let token = sign(
        &k1,
        &issuer.claims(TRANSFERS, "openid transfer:read communication:read"),
    );
    let alice = rs.authenticate(&token, "/mcp").await.unwrap();
    assert_eq!(alice.scopes, [ApiScope::TransferRead, ApiScope::CommunicationRead]);
    assert!(alice.name.starts_with("oauth-"), "{}", alice.name);
    // The same subject is the same principal on every token; another subject is another one.
    let mut claims = issuer.claims(CONVERSATIONS, "communication:manage");
    assert_eq!(
        rs.authenticate(&sign(&k1, &claims), "/mcp/conversations")
            .await
            .unwrap()
            .id,
        alice.id
    );
    claims["sub"] = json!("bob");
    // An audience list naming this surface among others is this surface's.
    claims["aud"] = json!(["https://elsewhere.example", CONVERSATIONS]);
    let bob = rs
        .authenticate(&sign(&k1, &claims), "/mcp/conversations")
        .await
        .unwrap();
    assert_ne!(bob.id, alice.id);
    assert_eq!(bob.scopes, [ApiScope::CommunicationManage]);
    // One fetch of the keys served all three.
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn every_token_the_specification_refuses_is_refused() {
    let k1 = key("k1", Algorithm::ES256);
    let k384 = key("k384", Algorithm::ES384);
    let unpublished = key("k1", Algorithm::ES256);
    let issuer = Issuer::start(&[&k1, &k384]).await;
    let store = store_with(&issuer.url, &["ES256"]);
    let rs = server(&store);
    let good = issuer.claims(TRANSFERS, "transfer:read");
    let with = |field: &str, value: Value| {
        let mut c = good.clone();
        c[field] = value;
        c
    };
    let without = |field: &str| {
        let mut c = good.clone();
        c.as_object_mut().unwrap().remove(field);
        c
    };
    let hs256 = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &good,
        &EncodingKey::from_secret(b"a secret the host never had"),
    )
    .unwrap();
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let alg_none = format!("{}.{}.", b64(&json!({"alg": "none"})), b64(&good));
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "wrong audience",
            sign(&k1, &with("aud", json!("http://127.0.0.1:7071/mcp"))),
            "InvalidAudience",
        ),
        (
            "the other surface's audience",
            sign(&k1, &with("aud", json!(CONVERSATIONS))),
            "InvalidAudience",
        ),
        ("no audience", sign(&k1, &without("aud")), "aud"),
        (
            "unknown issuer",
            sign(&k1, &with("iss", json!("http://127.0.0.1:1/other"))),
            "unknown issuer",
        ),
        (
            "expired",
            sign(&k1, &with("exp", json!(now() - 31))),
            "ExpiredSignature",
        ),
        ("no expiry", sign(&k1, &without("exp")), "exp"),
        (
            "not yet valid",
            sign(&k1, &with("nbf", json!(now() + 31))),
            "ImmatureSignature",
        ),
        ("disallowed algorithm", sign(&k384, &good), "not allowed"),
        ("a shared-secret algorithm", hs256, "not allowed"),
        ("no signature at all", alg_none, "not a JWT"),
        ("bad signature", sign(&unpublished, &good), "InvalidSignature"),
        ("no subject", sign(&k1, &without("sub")), "sub"),
        (
            "an over-long subject",
            sign(&k1, &with("sub", json!("s".repeat(256)))),
            "subject",
        ),
    ];
    for (case, token, why) in cases {
        let refused = invalid(rs.authenticate(&token, "/mcp").await);
        assert!(refused.contains(why), "{case}: {refused}");
    }
    // At the limits: within the leeway both ways, and the longest subject, are accepted.
    for claims in [
        with("exp", json!(now() - 25)),
        with("nbf", json!(now() + 25)),
        with("sub", json!("s".repeat(255))),
    ] {
        rs.authenticate(&sign(&k1, &claims), "/mcp").await.unwrap();
    }
    // Nothing was fetched for the unknown issuer; its keys were fetched once and again only for
    // the unknown key (rate-limited after that).
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
    // No principal for anyone refused: alice and the longest subject only.
    assert_eq!(store.locked().list_principals().unwrap().len(), 2);
}

#[tokio::test]
async fn a_revoked_principal_or_a_removed_issuer_refuses_valid_tokens() {
    let k1 = key("k1", Algorithm::ES256);
    let issuer = Issuer::start(&[&k1]).await;
    let store = store_with(&issuer.url, &["ES256"]);
    let rs = server(&store);
    let token = sign(&k1, &issuer.claims(TRANSFERS, "transfer:read"));
    let alice = rs.authenticate(&token, "/mcp").await.unwrap();
    store.locked().revoke_principal(&alice.name).unwrap();
    assert!(invalid(rs.authenticate(&token, "/mcp").await).contains("revoked"));
    let mut claims = issuer.claims(TRANSFERS, "transfer:read");
    claims["sub"] = json!("bob");
    let bob = sign(&k1, &claims);
    rs.authenticate(&bob, "/mcp").await.unwrap();
    store.locked().remove_token_issuer(&issuer.url).unwrap();
    assert!(invalid(rs.authenticate(&bob, "/mcp").await).contains("unknown issuer"));
}

#[tokio::test]
async fn rotated_keys_are_fetched_again_at_most_once_per_interval() {
    let k1 = key("k1", Algorithm::ES256);
    let k2 = key("k2", Algorithm::ES256);
    let issuer = Issuer::start(&[&k1]).await;
    let store = store_with(&issuer.url, &["ES256"]);
    let interval = Duration::from_millis(300);
    let rs = server(&store).refetching_every(interval);
    rs.authenticate(&sign(&k1, &issuer.claims(TRANSFERS, "transfer:read")), "/mcp")
        .await
        .unwrap();
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
    // The issuer rotates to k2. Tokens naming it, and a flood naming keys nobody has, fetch
    // the set at most once per interval.
    issuer.publish(&[&k1, &k2]);
    let rotated = sign(&k2, &issuer.claims(TRANSFERS, "transfer:read"));
    for n in 0..20 {
        let bogus = sign_as(&k2, &format!("bogus-{n}"), &issuer.claims(TRANSFERS, "transfer:read"));
        invalid(rs.authenticate(&bogus, "/mcp").await);
    }
    invalid(rs.authenticate(&rotated, "/mcp").await);
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1, "within the interval");
    tokio::time::sleep(interval).await;
    rs.authenticate(&rotated, "/mcp").await.unwrap();
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);
    // The old key is still good while the issuer publishes it.
    rs.authenticate(&sign(&k1, &issuer.claims(TRANSFERS, "transfer:read")), "/mcp")
        .await
        .unwrap();
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_issuer_whose_keys_cannot_be_had_leaves_the_token_undecided() {
    let k1 = key("k1", Algorithm::ES256);
    // Keys nobody serves.
    let mut s = Store::open_in_memory().unwrap();
    s.add_token_issuer(
        "http://127.0.0.1:9",
        Some("http://127.0.0.1:9/jwks"),
        &["ES256".into()],
        &ApiScope::ALL,
    )
    .unwrap();
    let store = crate::shared_store::share(s);
    let claims = json!({"iss": "http://127.0.0.1:9", "sub": "a", "aud": TRANSFERS, "exp": now() + 300});
    let r = server(&store).authenticate(&sign(&k1, &claims), "/mcp").await;
    assert!(matches!(r, Err(Refusal::Unavailable(_))), "{r:?}");
    // A key set past the byte bound is not read.
    let issuer = Issuer::start(&[&k1]).await;
    let padding = "x".repeat(super::keys::MAX_KEYS_RESPONSE_BYTES);
    *issuer.jwks.lock().unwrap() = json!({"keys": [k1.jwk.clone()], "padding": padding});
    let store = store_with(&issuer.url, &["ES256"]);
    let r = server(&store)
        .authenticate(&sign(&k1, &issuer.claims(TRANSFERS, "transfer:read")), "/mcp")
        .await;
    assert!(
        matches!(&r, Err(Refusal::Unavailable(why)) if why.contains("larger")),
        "{r:?}"
    );
}

/// One request through the gates, with `token` as the bearer (if any).
async fn http(app: &axum::Router, path: &str, token: Option<&str>, tool: &str) -> (StatusCode, String, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool}});
    let mut request = axum::http::Request::post(path);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let answer = app
        .clone()
        .oneshot(request.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let challenge = answer
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let status = answer.status();
    let body = axum::body::to_bytes(answer.into_body(), 4096).await.unwrap();
    (status, challenge, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn the_gates_answer_with_the_specified_status_and_challenge() {
    let k1 = key("k1", Algorithm::ES256);
    let issuer = Issuer::start(&[&k1]).await;
    let store = store_with(&issuer.url, &["ES256"]);
    let app = crate::mcp::http::stub_router(store.clone(), Arc::new(server(&store)));
    let metadata = format!("{PUBLIC}/.well-known/oauth-protected-resource");

    // No credential: 401 naming where the metadata is and the surface's scopes.
    let (status, challenge, _) = http(&app, "/mcp", None, "get_status").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        challenge,
        format!(
            r#"Bearer realm="ahp", resource_metadata="{metadata}/mcp", scope="transfer:read transfer:write transfer:meter""#
        )
    );
    let (_, challenge, _) = http(&app, "/mcp/conversations", None, "list_conversations").await;
    assert!(
        challenge.contains(&format!(r#"resource_metadata="{metadata}/mcp/conversations""#))
            && challenge.contains(r#"scope="communication:read communication:manage""#),
        "{challenge}"
    );
    // A refused token: 401 invalid_token.
    let expired = sign(&k1, &{
        let mut c = issuer.claims(TRANSFERS, "transfer:read");
        c["exp"] = json!(now() - 3600);
        c
    });
    let (status, challenge, _) = http(&app, "/mcp", Some(&expired), "get_status").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        challenge.contains(r#"error="invalid_token""#) && challenge.contains("resource_metadata="),
        "{challenge}"
    );
    // A token without the call's scope: 403 insufficient_scope naming it.
    let reader = sign(&k1, &issuer.claims(TRANSFERS, "transfer:read"));
    assert_eq!(http(&app, "/mcp", Some(&reader), "get_status").await.0, StatusCode::OK);
    let (status, challenge, _) = http(&app, "/mcp", Some(&reader), "push_state").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        challenge.contains(r#"error="insufficient_scope""#) && challenge.contains(r#"scope="transfer:write""#),
        "{challenge}"
    );
    // A token with no ahp scope at all: 403 naming the surface's.
    let nothing = sign(&k1, &issuer.claims(TRANSFERS, "openid"));
    let (status, challenge, _) = http(&app, "/mcp", Some(&nothing), "tools/list").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{challenge}");
    // A token reaches only the surface it was issued for.
    assert_eq!(
        http(&app, "/mcp/conversations", Some(&reader), "list_conversations")
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );

    // The metadata of each surface, to anyone.
    for (path, resource, scopes) in [
        (
            "/mcp",
            TRANSFERS,
            json!(["transfer:read", "transfer:write", "transfer:meter"]),
        ),
        (
            "/mcp/conversations",
            CONVERSATIONS,
            json!(["communication:read", "communication:manage"]),
        ),
    ] {
        let answer = app
            .clone()
            .oneshot(
                axum::http::Request::get(format!("/.well-known/oauth-protected-resource{path}"))
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        let doc: Value =
            serde_json::from_slice(&axum::body::to_bytes(answer.into_body(), 4096).await.unwrap()).unwrap();
        assert_eq!(doc["resource"], resource);
        assert_eq!(doc["authorization_servers"], json!([issuer.url]));
        assert_eq!(doc["scopes_supported"], scopes);
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    }
}
