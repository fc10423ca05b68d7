//! Upgrading a database written before the conversation domain existed.

use rusqlite::Connection;

use super::*;

#[test]
fn a_schema_1_database_gains_the_conversation_tables_and_keeps_its_transfers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        // The fixture: exactly what a build with only the transfers migration left behind.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(include_str!("../../../sql/0001_transfers.sql"))
            .unwrap();
        conn.execute(
            "INSERT INTO transfers (id, status, source_host, system_prompt, message_history, message_count,
                                    tool_state, mcp_config, checksum, created_at, updated_at)
             VALUES ('tr_000000000000000000000001', 'staged', 'laptop', 'p', '[]', 0, '{}', '[]', 'c', 1, 1)",
            [],
        )
        .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
    }
    let mut store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), Store::supported_schema_version());
    let transfers: i64 = store
        .connection()
        .query_row("SELECT count(*) FROM transfers", [], |r| r.get(0))
        .unwrap();
    assert_eq!(transfers, 1);
    let alice = Caller::full("account:alice").unwrap();
    let a = store.create_agent(&alice, &card("upgraded"), "k").unwrap().value;
    assert_eq!(store.get_agent(&alice, &a.id).unwrap().card.handle, "upgraded");
}
