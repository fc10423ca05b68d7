//! Both backends side by side (issue 19): the store's hot paths on SQLite and on PostgreSQL,
//! each beside a raw single-row commit on the same backend in the same run, and at 1, 8 and 32
//! concurrent clients. Issue 20 (group commit) measures itself against these figures.
//!
//! One operation ("op") of each case:
//!
//! - `raw_commit` — the baseline: one single-row `INSERT` in its own transaction on the
//!   driver itself, begun as the store begins a write (SQLite: rusqlite, `BEGIN IMMEDIATE`,
//!   WAL, `synchronous=FULL`, the same busy timeout; PostgreSQL: the `postgres` client under
//!   `PgConnection`, `BEGIN ISOLATION LEVEL SERIALIZABLE`, a prepared `INSERT`, `COMMIT`).
//! - `store_commit` — the cheapest real write of the store: `renew_carrier_lease` (the host
//!   extending its carrier's endpoint lease: the endpoint admission read, one single-row
//!   `UPDATE`, the read-back, one commit).
//! - `report_usage` — the spend path: `report_usage` of 1 micro-USD on an active transfer
//!   (transfer read, compare-and-set, budget update, audit event, one commit).
//! - `post_fanout10` — a human's `post_message` into a conversation with 10 agent
//!   participants (message, 10 deliveries, 10 wake coalescings, the seq bump, the idempotency
//!   record: one commit). Three ways to share rows between concurrent clients:
//!   `…/own` (each client its own conversation and its own 10 agents: nothing shared),
//!   `…/shared_agents` (each its own conversation, the same 10 agents: their wakes are shared)
//!   and `…/one_conversation` (every client posts into the same conversation of the same 10
//!   agents: its `next_seq` too).
//! - `post_reply` — a human post to a transfer's agent and the agent's whole turn, as the
//!   host's controller (`host/src/agents/dispatch.rs`) and the echo guest's host calls
//!   (`host/src/interfaces/conversations.rs`, the meter) make it: the post; `transfer`,
//!   `budget`; `claim_and_dispatch` (the claim and the fence, one commit); the meter's
//!   `budget`; `read_inbox`; the reply `post_message` (wake-reply idempotency);
//!   the consume's check (`read_delivery`, held for the turn's end); the guest SDK's second
//!   `read_inbox` page (empty); `finish_turn_spending` (accepted: the exact consume, the held
//!   delivery consume and the turn's last compute settlement); then the next opportunity's
//!   `transfer`, `budget` and `claim_and_dispatch` finding nothing. Four commits and eight
//!   reads; no sandbox.
//!
//! Two parts, one command:
//!
//! 1. criterion, one client: `sqlite/<op>` and `postgres/<op>`, per-op latency.
//! 2. a timing loop: every op at each client count (`AHP_BENCH_CLIENTS`, default `1,8,32`),
//!    each client a thread with its own `Store` over its own connection, running ops back to
//!    back for `AHP_BENCH_SECS` seconds (default 2; `0` skips this part) after a 0.5 s
//!    warm-up, each beside `raw_commit` on the same database — at one client interleaved
//!    with the op (raw commit, op, raw commit, op, …), at more in its own window just before
//!    at the same client count (the disk's commit price moves while other work runs on the
//!    machine, so each row carries its own baseline); `AHP_BENCH_ONLY=postgres/post` keeps the cases whose
//!    `backend/op` contains it. It prints a Markdown table of throughput, p50 and p99
//!    latency, the ratios to that `raw_commit`, and on PostgreSQL how many statements the
//!    store sent per op (each one round trip: `BEGIN`, statements, `COMMIT`), how many
//!    transactions the store ran again (each serialization failure or deadlock the driver reported), how often
//!    the store gave up after its attempts (the bench then runs the op again, as the host's
//!    controller does), and at which statements.
//!
//! SQLite: a file under cargo's target tmpdir (a real disk), fresh per case, opened by
//! `Store::open` (WAL, `synchronous=FULL`, busy timeout 5 s); concurrent clients are separate
//! connections to that file, so SQLite's write lock serializes them (a writer waits in SQLite's
//! busy handler). PostgreSQL: the server named by `AHP_TEST_PG` (`eval "$(bash .ci/postgres
//! start)"`), a fresh database per case (`ahp_store_postgres::testing::fresh_database`), each
//! connection opened by `ahp_store_postgres::open`. Without `AHP_TEST_PG` the PostgreSQL cases
//! are skipped and the run says so.
//!
//! Run with `cargo bench -p ahp-store --bench backends`.

