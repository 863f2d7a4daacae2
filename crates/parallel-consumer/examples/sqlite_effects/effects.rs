//! Idempotent effects: each effect and the id of the event that caused it
//! are written in one SQLite transaction, and the event id is unique. A
//! redelivered record (after a crash between the effect and the offset
//! commit, or after a rebalance) finds its id already there and changes
//! nothing.
//!
//! The effect here is a balance change: a record's payload is
//! `ACCOUNT:DELTA`, for example `alice:-30`.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// What [`EffectStore::apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The effect was written.
    Done,
    /// The event was seen before: nothing changed.
    Duplicate,
}

/// Why an effect could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum EffectError {
    #[error("payload is not ACCOUNT:DELTA: {0:?}")]
    BadPayload(String),
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// A balance change parsed from a record payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub account: String,
    pub delta: i64,
}

impl Change {
    pub fn parse(payload: &[u8]) -> Result<Change, EffectError> {
        let text = String::from_utf8_lossy(payload);
        let bad = || EffectError::BadPayload(text.to_string());
        let (account, delta) = text.split_once(':').ok_or_else(bad)?;
        let delta = delta.trim().parse().map_err(|_| bad())?;
        if account.is_empty() {
            return Err(bad());
        }
        Ok(Change {
            account: account.to_string(),
            delta,
        })
    }
}

pub struct EffectStore {
    conn: Connection,
}

impl EffectStore {
    pub fn open(path: &str) -> Result<EffectStore, EffectError> {
        Self::init(Connection::open(path)?)
    }

    /// Opens a database that several processes write at once: WAL journal
    /// (readers do not block the writer) and a busy timeout (a writer waits
    /// for another process's transaction instead of failing at once).
    pub fn open_shared(path: &str, busy_timeout: Duration) -> Result<EffectStore, EffectError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(busy_timeout)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        Self::init(conn)
    }

    pub fn open_in_memory() -> Result<EffectStore, EffectError> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(conn: Connection) -> Result<EffectStore, EffectError> {
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS processed_events (
                 event_id TEXT PRIMARY KEY
             );
             CREATE TABLE IF NOT EXISTS balances (
                 account TEXT PRIMARY KEY,
                 balance INTEGER NOT NULL
             );",
        )?;
        Ok(EffectStore { conn })
    }

    /// Applies `change` for `event_id` unless that event was applied before.
    pub fn apply(&mut self, event_id: &str, change: &Change) -> Result<Applied, EffectError> {
        // IMMEDIATE takes the write lock up front, so a concurrent writer
        // makes this wait (busy timeout) rather than fail on upgrade.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let inserted = tx.execute(
            "INSERT INTO processed_events (event_id) VALUES (?1) ON CONFLICT DO NOTHING",
            params![event_id],
        )?;
        if inserted == 0 {
            // Dropping the transaction rolls it back (it changed nothing).
            return Ok(Applied::Duplicate);
        }
        tx.execute(
            "INSERT INTO balances (account, balance) VALUES (?1, ?2)
             ON CONFLICT (account) DO UPDATE SET balance = balance + excluded.balance",
            params![change.account, change.delta],
        )?;
        tx.commit()?;
        Ok(Applied::Done)
    }

    pub fn balance(&self, account: &str) -> Result<Option<i64>, EffectError> {
        Ok(self
            .conn
            .query_row(
                "SELECT balance FROM balances WHERE account = ?1",
                params![account],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// The ids of all applied events in the order their effects were
    /// committed (rowids grow with each insert and rows are never deleted;
    /// writers are serialized by the database lock).
    pub fn events_in_applied_order(&self) -> Result<Vec<String>, EffectError> {
        let mut stmt = self
            .conn
            .prepare("SELECT event_id FROM processed_events ORDER BY rowid")?;
        let ids = stmt
            .query_map([], |row| row.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(ids)
    }

    pub fn processed_events(&self) -> Result<i64, EffectError> {
        Ok(self
            .conn
            .query_row("SELECT COUNT(*) FROM processed_events", [], |row| {
                row.get(0)
            })?)
    }
}
