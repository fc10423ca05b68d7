//! The SQLite schema migrations, the files `store/sql/NNNN_*.sql`. Their PostgreSQL twins
//! `store/sql/postgres/NNNN_*.sql` (same number, same name) are run by `ahp-store-postgres`
//! under a lock hosts share; migration N leaves the same schema on both (its
//! schema-agreement test compares them), so a schema version means one schema everywhere.

/// The SQLite migrations, in order (the one list: `store/sql/migrations.rs`); the database's
/// `user_version` is how many have run.
pub(crate) const SQLITE: &[&str] = {
    macro_rules! migrations {
        ($($version:literal $name:literal),* $(,)?) => {
            &[$(include_str!(concat!("../sql/", $name))),*]
        };
    }
    include!("../sql/migrations.rs")
};
