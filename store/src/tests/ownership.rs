//! Transfers belong to their owner: `get_status`, `push_state` and `report_usage` act only on a
//! transfer of the calling principal's, and refuse another principal's transfer exactly as they
//! refuse a missing one — the same error, the same text, and the database unchanged row for
//! row. The operator acts on every transfer. On either backend (`crate::testing`).

use std::sync::Arc;

use crate::testing;
use crate::*;

const START: Timestamp = Timestamp::from_micros(1_796_039_139_000_000);
const BUDGET: u64 = 1_000;
/// A well-formed id that no transfer has.
const MISSING: &str = "tr_ffffffffffffffffffffffff";

fn alice() -> TransferOwner {
    TransferOwner::ApiKey("prn_a11ce0000000000000000000".into())
}

fn mallory() -> TransferOwner {
    TransferOwner::ApiKey("prn_ba11000000000000000000ff".into())
}

struct Fixture {
    store: Store,
    key: TokenKey,
    clock: ManualClock,
}

impl Fixture {
    fn new() -> Self {
        let key = TokenKey::random();
        let clock = ManualClock::new(START);
        let store = testing::store()
            .unwrap()
            .with_clock(Arc::new(clock.clone()))
            .with_token_key(key.clone());
        Self { store, key, clock }
    }

    /// Every row of the database: equal before and after means a call changed nothing.
    fn bytes(&mut self) -> Vec<String> {
        testing::dump(&mut self.store)
    }

    fn token(&self, transfer: &str, scope: TokenScope) -> String {
        issue_transfer_token(&self.key, transfer, scope, self.clock.now(), DEFAULT_TOKEN_TTL).unwrap()
    }

    /// A transfer of `owner`'s in `status` (staged, provisioned, pushed or active).
    fn transfer_of(&mut self, owner: &TransferOwner, status: TransferStatus) -> Transfer {
        use TransferStatus as S;
        let t = self.store.snapshot_state_as(&snapshot(), owner).unwrap();
        if status == S::Staged {
            return t;
        }
        let tok = self.token(&t.id, TokenScope::ProvisionRuntime);
        self.store
            .provision_runtime(&t.id, Tier::Nano, BUDGET, "forecaster", &tok)
            .unwrap();
        if status == S::Provisioned {
            return self.store.transfer(&t.id).unwrap();
        }
        self.store.push_state_as(&t.id, None, owner).unwrap();
        if status == S::Pushed {
            return self.store.transfer(&t.id).unwrap();
        }
        let tok = self.token(&t.id, TokenScope::Activate);
        self.store.begin_activation(&t.id, &tok).unwrap();
        let t = self.store.complete_activation(&t.id).unwrap();
        assert_eq!(t.status, status);
        t
    }
}

fn snapshot() -> SnapshotInput {
    SnapshotInput {
        source_host: "laptop-7".into(),
        system_prompt: "You forecast inventory.".into(),
        message_history: vec![Message {
            role: "user".into(),
            content: "hi".into(),
        }],
        tool_state: serde_json::json!({}),
        mcp_config: vec![],
    }
}

/// An error as a caller sees it (its text and its shape), with the transfer id written out.
fn seen<T: std::fmt::Debug>(result: Result<T>, id: &str) -> String {
    let e = result.expect_err("the call must be refused");
    assert!(matches!(e, Error::TransferNotFound(_)), "{e:?}");
    format!("{e} | {e:?}").replace(id, "<id>")
}

/// Every owner-checked call `mallory` might make on `id`, each as the caller would see it.
fn attempts(store: &mut Store, id: &str, caller: &TransferOwner, checksum: &str) -> Vec<String> {
    let zeros = "0".repeat(64);
    vec![
        seen(store.get_status_as(id, caller, EventPage::default()), id),
        seen(
            store.get_status_as(
                id,
                caller,
                EventPage {
                    limit: MAX_EVENT_PAGE_LIMIT,
                    before: Some(1),
                },
            ),
            id,
        ),
        seen(store.push_state_as(id, None, caller), id),
        seen(store.push_state_as(id, Some(checksum), caller), id),
        seen(store.push_state_as(id, Some(&zeros), caller), id),
        seen(store.report_client_usage_as(id, 5, "model_tokens", caller), id),
        seen(store.report_client_usage_as(id, BUDGET, "model_tokens", caller), id),
    ]
}

#[test]
fn another_principals_transfer_is_refused_exactly_like_a_missing_one_and_changes_nothing() {
    use TransferStatus as S;
    let mut f = Fixture::new();
    for status in [S::Staged, S::Provisioned, S::Pushed, S::Active] {
        let t = f.transfer_of(&alice(), status);
        let before = f.bytes();
        let foreign = attempts(&mut f.store, &t.id, &mallory(), &t.checksum);
        assert_eq!(f.bytes(), before, "{status}: a refused call changed the database");
        let missing = attempts(&mut f.store, MISSING, &mallory(), &t.checksum);
        assert_eq!(foreign, missing, "{status}: a foreign id must read as a missing one");
        assert_eq!(f.bytes(), before);
    }
}

#[test]
fn the_owner_and_the_operator_act_on_the_transfer() {
    use TransferStatus as S;
    let mut f = Fixture::new();
    // The owner reads it, pushes it and reports on it.
    let t = f.transfer_of(&alice(), S::Provisioned);
    let status = f.store.get_status_as(&t.id, &alice(), EventPage::default()).unwrap();
    assert_eq!(status.transfer.id, t.id);
    assert_eq!(status.budget.unwrap().allocated_micro_usd, BUDGET);
    let pushed = f.store.push_state_as(&t.id, Some(&t.checksum), &alice()).unwrap();
    assert_eq!(pushed.status, S::Pushed);
    let tok = f.token(&t.id, TokenScope::Activate);
    f.store.begin_activation(&t.id, &tok).unwrap();
    f.store.complete_activation(&t.id).unwrap();
    let r = f
        .store
        .report_client_usage_as(&t.id, 7, "model_tokens", &alice())
        .unwrap();
    assert_eq!(r.budget.spent_micro_usd, 7);

    // The operator reads and reports on anyone's transfer (the CLI, stdio) …
    let status = f
        .store
        .get_status_as(&t.id, &TransferOwner::Operator, EventPage::default())
        .unwrap();
    assert_eq!(status.page.events.last().unwrap().kind, EventKind::UsageReported);
    let r = f.store.report_client_usage(&t.id, 3, "model_tokens").unwrap();
    assert_eq!(r.budget.spent_micro_usd, 10);
    // … and pushes it.
    let other = f.transfer_of(&mallory(), S::Provisioned);
    assert_eq!(f.store.push_state(&other.id, None).unwrap().status, S::Pushed);

    // An operator's transfer is the operator's: an API-key principal cannot see it.
    let own = f.transfer_of(&TransferOwner::Operator, S::Staged);
    let before = f.bytes();
    assert!(matches!(
        f.store.get_status_as(&own.id, &alice(), EventPage::default()),
        Err(Error::TransferNotFound(id)) if id == own.id
    ));
    assert_eq!(f.bytes(), before);
}
