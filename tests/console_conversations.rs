//! The console's agents and conversations pages on a real `ahp serve --http`: what each key's
//! scopes show and allow, refusals that change nothing, existence hiding and bounds over plain
//! HTTP; and a person talking to an agent in headless Chromium while the agent answers from
//! outside the browser.

use std::path::Path;
use std::time::Duration;

use ahp_host::carrier::{Carriers, NoCarriers};
use ahp_host::console::agents::{AgentCardView, agents_page};
use ahp_host::mcp::identity::api_key_caller;
use ahp_store::Store;
use ahp_store::conversation::bounds::MAX_MESSAGE_BODY_BYTES;
use ahp_store::conversation::{
    Acting, Agent, AgentActor, AgentCard, Caller, Endpoint, IdempotencyKey, NewConversation, NewMessage, Scope,
};
use reqwest::StatusCode;

use crate::browser::Browser;
use crate::console::{FORM, base, client, form, get, screenshots, sign_in};
use crate::mcp_http::{principal, serve};

fn store(dir: &Path) -> Store {
    Store::open(dir.join("ahp.db")).unwrap()
}

/// The communication caller `key` maps to: what the console and the MCP conversation tools act as.
fn talker(dir: &Path, key: &str) -> Caller {
    api_key_caller(&store(dir).authenticate(key).unwrap().unwrap())
}

/// The same principal with both scopes, to seed what a narrower key of it can then see.
fn owner(c: &Caller) -> Caller {
    Caller::new(c.principal().clone(), &[Scope::Read, Scope::Manage])
}

/// An agent of `caller` with an attached endpoint.
fn agent(dir: &Path, caller: &Caller, handle: &str, description: &str) -> (Agent, Endpoint) {
    let mut s = store(dir);
    let card = AgentCard {
        handle: handle.into(),
        display_name: format!("The {handle}"),
        description: description.into(),
        specialties: vec!["inventory".into(), "forecasting".into()],
    };
    let agent = s
        .create_agent(caller, &card, &format!("create-{handle}"))
        .unwrap()
        .value;
    let ep = s
        .attach_endpoint(caller, &agent.id, Duration::from_secs(600), &format!("attach-{handle}"))
        .unwrap()
        .value;
    (agent, ep)
}

/// Posts `body` as the agent through its endpoint, as an agent's own process would.
fn reply(dir: &Path, caller: &Caller, ep: &Endpoint, conversation: &str, body: &str, to: Option<&str>) -> String {
    let new = NewMessage {
        conversation: conversation.into(),
        acting: Acting::Agent(AgentActor::of(ep)),
        body: body.into(),
        reply_to: to.map(str::to_owned),
        idempotency: IdempotencyKey::Key(format!("reply-{}", body.len())),
    };
    store(dir).post_message(caller, &new).unwrap().value.id
}

/// The whole database, serialized: equal before and after means the requests changed nothing.
fn bytes(dir: &Path) -> Vec<u8> {
    store(dir).connection().serialize(rusqlite::MAIN_DB).unwrap().to_vec()
}

fn message_count(dir: &Path, caller: &Caller, conversation: &str) -> usize {
    store(dir)
        .read_transcript(caller, &Acting::Human, conversation, 0, 200)
        .unwrap()
        .len()
}

