//! The console's transfers page with 1,000 transfers, rendered on the server.
//!
//! - `console_transfers/page_1000`: what `GET /console/transfers` does after its session check —
//!   the one-statement summary query (each transfer with its budget and newest event) and the
//!   HTML render. Target ≤ 50 ms.
//! - `console_transfers/query_1000` and `render_1000`: the two halves alone.
//! - `console_transfers/baseline_raw_select_1000`: a raw rusqlite `SELECT` of the same 1,000
//!   transfer rows (no joins, no parsing) on the same database — the floor the query stands on.
//!
//! Run: `cargo bench -p ahp-host --bench console`.

use std::hint::black_box;

use ahp_host::console::pages;
use ahp_host::testing;
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
            let rows = store.list_transfer_summaries(None, 1000).unwrap();
            assert_eq!(rows.len(), 1000);
            black_box(pages::transfers((&principal, "csrf"), &rows, None, store.now()).into_string())
        })
    });
    g.bench_function("query_1000", |b| {
        b.iter(|| black_box(store.list_transfer_summaries(None, 1000).unwrap()))
    });
    let rows = store.list_transfer_summaries(None, 1000).unwrap();
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

criterion_group!(benches, bench);
criterion_main!(benches);
