// The schema migrations, in order: each number and file name once, for both backends. The SQLite
// file is `store/sql/NAME`, its PostgreSQL twin `store/sql/postgres/NAME` (same number, same
// name; migration N leaves the same schema on both). Included by `store/src/migrations.rs` and
// `store-postgres/src/migrations.rs`, each with its own `migrations!` macro. A new migration is
// one line here and its two files.
migrations![
    1 "0001_transfers.sql",
    2 "0002_conversation.sql",
    3 "0003_principals.sql",
    4 "0004_sandbox.sql",
    5 "0005_conversation_audit.sql",
    6 "0006_transfer_agents.sql",
    7 "0007_host_held_endpoints.sql",
    8 "0008_usage_events_by_kind.sql",
    9 "0009_model_calls.sql",
    10 "0010_delegation.sql",
    11 "0011_insertion_order.sql",
    12 "0012_hosts.sql",
    13 "0013_commit_ordered_cursors.sql",
    14 "0014_carried_by_lease.sql",
    15 "0015_agent_counts.sql",
    16 "0016_delivery_tries.sql",
    17 "0017_turn_spend.sql",
    18 "0018_token_issuers.sql",
    19 "0019_mcp_tasks.sql",
    20 "0020_mcp_call_tasks.sql",
    21 "0021_mcp_app_carrier.sql",
    22 "0022_goal_stalled_attention.sql",
]