use std::any::Any;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use ahp_store::conversation::{
    Acting, AgentActor, AgentCard, Caller, ConversationError, DispatchOutcome, IdempotencyKey, NewConversation,
    NewMessage, TurnInbox, TurnSpend,
};
use ahp_store::sql::{Begin, Connection, Dialect, Row, SqlError, SqlResult, ValueRef};
use ahp_store::{
    COMPUTE_USAGE_KIND, DEFAULT_TOKEN_TTL, Error, MAX_BUDGET_MICRO_USD, Message, SnapshotInput, Store, Tier, TokenKey,
    TokenScope, TransferOwner, TransferStatus, issue_transfer_token,
};
use ahp_store_postgres::PgConnection;
use ahp_store_postgres::testing::DatabaseGuard;
use criterion::{Criterion, Throughput};
use serde_json::json;

/// Agent participants of the fan-out conversation.
const RECIPIENTS: usize = 10;
/// The carrier's endpoint lease (the host's `CARRIER_LEASE`).
const CARRIER_LEASE: Duration = Duration::from_secs(3600);
/// A turn's claim lease (the host gives the tier's wall clock + 30 s).
const CLAIM_LEASE: Duration = Duration::from_secs(60);
/// The guest SDK's inbox page (`MAX_PAGE`).
const INBOX_PAGE: usize = 64;
/// Seconds of each timed window of the throughput loop, unless `AHP_BENCH_SECS` says otherwise.
const DEFAULT_WINDOW_SECS: f64 = 2.0;
/// Warm-up before each timed window of the throughput loop.
const WARM_UP: Duration = Duration::from_millis(500);
/// Times one op is run again after the store gave up on it as busy, before the bench fails.
const MAX_GIVE_UPS_PER_OP: u32 = 100;
const BODY: &str = "A short message of the usual size for a chat between agents.";

// ---------------------------------------------------------------------------------------------
// Databases

/// Which backend a case runs on.
#[derive(Clone, Copy)]
enum Backend {
    Sqlite,
    /// The server named by `AHP_TEST_PG`.
    Postgres,
}

impl Backend {
    fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// Transactions the store had to run again, counted at the driver: every `SqlError::Busy` a
/// connection returned (a serialization failure, a deadlock, a stale plan), by where it
/// surfaced.
#[derive(Default)]
struct Tally {
    busy: AtomicU64,
    /// Statements the store sent (each `BEGIN`, statement and `COMMIT` one round trip).
    statements: AtomicU64,
    sites: Mutex<BTreeMap<String, u64>>,
}

impl Tally {
    fn snapshot(&self) -> (u64, u64, BTreeMap<String, u64>) {
        (
            self.busy.load(Ordering::Relaxed),
            self.statements.load(Ordering::Relaxed),
            self.sites.lock().unwrap().clone(),
        )
    }
}

/// A PostgreSQL connection that counts the transient errors it hands the store.
struct Counted {
    inner: PgConnection,
    tally: Arc<Tally>,
}

impl Counted {
    fn note<T>(&self, at: &str, result: SqlResult<T>) -> SqlResult<T> {
        self.tally.statements.fetch_add(1, Ordering::Relaxed);
        if let Err(SqlError::Busy(message)) = &result {
            self.tally.busy.fetch_add(1, Ordering::Relaxed);
            let message = message.split(" [SQLSTATE").next().unwrap_or(message);
            let site = format!("{} ← `{}`", short(message, 110), short(at, 90));
            *self.tally.sites.lock().unwrap().entry(site).or_default() += 1;
        }
        result
    }
}

/// `text` on one line, at most `max` characters.
fn short(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line,
    }
}

