//! `ahp:agent/checkpoint`: durable working memory, bounded by the tier; saves and loads are
//! counted per turn ([`MAX_SAVES_PER_TURN`], [`MAX_LOADS_PER_TURN`]).

use super::bindings::v0_3::ahp::agent::checkpoint::{Error, Host};
use super::context::{AgentCtx, MAX_LOADS_PER_TURN, MAX_SAVES_PER_TURN};

impl Host for AgentCtx {
    fn save(&mut self, state: Vec<u8>) -> Result<(), Error> {
        let max = self.checkpoint_bytes;
        if state.len() as u64 > max {
            return Err(Error::TooLarge(max));
        }
        self.calls.saves += 1;
        if self.calls.saves > MAX_SAVES_PER_TURN {
            return Err(Error::Unavailable(format!(
                "more than {MAX_SAVES_PER_TURN} saves in one turn"
            )));
        }
        // During an activation the save is held for its end (see `Journal`).
        let Err(state) = self.journal.save(state) else {
            return Ok(());
        };
        self.db(|db| db.save_checkpoint(&self.transfer, &state))
            .map_err(|e| Error::Unavailable(e.to_string()))
    }

    fn load(&mut self) -> Result<Option<Vec<u8>>, Error> {
        self.calls.loads += 1;
        if self.calls.loads > MAX_LOADS_PER_TURN {
            return Err(Error::Unavailable(format!(
                "more than {MAX_LOADS_PER_TURN} loads in one turn"
            )));
        }
        if let Some(held) = self.journal.checkpoint() {
            return Ok(Some(held));
        }
        self.db(|db| db.load_checkpoint(&self.transfer))
            .map(|c| c.map(|c| c.state))
            .map_err(|e| Error::Unavailable(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interfaces::context::test_support::state;

    #[test]
    fn saves_up_to_the_tier_ceiling_and_refuses_past_it() {
        let (mut st, _dir) = state(0, ahp_store::Tier::Nano);
        assert!(matches!(st.load(), Ok(None)));
        let max = ahp_store::Tier::Nano.limits().checkpoint_bytes;
        assert!(matches!(st.save(vec![1; max as usize + 1]), Err(Error::TooLarge(m)) if m == max));
        st.save(vec![2; max as usize]).unwrap();
        assert_eq!(st.load().unwrap().unwrap().len(), max as usize);
        for _ in 1..MAX_SAVES_PER_TURN {
            st.save(b"x".to_vec()).unwrap();
        }
        assert!(matches!(st.save(b"y".to_vec()), Err(Error::Unavailable(_))));
        assert_eq!(st.load().unwrap().unwrap(), b"x");
    }

    #[test]
    fn loads_are_bounded_per_turn() {
        let (mut st, _dir) = state(0, ahp_store::Tier::Nano);
        st.save(b"memory".to_vec()).unwrap();
        for _ in 0..MAX_LOADS_PER_TURN {
            assert_eq!(st.load().unwrap().unwrap(), b"memory");
        }
        let past = st.load().unwrap_err();
        assert!(
            matches!(&past, Error::Unavailable(m) if m == "more than 64 loads in one turn"),
            "{past:?}"
        );
        // The next turn starts its count again.
        st.start_turn(None);
        assert_eq!(st.load().unwrap().unwrap(), b"memory");
    }
}
