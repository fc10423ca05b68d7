//! The console's transfers page with 1,000 transfers, rendered on the server.
//!
//! - `console_transfers/page_1000`: what `GET /console/transfers` does after its session check —
//!   the one-statement summary query (each transfer with its budget and newest event) and the
//!   HTML render. Target ≤ 50 ms.
//! - `console_transfers/query_1000` and `render_1000`: the two halves alone.
//! - `console_transfers/baseline_raw_select_1000`: a raw rusqlite `SELECT` of the same 1,000
//!   transfer rows (no joins, no parsing) on the same database — the floor the query stands on.
//!
//! - `console_conversation/page_200`: what `GET /console/conversations/{id}` does after its
//!   session check for a conversation of 200 messages (half the human's, half an agent's
//!   replies, 200-byte bodies): the conversation, its agent's card, the transcript window and
//!   the HTML render. `render_200` is the render alone.
//!
//! Run: `cargo bench -p ahp-host --bench console`.

use std::hint::black_box;

use std::time::Duration;

use ahp_host::console::{conversations, pages};
use ahp_host::testing;
use ahp_store::conversation::{Acting, AgentActor, AgentCard, Caller, IdempotencyKey, NewConversation, NewMessage};
use ahp_store::{Principal, Store, Tier, TokenKey};
use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ahp.db");
    let key = TokenKey::random();
    let mut store = Store::open(&path).unwrap().with_token_key(key.clone());
    let snap = testing::snapshot(4, testing::inventory());
    for i in 0..1000 {
        if i % 2 == 0 {
            store.snapshot_state(&snap).unwrap();
        } else {
            let id = testing::pushed(&mut store, &key, &snap, Tier::Small, 1_000_000, "forecaster").unwrap();
            // Activated in the store alone (no sandbox): the page only reads rows.
            let token = testing::activate_token(&store, &key, &id).unwrap();
            store.begin_activation(&id, &token).unwrap();
            store.complete_activation(&id).unwrap();
            store.report_usage(&id, 1_000 + i, "model").unwrap();
        }
    }
    let principal = Principal {
        id: "prn_0".into(),
        name: "bench".into(),
        scopes: vec![],
        created_at: store.now(),
        revoked_at: None,
    };
    let raw = rusqlite::Connection::open(&path).unwrap();

    let mut g = c.benchmark_group("console_transfers");
    g.bench_function("page_1000", |b| {
        b.iter(|| {
            let rows = store
                .list_transfer_summaries(&ahp_store::TransferOwner::Operator, None, 1000)
                .unwrap();
            assert_eq!(rows.len(), 1000);
            black_box(pages::transfers((&principal, "csrf"), &rows, None, store.now()).into_string())
        })
    });
    g.bench_function("query_1000", |b| {
        b.iter(|| {
            black_box(
                store
                    .list_transfer_summaries(&ahp_store::TransferOwner::Operator, None, 1000)
                    .unwrap(),
            )
        })
    });
    let rows = store
        .list_transfer_summaries(&ahp_store::TransferOwner::Operator, None, 1000)
        .unwrap();
    let page = pages::transfers((&principal, "csrf"), &rows, None, store.now()).into_string();
    println!("transfers page with 1,000 transfers: {} KiB of HTML", page.len() / 1024);
    g.bench_function("render_1000", |b| {
        b.iter(|| black_box(pages::transfers((&principal, "csrf"), &rows, None, store.now()).into_string()))
    });
    g.bench_function("baseline_raw_select_1000", |b| {
        b.iter(|| {
            let mut stmt = raw
                .prepare_cached(
                    "SELECT id, status, tier, component, created_at FROM transfers ORDER BY created_at DESC LIMIT 1000",
                )
                .unwrap();
            let n = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, Option<String>>(3)?,
                        r.get::<_, i64>(4)?,
                    ))
                })
                .unwrap()
                .count();
            black_box(n)
        })
    });
    g.finish();
}

fn conversation(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("ahp.db")).unwrap();
    let caller = Caller::full("account:bench").unwrap();
    let card = AgentCard {
        handle: "forecaster".into(),
        display_name: "Forecaster".into(),
        description: "Forecasts inventory.".into(),
        specialties: vec!["inventory".into()],
    };
    let agent = store.create_agent(&caller, &card, "a").unwrap().value;
    let ep = store
        .attach_endpoint(&caller, &agent.id, Duration::from_secs(3600), "e")
        .unwrap()
        .value;
    let new = NewConversation {
        title: "Q3 stock".into(),
        agents: vec![agent.id.clone()],
    };
    let cv = store.create_conversation(&caller, &new, "c").unwrap().value.id;
    let body = "How much stock for Q3? <b>Plenty</b> & more. ".repeat(5);
    let mut last = None;
    for i in 0..200 {
        let acting = if i % 2 == 0 {
            Acting::Human
        } else {
            Acting::Agent(AgentActor::of(&ep))
        };
        let post = NewMessage {
            conversation: cv.clone(),
            acting,
            body: body[..200].to_owned(),
            reply_to: last.clone(),
            idempotency: IdempotencyKey::Key(format!("m{i}")),
        };
        last = Some(store.post_message(&caller, &post).unwrap().value.id);
    }
    let principal = Principal {
        id: "prn_0".into(),
        name: "bench".into(),
        scopes: vec![],
        created_at: store.now(),
        revoked_at: None,
    };
    let draft = conversations::PostDraft::default();

    let mut g = c.benchmark_group("console_conversation");
    g.bench_function("page_200", |b| {
        b.iter(|| {
            let view = conversations::read_view(&mut store, &caller, &cv, None).unwrap();
            assert_eq!(view.messages.len(), 200);
            black_box(conversations::conversation_page((&principal, "csrf"), &view, Some(&draft)).into_string())
        })
    });
    let view = conversations::read_view(&mut store, &caller, &cv, None).unwrap();
    let page = conversations::conversation_page((&principal, "csrf"), &view, Some(&draft)).into_string();
    println!("conversation page with 200 messages: {} KiB of HTML", page.len() / 1024);
    g.bench_function("render_200", |b| {
        b.iter(|| black_box(conversations::conversation_page((&principal, "csrf"), &view, Some(&draft)).into_string()))
    });
    g.finish();
}

criterion_group!(benches, bench, conversation);
criterion_main!(benches);