impl Connection for Counted {
    fn dialect(&self) -> Dialect {
        self.inner.dialect()
    }
    fn begin(&mut self, begin: Begin) -> SqlResult<()> {
        let r = self.inner.begin(begin);
        self.note("BEGIN", r)
    }
    fn commit(&mut self) -> SqlResult<()> {
        let r = self.inner.commit();
        self.note("COMMIT", r)
    }
    fn rollback(&mut self) -> SqlResult<()> {
        let r = self.inner.rollback();
        self.note("ROLLBACK", r)
    }
    fn execute(&mut self, sql: &str, params: &[ValueRef<'_>]) -> SqlResult<u64> {
        let r = self.inner.execute(sql, params);
        self.note(sql, r)
    }
    fn query(
        &mut self,
        sql: &str,
        params: &[ValueRef<'_>],
        row: &mut dyn FnMut(Row) -> SqlResult<bool>,
    ) -> SqlResult<()> {
        let r = self.inner.query(sql, params, row);
        self.note(sql, r)
    }
    fn execute_batch(&mut self, sql: &str) -> SqlResult<()> {
        self.inner.execute_batch(sql)
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self.inner.as_any_mut()
    }
}

/// One fresh database for one case, and how to connect to it.
struct Db {
    /// SQLite: the store's file and the raw baseline's file.
    files: Option<(PathBuf, PathBuf)>,
    /// PostgreSQL: the database's URL.
    url: Option<String>,
    tally: Arc<Tally>,
    key: TokenKey,
    _dir: Option<tempfile::TempDir>,
    _guard: Option<DatabaseGuard>,
}

impl Db {
    fn fresh(backend: &Backend) -> Db {
        let mut db = Db {
            files: None,
            url: None,
            tally: Arc::default(),
            key: TokenKey::random(),
            _dir: None,
            _guard: None,
        };
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
                db.files = Some((dir.path().join("store.db"), dir.path().join("raw.db")));
                db._dir = Some(dir);
            }
            Backend::Postgres => {
                let (url, guard) = ahp_store_postgres::testing::fresh_database().expect("AHP_TEST_PG is set");
                db.url = Some(url);
                db._guard = Some(guard);
            }
        }
        // Migrate once, before any client connects.
        drop(db.store());
        db
    }

    /// A new store over a new connection.
    fn store(&self) -> Store {
        let store = match (&self.files, &self.url) {
            (Some((path, _)), _) => Store::open(path).unwrap(),
            (_, Some(url)) => Store::over(Box::new(Counted {
                inner: ahp_store_postgres::open(url).unwrap(),
                tally: self.tally.clone(),
            }))
            .unwrap(),
            _ => unreachable!("a database is a file or a URL"),
        };
        store.with_token_key(self.key.clone())
    }

