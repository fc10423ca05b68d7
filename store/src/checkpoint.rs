//! Checkpoints: an agent's durable working memory, one blob per transfer.
//!
//! The sandbox saves what the guest hands its `checkpoint.save`; the size is bounded by the
//! transfer's tier ([`TierLimits::checkpoint_bytes`](crate::TierLimits::checkpoint_bytes)),
//! checked here as well as in the host so no caller can store more.

use ahp_store_sql::{OptionalExtension, Tx};

use crate::clock::Timestamp;
use crate::db::Store;
use crate::error::{Error, Result};
use crate::transfer::{self, Transfer};

/// A saved checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The bytes the guest saved.
    pub state: Vec<u8>,
    /// When they were saved.
    pub saved_at: Timestamp,
}

impl Store {
    /// Replaces `transfer`'s checkpoint with `state`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] if the transfer has no tier yet or `state` is larger than its
    /// tier's `checkpoint_bytes`; [`Error::TransferNotFound`]; [`Error::CarriedElsewhere`] when
    /// another host carries the transfer's agent now (this one lost it to a takeover or a move).
    pub fn save_checkpoint(&mut self, transfer: &str, state: &[u8]) -> Result<()> {
        let t = self.transfer(transfer)?;
        check_size(&t, state)?;
        let host = self.host_id.clone();
        self.write_at(|tx, now| put(tx, transfer, &host, state, now))
    }

    /// `transfer`'s checkpoint, if one was saved.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed id.
    pub fn load_checkpoint(&mut self, transfer: &str) -> Result<Option<Checkpoint>> {
        transfer::check_id(transfer)?;
        Ok(self
            .autocommit()
            .prepare_cached("SELECT state, saved_at FROM checkpoints WHERE transfer_id = ?1")?
            .query_row([transfer], |r| {
                Ok(Checkpoint {
                    state: r.get(0)?,
                    saved_at: Timestamp::from_micros(r.get(1)?),
                })
            })
            .optional()?)
    }
}

/// Refuses `state` unless `t` has a tier whose `checkpoint_bytes` it fits in.
pub(crate) fn check_size(t: &Transfer, state: &[u8]) -> Result<()> {
    let tier = t
        .tier
        .ok_or_else(|| Error::invalid("transfer", format!("{} has no tier yet", t.id)))?;
    let max = tier.limits().checkpoint_bytes;
    if state.len() as u64 > max {
        return Err(Error::invalid(
            "checkpoint",
            format!("is {} bytes; the {tier} tier allows {max}", state.len()),
        ));
    }
    Ok(())
}

/// Replaces `transfer`'s checkpoint with `state` in `tx`, if `host` still carries it.
pub(crate) fn put(tx: &Tx<'_>, transfer: &str, host: &str, state: &[u8], now: Timestamp) -> Result<()> {
    crate::hosts::check_carries(tx, transfer, host)?;
    tx.prepare_cached(
        "INSERT INTO checkpoints (transfer_id, state, saved_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (transfer_id) DO UPDATE SET state = ?2, saved_at = ?3",
    )?
    .execute((transfer, state, now.as_micros()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::*;

    fn provisioned(store: &mut Store, key: &TokenKey, tier: Tier) -> String {
        let t = store.snapshot_state(&crate::testing::bare_snapshot()).unwrap();
        let tok =
            issue_transfer_token(key, &t.id, TokenScope::ProvisionRuntime, store.now(), DEFAULT_TOKEN_TTL).unwrap();
        store.provision_runtime(&t.id, tier, 1_000, "forecaster", &tok).unwrap();
        t.id
    }

    #[test]
    fn saves_replaces_and_bounds_by_tier() {
        let key = TokenKey::random();
        let mut s = crate::testing::store().unwrap().with_token_key(key.clone());
        let id = provisioned(&mut s, &key, Tier::Nano);
        assert_eq!(s.load_checkpoint(&id).unwrap(), None);
        s.save_checkpoint(&id, b"one").unwrap();
        s.save_checkpoint(&id, b"two").unwrap();
        assert_eq!(s.load_checkpoint(&id).unwrap().unwrap().state, b"two");
        let max = Tier::Nano.limits().checkpoint_bytes as usize;
        s.save_checkpoint(&id, &vec![7; max]).unwrap();
        let err = s.save_checkpoint(&id, &vec![7; max + 1]).unwrap_err();
        assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
        assert_eq!(s.load_checkpoint(&id).unwrap().unwrap().state.len(), max);
    }
}