/// The value of the first hidden form field `name` on `page`.
fn field(page: &str, name: &str) -> String {
    page.split(&format!(r#"name="{name}" value=""#))
        .nth(1)
        .unwrap_or_else(|| panic!("no {name} field in {page}"))
        .split('"')
        .next()
        .unwrap()
        .to_owned()
}

/// A form POST with the session `cookie` from `origin`.
async fn post(url: &str, origin: &str, cookie: Option<&str>, fields: &[(&str, &str)]) -> reqwest::Response {
    let mut req = client()
        .post(url)
        .header("Origin", origin)
        .header("Content-Type", FORM)
        .body(form(fields));
    if let Some(c) = cookie {
        req = req.header("Cookie", c);
    }
    req.send().await.unwrap()
}

/// A process holding exactly one carrier.
struct Holding(String, u64);

impl Carriers for Holding {
    fn holds(&self, endpoint: &ahp_store::conversation::Endpoint) -> bool {
        self.0 == endpoint.id && self.1 == endpoint.generation
    }
}

#[test]
fn an_agent_is_ready_only_while_this_host_holds_its_current_endpoint_s_carrier() {
    let dir = tempfile::tempdir().unwrap();
    let caller = Caller::full("account:alice").unwrap();
    let mut s = Store::open(dir.path().join("ahp.db")).unwrap();
    let card = AgentCard {
        handle: "forecaster".into(),
        display_name: "Forecaster".into(),
        description: String::new(),
        specialties: vec![],
    };
    let agent = s.create_agent(&caller, &card, "a").unwrap().value;
    let listing = |s: &mut Store| s.list_agent_listings(&caller, None, 10).unwrap().remove(0);
    let ready = |l, c: &dyn Carriers| AgentCardView::new(l, c).ready;
    assert!(!ready(listing(&mut s), &NoCarriers), "no endpoint");
    let ep = s
        .attach_endpoint(&caller, &agent.id, Duration::from_secs(60), "e1")
        .unwrap()
        .value;
    assert!(ready(listing(&mut s), &Holding(ep.id.clone(), ep.generation)));
    assert!(!ready(listing(&mut s), &NoCarriers));
    assert!(
        !ready(listing(&mut s), &Holding(ep.id.clone(), ep.generation + 1)),
        "an older carrier"
    );
    let card = AgentCardView::new(listing(&mut s), &Holding(ep.id.clone(), ep.generation));
    let page = agents_page((&principal_named("alice"), "csrf"), &[card], false, true, s.now()).into_string();
    assert!(page.contains("ready — this host holds its carrier"), "{page}");
    // Once the endpoint is detached the carrier no longer counts: it is not current.
    s.detach_endpoint(&caller, &agent.id, &ep.id).unwrap();
    assert!(!ready(listing(&mut s), &Holding(ep.id.clone(), ep.generation)));
}

fn principal_named(name: &str) -> ahp_store::Principal {
    ahp_store::Principal {
        id: "prn_0".into(),
        name: name.into(),
        scopes: vec![],
        created_at: ahp_store::Timestamp::from_micros(0),
        revoked_at: None,
    }
}

#[tokio::test]
async fn agents_and_conversations_follow_the_key_s_scopes_and_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let manager = principal(d, "manager", &["communication:read", "communication:manage"]);
    let reader = principal(d, "reader", &["communication:read"]);
    let stranger = principal(d, "stranger", &["transfer:read"]);
    let other = principal(d, "other", &["communication:read", "communication:manage"]);
    let server = serve(d, &[]);
    let base = base(&server);
    let (m, o) = (talker(d, &manager), talker(d, &other));
    let (forecaster, ep) = agent(d, &m, "forecaster", "<img src=x onerror=alert(1)>");
    let (theirs, _) = agent(d, &o, "theirs", "");
    let foreign = store(d)
        .create_conversation(
            &o,
            &NewConversation {
                title: "Theirs".into(),
                agents: vec![theirs.id.clone()],
            },
            "cv-theirs",
        )
        .unwrap()
        .value
        .id;

    // The manager's agents page: its agent's card, endpoint and readiness; nobody else's.
    let cookie = sign_in(&base, &manager).await;
    let r = get(&format!("{base}/console/agents"), Some(&cookie)).await;
    assert_eq!(r.status(), 200);
    let page = r.text().await.unwrap();
    for shown in [
        "The forecaster",
        "@forecaster",
        "forecasting",
        &ep.id,
        "generation 1",
        "not wake-capable",
        "0 deliveries",
        "not ready",
        "Start a conversation",
    ] {
        assert!(page.contains(shown), "{shown} missing from {page}");
    }
    assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;") && !page.contains("<img"));
    assert!(!page.contains(&theirs.id));
    let csrf = field(&page, "csrf");
    let key = field(&page, "idempotency");
    let start = format!("{base}/console/agents/{}/conversations", forecaster.id);
    let conversations = |c: &Caller| store(d).list_conversations(c, None, 200).unwrap().len();

    // Starting a conversation: refused without the token, from a foreign origin, without a
    // session, and with a blank title — each creating nothing.
    let fields =
        |csrf: &'static str, title: &'static str| vec![("csrf", csrf), ("idempotency", "k-1"), ("title", title)];
    let csrf: &'static str = Box::leak(csrf.into_boxed_str());
    assert_eq!(
        post(&start, &base, Some(&cookie), &fields("0000", "Q3")).await.status(),
        403
    );
    assert_eq!(
        post(&start, "http://evil.example", Some(&cookie), &fields(csrf, "Q3"))
            .await
            .status(),
        403
    );
    assert_eq!(post(&start, &base, None, &fields(csrf, "Q3")).await.status(), 401);
    let r = post(&start, &base, Some(&cookie), &fields(csrf, "  ")).await;
    assert_eq!(r.status(), 400);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("Could not start the conversation: invalid title")
    );
    assert_eq!(conversations(&m), 0);
    let foreign_agent = format!("{base}/console/agents/{}/conversations", theirs.id);
    assert_eq!(
        post(&foreign_agent, &base, Some(&cookie), &fields(csrf, "Q3"))
            .await
            .status(),
        404
    );
    assert_eq!(conversations(&o), 1);

    // Started; the same form sent twice starts it once.
    let ok = [("csrf", csrf), ("idempotency", key.as_str()), ("title", "Q3 stock")];
    let r = post(&start, &base, Some(&cookie), &ok).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let location = r.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with("/console/conversations/cv_"), "{location}");
    let r = post(&start, &base, Some(&cookie), &ok).await;
    assert_eq!(r.headers()["location"].to_str().unwrap(), location);
    assert_eq!(conversations(&m), 1);
    let cv = location.rsplit('/').next().unwrap().to_owned();

    // Posting as the human: once per rendered form, refusals change nothing.
    let page = get(&format!("{base}{location}"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("Q3 stock") && page.contains("No messages yet."));
    let key = field(&page, "idempotency");
    let messages = format!("{base}/console/conversations/{cv}/messages");
    let say = |body: &str, key: &str| {
        vec![
            ("csrf".to_owned(), csrf.to_owned()),
            ("idempotency".to_owned(), key.to_owned()),
            ("body".to_owned(), body.to_owned()),
        ]
    };
    let send = |fields: Vec<(String, String)>, origin: &str, cookie: Option<&str>| {
        let fields: Vec<(&str, &str)> = fields.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let body = form(&fields);
        let mut req = client()
            .post(&messages)
            .header("Origin", origin)
            .header("Content-Type", FORM)
            .body(body);
        if let Some(c) = cookie {
            req = req.header("Cookie", c.to_owned());
        }
        req.send()
    };
    let r = send(say("How much stock?\r\nFor Q3.", &key), &base, Some(&cookie))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let at = r.headers()["location"].to_str().unwrap().to_owned();
    assert!(at.starts_with(&format!("/console/conversations/{cv}#msg_")), "{at}");
    let again = send(say("How much stock?\r\nFor Q3.", &key), &base, Some(&cookie))
        .await
        .unwrap();
    assert_eq!(again.headers()["location"].to_str().unwrap(), at);
    assert_eq!(message_count(d, &m, &cv), 1);
    let first = at.rsplit('#').next().unwrap().to_owned();
    let t = store(d).read_transcript(&m, &Acting::Human, &cv, 0, 10).unwrap();
    assert_eq!(
        t[0].body, "How much stock?\nFor Q3.",
        "CRLF from the form is stored as LF"
    );

    let before = bytes(d);
    assert_eq!(
        send(say("x", "k-2"), "http://evil.example", Some(&cookie))
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(send(say("x", "k-2"), &base, None).await.unwrap().status(), 401);
    let mut forged = say("x", "k-2");
    forged[0].1 = "0".repeat(64);
    assert_eq!(send(forged, &base, Some(&cookie)).await.unwrap().status(), 403);
    let r = send(say("", "k-2"), &base, Some(&cookie)).await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("Not posted: invalid body"));
    let over = "a".repeat(MAX_MESSAGE_BODY_BYTES + 1);
    let r = send(say(&over, "k-2"), &base, Some(&cookie)).await.unwrap();
    assert_eq!(r.status(), 400);
    let page = r.text().await.unwrap();
    assert!(
        page.contains("Not posted: invalid body") && page.contains(&over),
        "the text is kept"
    );
    let r = send(say("a different body", &key), &base, Some(&cookie)).await.unwrap();
    assert_eq!(r.status(), 409, "a form's key reused for other text");
    let page = r.text().await.unwrap();
    assert!(page.contains("already sent with other text") && page.contains("a different body"));
    assert_ne!(field(&page, "idempotency"), key, "the page offers a fresh form");
    assert_eq!(bytes(d), before, "refusals changed nothing");
    // At the bound exactly — every byte percent-encoded — the post goes through.
    let at_bound = "é".repeat(MAX_MESSAGE_BODY_BYTES / 2);
    let r = send(say(&at_bound, "k-3"), &base, Some(&cookie)).await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(message_count(d, &m, &cv), 2);

    // The transcript's live region: the agent's reply from outside, with its provenance.
    let live = format!("{base}/console/conversations/{cv}/live");
    let r = get(&live, Some(&cookie)).await;
    let version = r.headers()["x-live-version"].to_str().unwrap().to_owned();
    let page = get(&format!("{base}/console/conversations/{cv}"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!(r#"data-version="{version}""#)),
        "a fresh page carries its live version, so its first poll is a 204"
    );
    let unchanged = client()
        .get(&live)
        .header("Cookie", &cookie)
        .header("X-Live-Version", &version)
        .send()
        .await
        .unwrap();
    assert_eq!(unchanged.status(), 204);
    reply(d, &m, &ep, &cv, "<b>About 400 units.</b>", Some(&first));
    let r = client()
        .get(&live)
        .header("Cookie", &cookie)
        .header("X-Live-Version", &version)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_ne!(r.headers()["x-live-version"].to_str().unwrap(), version);
    let region = r.text().await.unwrap();
    for shown in [
        "&lt;b&gt;About 400 units.&lt;/b&gt;",
        &forecaster.id,
        &ep.id,
        "generation 1",
        "in reply to #1",
        "The forecaster",
    ] {
        assert!(region.contains(shown), "{shown} missing from {region}");
    }

    // Foreign, missing and malformed conversations are one and the same 404.
    let missing = "cv_ffffffffffffffffffffffff";
    let pages: Vec<(StatusCode, String)> = {
        let mut v = Vec::new();
        for id in [foreign.as_str(), missing, "cv_nope"] {
            let r = get(&format!("{base}/console/conversations/{id}"), Some(&cookie)).await;
            v.push((r.status(), r.text().await.unwrap()));
        }
        v
    };
    assert!(pages.iter().all(|p| p == &pages[0]), "{pages:?}");
    assert_eq!(pages[0].0, 404);
    assert!(!pages[0].1.contains(&foreign));
    let into_foreign = client()
        .post(format!("{base}/console/conversations/{foreign}/messages"))
        .header("Origin", &base)
        .header("Cookie", &cookie)
        .header("Content-Type", FORM)
        .body(form(&[("csrf", csrf), ("idempotency", "k-9"), ("body", "hi")]))
        .send()
        .await
        .unwrap();
    assert_eq!(into_foreign.status(), 404);
    assert_eq!(message_count(d, &o, &foreign), 0);
    assert_eq!(
        get(&format!("{base}/console/conversations/{foreign}/live"), Some(&cookie))
            .await
            .status(),
        404
    );

    // A read-only key reads its own conversations but cannot post into them.
    let rd = owner(&talker(d, &reader));
    let (mine, _) = agent(d, &rd, "helper", "");
    let its = store(d)
        .create_conversation(
            &rd,
            &NewConversation {
                title: "Read only".into(),
                agents: vec![mine.id],
            },
            "cv-ro",
        )
        .unwrap()
        .value
        .id;
    let cookie = sign_in(&base, &reader).await;
    let page = get(&format!("{base}/console/agents"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("@helper") && !page.contains(&forecaster.id) && !page.contains("Start a conversation"));
    let page = get(&format!("{base}/console/conversations"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("Read only") && !page.contains(&cv));
    let page = get(&format!("{base}/console/conversations/{its}"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("cannot post") && !page.contains("name=\"body\""));
    let csrf = field(&page, "csrf");
    let r = post(
        &format!("{base}/console/conversations/{its}/messages"),
        &base,
        Some(&cookie),
        &[("csrf", &csrf), ("idempotency", "k-ro"), ("body", "let me in")],
    )
    .await;
    assert_eq!(r.status(), 403);
    assert_eq!(message_count(d, &rd, &its), 0);

    // A key without the communication scopes sees no agents and no conversations.
    let cookie = sign_in(&base, &stranger).await;
    for path in ["agents", "conversations", &format!("conversations/{cv}")] {
        let r = get(&format!("{base}/console/{path}"), Some(&cookie)).await;
        assert_eq!(r.status(), 403, "{path}");
        let page = r.text().await.unwrap();
        assert!(
            page.contains("This key cannot read") && !page.contains(&forecaster.id),
            "{page}"
        );
    }
    assert_eq!(get(&live, Some(&cookie)).await.status(), 403);
}

/// The owner finds the message its agent is stuck on — waiting, with the turns that failed on
/// it — on the agent's page, and skips it: consumed without an answer, gone from the page. A
/// stale form token, a reader's key and another principal's key skip nothing.
#[tokio::test]
async fn an_owner_skips_the_message_its_agent_is_stuck_on_from_its_page() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let manager = principal(d, "manager", &["communication:read", "communication:manage"]);
    let reader = principal(d, "reader", &["communication:read"]);
    let other = principal(d, "other", &["communication:read", "communication:manage"]);
    let server = serve(d, &[]);
    let base = base(&server);
    let m = talker(d, &manager);
    let (agent, _) = agent(d, &m, "stuck", "");
    let cv = store(d)
        .create_conversation(
            &m,
            &NewConversation {
                title: "Q".into(),
                agents: vec![agent.id.clone()],
            },
            "cv-q",
        )
        .unwrap()
        .value
        .id;
    let ask = |body: &str| {
        let new = NewMessage {
            conversation: cv.clone(),
            acting: Acting::Human,
            body: body.into(),
            reply_to: None,
            idempotency: IdempotencyKey::Key(format!("ask-{}", body.len())),
        };
        store(d).post_message(&m, &new).unwrap().value.id
    };
    let stuck = ask("the <poison> one");
    let next = ask("the next");

    let page_url = format!("{base}/console/agents/{}", agent.id);
    let skip = format!("{page_url}/skip");
    let cookie = sign_in(&base, &manager).await;
    let page = get(&page_url, Some(&cookie)).await.text().await.unwrap();
    for shown in [
        "Messages waiting",
        stuck.as_str(),
        next.as_str(),
        "the &lt;poison&gt; one",
        "Skip",
    ] {
        assert!(page.contains(shown), "{shown} missing from {page}");
    }
    let csrf: &'static str = Box::leak(field(&page, "csrf").into_boxed_str());
    let stuck_id: &'static str = Box::leak(stuck.clone().into_boxed_str());
    let before = bytes(d);
    assert_eq!(
        post(&skip, &base, Some(&cookie), &[("csrf", "0000"), ("message", stuck_id)])
            .await
            .status(),
        403
    );
    let reading = sign_in(&base, &reader).await;
    let reader_page = get(&format!("{base}/console/agents"), Some(&reading))
        .await
        .text()
        .await
        .unwrap();
    let reader_csrf: &'static str = Box::leak(field(&reader_page, "csrf").into_boxed_str());
    let r = post(
        &skip,
        &base,
        Some(&reading),
        &[("csrf", reader_csrf), ("message", stuck_id)],
    )
    .await;
    assert_eq!(r.status(), 403, "a key without communication:manage");
    assert!(r.text().await.unwrap().contains("communication:manage"));
    let theirs = sign_in(&base, &other).await;
    let their_page = get(&format!("{base}/console/agents"), Some(&theirs))
        .await
        .text()
        .await
        .unwrap();
    let their_csrf: &'static str = Box::leak(field(&their_page, "csrf").into_boxed_str());
    assert_eq!(
        post(
            &skip,
            &base,
            Some(&theirs),
            &[("csrf", their_csrf), ("message", stuck_id)]
        )
        .await
        .status(),
        404,
        "another principal's key does not see the agent"
    );
    assert!(bytes(d) == before, "the refusals changed nothing");

    let r = post(&skip, &base, Some(&cookie), &[("csrf", csrf), ("message", stuck_id)]).await;
    assert_eq!(r.status(), 303);
    let page = get(&page_url, Some(&cookie)).await.text().await.unwrap();
    assert!(!page.contains(&stuck) && page.contains(&next), "{page}");
    let queued = store(d).queued_deliveries(&m, &agent.id, 0, 10).unwrap();
    assert_eq!(queued.len(), 1, "skipped: consumed without an answer");
    assert_eq!(message_count(d, &m, &cv), 2, "and nothing was posted");
}

#[tokio::test]
async fn a_person_talks_to_an_agent_in_a_real_browser() {
    let Some(browser) = Browser::launch().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = principal(d, "person", &["communication:read", "communication:manage"]);
    let server = serve(d, &[]);
    let base = base(&server);
    let caller = talker(d, &key);
    let (forecaster, ep) = agent(d, &caller, "forecaster", "Forecasts inventory from sales history.");
    let shots = screenshots();
    let count = "return document.querySelectorAll('ol.transcript li').length";
    let text = "return document.querySelector('ol.transcript').innerText";

    // Sign in: a key that reads only agents starts on the agents page.
    browser.goto(&format!("{base}/console")).await;
    browser.wait_for_path("/console/sign-in").await;
    browser.type_into("#key", &key).await;
    browser.click("form.signin button").await;
    browser.wait_for_path("/console/agents").await;
    let card = format!("article.agent[id='{}']", forecaster.id);
    let shown = format!("return document.querySelector(\"{card}\").innerText");
    let card_text = browser.eval(&shown).await;
    let card_text = card_text.as_str().unwrap();
    assert!(card_text.contains("The forecaster") && card_text.contains(&ep.id) && card_text.contains("not ready"));
    browser.screenshot(&shots.join("agents.png")).await;

    // Start a conversation from the card; post a message and see it.
    browser
        .type_into(&format!("{card} input[name=title]"), "Q3 stock")
        .await;
    browser.click(&format!("{card} form.start button")).await;
    browser
        .wait_for(
            "return location.pathname.startsWith('/console/conversations/cv_')",
            Duration::from_secs(10),
        )
        .await;
    let cv = browser.eval("return location.pathname").await;
    let cv = cv.as_str().unwrap().rsplit('/').next().unwrap().to_owned();
    browser.type_into("#body", "How much stock do we need for Q3?").await;
    browser.click("form.post button").await;
    browser
        .wait_for(&format!("{count} === 1"), Duration::from_secs(10))
        .await;
    let t = browser.eval(text).await;
    assert!(t.as_str().unwrap().contains("How much stock do we need for Q3?"), "{t}");

    // The agent answers from outside the browser; the page shows it without a reload.
    browser.eval("window.__notReloaded = true; return true").await;
    let first = store(d).read_transcript(&caller, &Acting::Human, &cv, 0, 1).unwrap()[0]
        .id
        .clone();
    reply(d, &caller, &ep, &cv, "About 400 units.", Some(&first));
    reply(d, &caller, &ep, &cv, r#"<img src=x onerror="window.__pwned=1">"#, None);
    browser
        .wait_for(&format!("{count} === 3"), Duration::from_secs(10))
        .await;
    assert_eq!(browser.eval("return window.__notReloaded === true").await, true);
    let t = browser.eval(text).await;
    let t = t.as_str().unwrap();
    assert!(
        t.contains("About 400 units.") && t.contains("in reply to #1") && t.contains(&ep.id),
        "{t}"
    );

    // Untrusted bodies render as visible text and run nothing, whichever way they arrive.
    browser.type_into("#body", "<script>window.__pwned=1</script>").await;
    browser.click("form.post button").await;
    browser
        .wait_for(&format!("{count} === 4"), Duration::from_secs(10))
        .await;
    let t = browser.eval(text).await;
    let t = t.as_str().unwrap();
    assert!(
        t.contains("<script>window.__pwned=1</script>") && t.contains(r#"<img src=x onerror="window.__pwned=1">"#),
        "{t}"
    );
    assert_eq!(
        browser
            .eval("return document.querySelectorAll('ol.transcript img, ol.transcript script').length")
            .await,
        0
    );
    assert_eq!(browser.eval("return typeof window.__pwned").await, "undefined");
    browser.screenshot(&shots.join("conversation.png")).await;
}

#[tokio::test]
async fn agents_and_conversations_are_listed_a_bounded_page_at_a_time() {
    use ahp_host::console::agents::AGENTS_PER_PAGE;
    use ahp_host::console::conversations::CONVERSATIONS_PER_PAGE;

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = principal(d, "busy", &["communication:read", "communication:manage"]);
    let server = serve(d, &[]);
    let base = base(&server);
    let caller = talker(d, &key);
    let mut s = store(d);
    let mut agents = Vec::new();
    for i in 0..=AGENTS_PER_PAGE {
        let card = AgentCard {
            handle: format!("agent-{i}"),
            display_name: format!("Agent {i}"),
            description: String::new(),
            specialties: vec![],
        };
        agents.push(s.create_agent(&caller, &card, &format!("a-{i}")).unwrap().value.id);
    }
    for i in 0..=CONVERSATIONS_PER_PAGE {
        let new = NewConversation {
            title: format!("Talk {i}"),
            agents: vec![agents[0].clone()],
        };
        s.create_conversation(&caller, &new, &format!("c-{i}")).unwrap();
    }
    agents.sort();
    let cookie = sign_in(&base, &key).await;
    let cards = |page: &str| page.matches("<article class=\"agent\"").count();
    let rows = |page: &str| page.matches("<tr data-state=").count();

    let first = get(&format!("{base}/console/agents"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(cards(&first), AGENTS_PER_PAGE);
    let next = format!("/console/agents?after={}", agents[AGENTS_PER_PAGE - 1]);
    assert!(first.contains(&next) && !first.contains(&agents[AGENTS_PER_PAGE]));
    let second = get(&format!("{base}{next}"), Some(&cookie)).await.text().await.unwrap();
    assert_eq!(cards(&second), 1);
    assert!(second.contains(&agents[AGENTS_PER_PAGE]) && !second.contains("Next page"));

    let first = get(&format!("{base}/console/conversations"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(rows(&first), CONVERSATIONS_PER_PAGE);
    let next = first
        .split("class=\"next\" href=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    let second = get(&format!("{base}{next}"), Some(&cookie)).await.text().await.unwrap();
    assert_eq!(rows(&second), 1);
    let live = next.replace("/console/conversations?", "/console/conversations/live?");
    let region = get(&format!("{base}{live}"), Some(&cookie)).await.text().await.unwrap();
    assert_eq!(rows(&region), 1, "the live region keeps the page's cursor");
    assert_eq!(
        get(&format!("{base}/console/agents?after=nonsense"), Some(&cookie))
            .await
            .status(),
        400
    );
}