    /// A new raw connection for the baseline.
    fn raw(&self) -> Raw {
        match (&self.files, &self.url) {
            (Some((_, path)), _) => {
                let conn = rusqlite::Connection::open(path).unwrap();
                conn.busy_timeout(ahp_store::db::BUSY_TIMEOUT).unwrap();
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
                    .unwrap();
                conn.pragma_update(None, "synchronous", "FULL").unwrap();
                conn.execute_batch("CREATE TABLE IF NOT EXISTS bench_raw (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
                    .unwrap();
                Raw::Sqlite(conn, self.tally.clone())
            }
            (_, Some(url)) => {
                let mut conn = postgres::Client::connect(url, postgres::NoTls).unwrap();
                conn.batch_execute(
                    "CREATE TABLE IF NOT EXISTS bench_raw (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v TEXT NOT NULL)",
                )
                .unwrap();
                let insert = conn.prepare("INSERT INTO bench_raw (v) VALUES ($1)").unwrap();
                Raw::Postgres(conn, insert, self.tally.clone())
            }
            _ => unreachable!("a database is a file or a URL"),
        }
    }
}

/// A driver connection for the baseline.
enum Raw {
    Sqlite(rusqlite::Connection, Arc<Tally>),
    Postgres(postgres::Client, postgres::Statement, Arc<Tally>),
}

impl Raw {
    /// One single-row `INSERT`, committed; a busy database or a serialization failure is
    /// counted and the transaction run again.
    fn commit(&mut self) {
        match self {
            Raw::Sqlite(conn, tally) => loop {
                let done = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .and_then(|tx| {
                        tx.execute("INSERT INTO bench_raw (v) VALUES ('usage_reported')", [])?;
                        tx.commit()
                    });
                match done {
                    Ok(()) => return,
                    // Waited past the busy timeout (many writers on a slow disk): again, as
                    // the store's write path does.
                    Err(rusqlite::Error::SqliteFailure(f, _)) if f.code == rusqlite::ErrorCode::DatabaseBusy => {
                        tally.busy.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => panic!("raw insert: {e}"),
                }
            },
            Raw::Postgres(conn, insert, tally) => loop {
                conn.batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE").unwrap();
                let done = conn
                    .execute(&*insert, &[&"usage_reported"])
                    .and_then(|_| conn.batch_execute("COMMIT"));
                match done {
                    Ok(()) => return,
                    Err(e) if e.code().is_some_and(|c| c.code().starts_with("40")) => {
                        tally.busy.fetch_add(1, Ordering::Relaxed);
                        conn.batch_execute("ROLLBACK").unwrap();
                    }
                    Err(e) => panic!("raw insert: {e}"),
                }
            },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Fixtures

fn snapshot() -> SnapshotInput {
    SnapshotInput {
        source_host: "bench".into(),
        system_prompt: "You answer questions about stock.".into(),
        message_history: vec![Message {
            role: "user".into(),
            content: "hello".into(),
        }],
        tool_state: json!({}),
        mcp_config: vec![],
    }
}

fn card(handle: String) -> AgentCard {
    AgentCard {
        display_name: handle.clone(),
        handle,
        description: "benchmark recipient".into(),
        specialties: vec![],
    }
}

/// The owner of client `i`'s transfer: an API-key principal of its own (a principal holds at
/// most 256 agents, and each client is a different user).
fn owner(i: usize) -> TransferOwner {
    TransferOwner::ApiKey(format!("prn_{i:024x}"))
}

/// A transfer of `owner`, active, bound to its agent and carried: what the host holds for an
/// agent that takes turns, with a conversation its owner opened with the agent.
struct Carried {
    transfer: String,
    human: Caller,
    host: Caller,
    actor: AgentActor,
    conversation: String,
    posts: u64,
}

fn carried(store: &mut Store, key: &TokenKey, owner: &TransferOwner) -> Carried {
    let t = store.snapshot_state_as(&snapshot(), owner).unwrap().id;
    let token = |store: &Store, scope| issue_transfer_token(key, &t, scope, store.now(), DEFAULT_TOKEN_TTL).unwrap();
    let tok = token(store, TokenScope::ProvisionRuntime);
    store
        .provision_runtime(&t, Tier::Small, MAX_BUDGET_MICRO_USD, "echo", &tok)
        .unwrap();
    store.push_state(&t, None).unwrap();
    let tok = token(store, TokenScope::Activate);
    store.begin_activation(&t, &tok).unwrap();
    store.complete_activation(&t).unwrap();
    let b = store.bind_transfer_agent(&t, CARRIER_LEASE).unwrap();
    let ep = store
        .register_wake_carrier(&b.agent.id, &b.endpoint.id, b.endpoint.generation)
        .unwrap();
    let human = owner.caller().unwrap();
    let new = NewConversation {
        title: "questions".into(),
        agents: vec![b.agent.id.clone()],
    };
    let conversation = store.create_conversation(&human, &new, "cv").unwrap().value.id;
    Carried {
        transfer: t,
        human,
        host: owner.host_caller().unwrap(),
        actor: AgentActor::of(&ep),
        conversation,
        posts: 0,
    }
}

/// A conversation of [`RECIPIENTS`] agents into which `human` posts.
#[derive(Clone)]
struct FanOut {
    human: Caller,
    conversation: String,
}

fn fan_out(store: &mut Store, human: &Caller, agents: &[String], tag: &str) -> FanOut {
    let new = NewConversation {
        title: format!("fan-out {tag}"),
        agents: agents.to_vec(),
    };
    let conversation = store
        .create_conversation(human, &new, &format!("cv-{tag}"))
        .unwrap()
        .value
        .id;
    FanOut {
        human: human.clone(),
        conversation,
    }
}

fn agents(store: &mut Store, human: &Caller, tag: &str) -> Vec<String> {
    (0..RECIPIENTS)
        .map(|i| {
            let handle = format!("agent-{tag}-{i}");
            store
                .create_agent(human, &card(handle.clone()), &handle)
                .unwrap()
                .value
                .id
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Operations

/// Whether an error is the database being busy (the store already ran the transaction
/// [`MAX_WRITE_ATTEMPTS`] times).
trait Transient: std::fmt::Display {
    fn transient(&self) -> bool;
}

impl Transient for Error {
    fn transient(&self) -> bool {
        self.is_transient()
    }
}

impl Transient for ConversationError {
    fn transient(&self) -> bool {
        self.is_transient()
    }
}

/// Runs one store call until it succeeds, as the host does with a step that found the database
/// busy; each time the store gave up is counted in `give_ups`.
fn persist<T, E: Transient>(give_ups: &AtomicU64, mut call: impl FnMut() -> Result<T, E>) -> T {
    for _ in 0..MAX_GIVE_UPS_PER_OP {
        match call() {
            Ok(v) => return v,
            Err(e) if e.transient() => {
                give_ups.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => panic!("{e}"),
        }
    }
    panic!("the store stayed busy through {MAX_GIVE_UPS_PER_OP} tries");
}

/// One client's state for one case: an op runs against it.
enum Client {
    Raw(Raw),
    StoreCommit(Store, Carried),
    Usage(Store, Carried),
    Post(Store, FanOut, u64),
    Turn(Store, Carried),
}

impl Client {
    fn op(&mut self, tag: usize, give_ups: &AtomicU64) {
        match self {
            Client::Raw(raw) => raw.commit(),
            Client::StoreCommit(store, c) => {
                let (agent, endpoint, generation) = (&c.actor.agent, &c.actor.endpoint, c.actor.generation);
                black_box(persist(give_ups, || {
                    store.renew_carrier_lease(agent, endpoint, generation, CARRIER_LEASE)
                }));
            }
            Client::Usage(store, c) => {
                black_box(persist(give_ups, || {
                    store.report_usage(&c.transfer, 1, COMPUTE_USAGE_KIND)
                }));
            }
            Client::Post(store, f, n) => {
                *n += 1;
                let m = NewMessage {
                    conversation: f.conversation.clone(),
                    acting: Acting::Human,
                    body: BODY.into(),
                    reply_to: None,
                    idempotency: IdempotencyKey::Key(format!("post-{tag}-{n}")),
                };
                black_box(persist(give_ups, || store.post_message(&f.human, &m)));
            }
            Client::Turn(store, c) => post_reply(store, c, give_ups),
        }
    }
}

/// A human post and the agent's whole turn (see the module docs for the calls).
fn post_reply(store: &mut Store, c: &mut Carried, give_ups: &AtomicU64) {
    c.posts += 1;
    let question = NewMessage {
        conversation: c.conversation.clone(),
        acting: Acting::Human,
        body: "How much stock for Q3?".into(),
        reply_to: None,
        idempotency: IdempotencyKey::Key(format!("q-{}", c.posts)),
    };
    persist(give_ups, || store.post_message(&c.human, &question));
    // The controller: the transfer and its budget, the claim, the fence.
    let (host, actor) = (&c.host, &c.actor);
    let t = persist(give_ups, || store.transfer(&c.transfer));
    assert_eq!(t.status, TransferStatus::Active);
    persist(give_ups, || store.budget(&c.transfer));
    let ticket = persist(give_ups, || store.claim_and_dispatch(host, actor, CLAIM_LEASE)).expect("the question's wake");
    // The echo guest's turn: the meter reads the budget; the guest pages its inbox, replies
    // to and consumes each delivery; the meter settles the compute spent.
    persist(give_ups, || store.budget(&c.transfer));
    let inbox = persist(give_ups, || store.read_inbox(host, actor, 0, INBOX_PAGE, true));
    assert_eq!(inbox.len(), 1, "one question waits");
    let (mut after, mut consumed) = (0, Vec::new());
    for (index, d) in inbox.iter().enumerate() {
        let reply = NewMessage {
            conversation: d.message.conversation_id.clone(),
            acting: Acting::Agent(actor.clone()),
            body: format!("echo: {}", d.message.body),
            reply_to: Some(d.message.id.clone()),
            idempotency: IdempotencyKey::WakeReply {
                wake: ticket.wake.id.clone(),
                index: index as u32,
            },
        };
        persist(give_ups, || store.post_message(host, &reply));
        // The host checks the consume now and records it with the turn's end.
        persist(give_ups, || store.read_delivery(host, actor, &d.message.id));
        consumed.push(d.message.id.clone());
        after = d.delivery_order;
    }
    let rest = persist(give_ups, || store.read_inbox(host, actor, after, INBOX_PAGE, true));
    assert!(rest.is_empty());
    let spend = TurnSpend {
        transfer: c.transfer.clone(),
        micro_usd: 1,
    };
    persist(give_ups, || {
        store.finish_turn_spending(
            host,
            actor,
            &ticket,
            DispatchOutcome::Accepted,
            Some(&spend),
            TurnInbox {
                consumed: &consumed,
                read: &[],
            },
        )
    });
    // The next turn of the same opportunity finds nothing to claim.
    persist(give_ups, || store.transfer(&c.transfer));
    persist(give_ups, || store.budget(&c.transfer));
    let next = persist(give_ups, || store.claim_and_dispatch(host, actor, CLAIM_LEASE));
    assert!(next.is_none(), "nothing else waits");
}

/// The cases, in the order they run (the baseline first: the others' ratios refer to it).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    RawCommit,
    StoreCommit,
    ReportUsage,
    PostOwn,
    PostSharedAgents,
    PostOneConversation,
    PostReply,
}

const CASES: [Case; 7] = [
    Case::RawCommit,
    Case::StoreCommit,
    Case::ReportUsage,
    Case::PostOwn,
    Case::PostSharedAgents,
    Case::PostOneConversation,
    Case::PostReply,
];

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::RawCommit => "raw_commit",
            Case::StoreCommit => "store_commit",
            Case::ReportUsage => "report_usage",
            Case::PostOwn => "post_fanout10/own",
            Case::PostSharedAgents => "post_fanout10/shared_agents",
            Case::PostOneConversation => "post_fanout10/one_conversation",
            Case::PostReply => "post_reply",
        }
    }

    /// `n` clients of this case on `db`, each over its own connection.
    fn clients(self, db: &Db, n: usize) -> Vec<Client> {
        // Rows shared by every client of the shared fan-out cases, set up once.
        let shared = match self {
            Case::PostSharedAgents | Case::PostOneConversation => {
                let mut store = db.store();
                let human = owner(usize::MAX >> 1).caller().unwrap();
                let agents = agents(&mut store, &human, "shared");
                let one = fan_out(&mut store, &human, &agents, "shared");
                Some((human, agents, one))
            }
            _ => None,
        };
        (0..n)
            .map(|i| match self {
                Case::RawCommit => Client::Raw(db.raw()),
                Case::StoreCommit => {
                    let mut store = db.store();
                    let c = carried(&mut store, &db.key, &owner(i));
                    Client::StoreCommit(store, c)
                }
                Case::ReportUsage => {
                    let mut store = db.store();
                    let c = carried(&mut store, &db.key, &owner(i));
                    Client::Usage(store, c)
                }
                Case::PostOwn => {
                    let mut store = db.store();
                    let human = owner(i).caller().unwrap();
                    let agents = agents(&mut store, &human, &i.to_string());
                    let f = fan_out(&mut store, &human, &agents, &i.to_string());
                    Client::Post(store, f, 0)
                }
                Case::PostSharedAgents => {
                    let mut store = db.store();
                    let (human, agents, _) = shared.as_ref().unwrap();
                    let f = fan_out(&mut store, human, agents, &i.to_string());
                    Client::Post(store, f, 0)
                }
                Case::PostOneConversation => {
                    let (_, _, one) = shared.as_ref().unwrap();
                    Client::Post(db.store(), one.clone(), 0)
                }
                Case::PostReply => {
                    let mut store = db.store();
                    let c = carried(&mut store, &db.key, &owner(i));
                    Client::Turn(store, c)
                }
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Part 1: criterion, one client

fn latency(c: &mut Criterion, backends: &[Backend]) {
    for backend in backends {
        let mut g = c.benchmark_group(backend.name());
        g.throughput(Throughput::Elements(1));
        for case in CASES {
            // One client: the three fan-out cases are the same case.
            if matches!(case, Case::PostSharedAgents | Case::PostOneConversation) {
                continue;
            }
            let db = Db::fresh(backend);
            let mut client = case.clients(&db, 1).pop().unwrap();
            let give_ups = AtomicU64::new(0);
            let name = case.name().split('/').next().unwrap();
            g.bench_function(name, |b| b.iter(|| client.op(0, &give_ups)));
        }
        g.finish();
    }
}

// ---------------------------------------------------------------------------------------------
// Part 2: throughput at 1, 8 and 32 clients

/// What one timed window measured.
struct Measured {
    ops: usize,
    /// The time the ops had: the window, or (paired) the sum of their own latencies.
    elapsed: Duration,
    p50: Duration,
    p99: Duration,
    retries: u64,
    /// Statements the store sent per op (PostgreSQL).
    statements: f64,
    give_ups: u64,
    sites: BTreeMap<String, u64>,
}

impl Measured {
    fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }

    fn of(mut latencies: Vec<Duration>, elapsed: Option<Duration>) -> Measured {
        latencies.sort_unstable();
        let pick = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
        Measured {
            ops: latencies.len(),
            elapsed: elapsed.unwrap_or_else(|| latencies.iter().sum()),
            p50: pick(0.5),
            p99: pick(0.99),
            retries: 0,
            statements: 0.0,
            give_ups: 0,
            sites: BTreeMap::new(),
        }
    }
}

/// `n` clients of `case` running ops back to back through the warm-up and the window. With
/// `paired` (one client), the client alternates a `raw_commit` with each op, and both are
/// returned: a baseline taken at the same moments as the op, whatever the disk does meanwhile.
fn measure(db: &Db, case: Case, n: usize, window: Duration, paired: bool) -> (Measured, Option<Measured>) {
    let clients = case.clients(db, n);
    let give_ups = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(n + 1));
    let began = Instant::now() + Duration::from_millis(200);
    let (from, until) = (began + WARM_UP, began + WARM_UP + window);
    let threads: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(tag, mut client)| {
            let (give_ups, start) = (give_ups.clone(), start.clone());
            let mut raw = paired.then(|| db.raw());
            std::thread::spawn(move || {
                start.wait();
                let (mut latencies, mut raw_latencies) = (Vec::new(), Vec::new());
                let mine = AtomicU64::new(0);
                let mut counted = 0;
                while Instant::now() < until {
                    if let Some(raw) = &mut raw {
                        let t0 = Instant::now();
                        raw.commit();
                        let t1 = Instant::now();
                        if t1 >= from && t1 <= until {
                            raw_latencies.push(t1 - t0);
                        }
                    }
                    let before = mine.load(Ordering::Relaxed);
                    let t0 = Instant::now();
                    client.op(tag, &mine);
                    let t1 = Instant::now();
                    // Only ops that ended inside the window count.
                    if t1 >= from && t1 <= until {
                        latencies.push(t1 - t0);
                        counted += mine.load(Ordering::Relaxed) - before;
                    }
                }
                give_ups.fetch_add(counted, Ordering::Relaxed);
                // The connections close here, before their database is dropped.
                drop((client, raw));
                (latencies, raw_latencies)
            })
        })
        .collect();
    start.wait();
    std::thread::sleep(from.saturating_duration_since(Instant::now()));
    let (busy_from, statements_from, sites_from) = db.tally.snapshot();
    std::thread::sleep(until.saturating_duration_since(Instant::now()));
    let (busy_until, statements_until, sites_until) = db.tally.snapshot();
    let (mut latencies, mut raw_latencies) = (Vec::new(), Vec::new());
    for t in threads {
        let (ops, raws) = t.join().unwrap();
        latencies.extend(ops);
        raw_latencies.extend(raws);
    }
    let mut m = Measured::of(latencies, (!paired).then_some(window));
    m.retries = busy_until - busy_from;
    // Retried attempts included; the raw baseline's statements do not pass the wrapper.
    m.statements = (statements_until - statements_from) as f64 / m.ops.max(1) as f64;
    m.give_ups = give_ups.load(Ordering::Relaxed);
    m.sites = sites_until
        .into_iter()
        .map(|(site, k)| (site.clone(), k - sites_from.get(&site).copied().unwrap_or(0)))
        .filter(|(_, k)| *k > 0)
        .collect();
    (m, paired.then(|| Measured::of(raw_latencies, None)))
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

fn throughput(backends: &[Backend]) {
    let secs: f64 = std::env::var("AHP_BENCH_SECS").ok().map_or(DEFAULT_WINDOW_SECS, |s| {
        s.trim().parse().expect("AHP_BENCH_SECS: seconds")
    });
    if secs <= 0.0 {
        println!("AHP_BENCH_SECS=0: throughput table skipped");
        return;
    }
    let window = Duration::from_secs_f64(secs);
    let levels: Vec<usize> = std::env::var("AHP_BENCH_CLIENTS")
        .unwrap_or_else(|_| "1,8,32".into())
        .split(',')
        .map(|s| s.trim().parse().expect("AHP_BENCH_CLIENTS: a list like 1,8,32"))
        .collect();
    let only = std::env::var("AHP_BENCH_ONLY").unwrap_or_default();
    println!();
    println!(
        "## throughput: each case {secs} s after a {} ms warm-up, beside `raw_commit` on the same database (1 client: interleaved with the op; more: its own window just before)",
        WARM_UP.as_millis()
    );
    println!();
    println!(
        "| backend | op | clients | ops/s | raw commits/s | × raw | p50 | p99 | raw p50 | p50 ÷ raw p50 | statements/op | retried transactions | store gave up |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut notes = Vec::new();
    for backend in backends {
        for case in CASES.into_iter().filter(|c| *c != Case::RawCommit) {
            let label = format!("{}/{}", backend.name(), case.name());
            if !label.contains(&only) {
                continue;
            }
            for &n in &levels {
                let db = Db::fresh(backend);
                // One client: the baseline interleaved with the op; several: the baseline's
                // own window, just before.
                let (m, raw) = if n == 1 {
                    let (m, raw) = measure(&db, case, 1, window, true);
                    (m, raw.expect("paired"))
                } else {
                    let (raw, _) = measure(&db, Case::RawCommit, n, window, false);
                    (measure(&db, case, n, window, false).0, raw)
                };
                let (statements, retries) = match backend {
                    Backend::Sqlite => ("—".to_owned(), "—".to_owned()),
                    Backend::Postgres => (
                        format!("{:.0}", m.statements),
                        format!("{} ({:.2}/op)", m.retries, m.retries as f64 / m.ops.max(1) as f64),
                    ),
                };
                println!(
                    "| {} | `{}` | {n} | {:.0} | {:.0} | {:.2}× | {} | {} | {} | {:.1}× | {statements} | {retries} | {} |",
                    backend.name(),
                    case.name(),
                    m.rate(),
                    raw.rate(),
                    m.rate() / raw.rate(),
                    ms(m.p50),
                    ms(m.p99),
                    ms(raw.p50),
                    m.p50.as_secs_f64() / raw.p50.as_secs_f64(),
                    m.give_ups,
                );
                if raw.retries > 0 {
                    notes.push(format!(
                        "{} `raw_commit` before `{}` at {n} clients: {} transactions run again (busy past the timeout, or a serialization failure)",
                        backend.name(),
                        case.name(),
                        raw.retries
                    ));
                }
                if !m.sites.is_empty() {
                    let mut sites: Vec<_> = m.sites.into_iter().collect();
                    sites.sort_by_key(|s| std::cmp::Reverse(s.1));
                    notes.push(format!("{} `{}` at {n} clients:", backend.name(), case.name()));
                    for (site, k) in sites.into_iter().take(5) {
                        notes.push(format!("  - {k} × {site}"));
                    }
                }
            }
        }
    }
    if !notes.is_empty() {
        println!();
        println!("Where the retried transactions failed (the statement that reported the conflict, and why):");
        println!();
        for n in notes {
            println!("{n}");
        }
    }
}

fn main() {
    let mut backends = vec![Backend::Sqlite];
    match ahp_store_postgres::testing::server() {
        Some(_) => backends.push(Backend::Postgres),
        None => println!(
            "AHP_TEST_PG is not set: the PostgreSQL cases are skipped (start one with `eval \"$(bash .ci/postgres start)\"`)"
        ),
    }
    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    latency(&mut c, &backends);
    c.final_summary();
    throughput(&backends);
}
