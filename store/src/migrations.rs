//! The SQLite schema migrations, the files `store/sql/NNNN_*.sql`. Their PostgreSQL twins
//! `store/sql/postgres/NNNN_*.sql` (same number, same name) are run by `ahp-store-postgres`
//! under a lock hosts share; migration N leaves the same schema on both (its
//! schema-agreement test compares them), so a schema version means one schema everywhere.

/// The SQLite migrations, in order; the database's `user_version` is how many have run.
pub(crate) const SQLITE: &[&str] = &[
    include_str!("../sql/0001_transfers.sql"),
    include_str!("../sql/0002_conversation.sql"),
    include_str!("../sql/0003_principals.sql"),
    include_str!("../sql/0004_sandbox.sql"),
    include_str!("../sql/0005_conversation_audit.sql"),
    include_str!("../sql/0006_transfer_agents.sql"),
    include_str!("../sql/0007_host_held_endpoints.sql"),
    include_str!("../sql/0008_usage_events_by_kind.sql"),
    include_str!("../sql/0009_model_calls.sql"),
    include_str!("../sql/0010_delegation.sql"),
    include_str!("../sql/0011_insertion_order.sql"),
    include_str!("../sql/0012_hosts.sql"),
    include_str!("../sql/0013_commit_ordered_cursors.sql"),
    include_str!("../sql/0014_carried_by_lease.sql"),
    include_str!("../sql/0015_agent_counts.sql"),
    include_str!("../sql/0016_delivery_tries.sql"),
    include_str!("../sql/0017_turn_spend.sql"),
];
