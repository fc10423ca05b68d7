//! The operations the surfaces share: one method per operation, written once, which the MCP
//! tools, the guest interfaces, the console and the CLI adapt (arguments in, a view out) instead of each
//! redoing the chores around a store call; and who the caller is ([`identity`]: one
//! constructor per kind of caller, for every surface). Three domains: [`Transfers`] (the
//! Handoff Protocol), [`Conversations`] and [`Delegation`].
//!
//! An operation, given the locked store and the host's carriers, renews the acting agent's
//! endpoint in one order (a keyed write after its call, unless it was a replay, so that an
//! exact retry still recovers the original after the endpoint was replaced; any other call
//! before it; never for the host's own caller, whose carried endpoints the host keeps), makes
//! the store call, and schedules exactly the agents the store reports the call woke
//! ([`Mutation::woken`], as a post reports [`Posted::woken`]). It returns the store's
//! [`Mutation`] for a write and a [`Page`] for a list. Like [`posting`] (the one post path), it runs where
//! the store is already locked: a blocking thread or a turn's store call, never a tokio worker
//! waiting on it.
//!
//! [`Mutation`]: ahp_store::conversation::Mutation
//! [`Mutation::woken`]: ahp_store::conversation::Mutation::woken
//! [`Posted::woken`]: ahp_store::conversation::Posted::woken

pub mod conversations;
pub mod delegation;
pub mod identity;
pub mod posting;
pub mod transfers;

pub use conversations::Conversations;
pub use delegation::Delegation;
pub use transfers::Transfers;

use ahp_store::Store;
use ahp_store::conversation::{Acting, Caller, ConversationResult};

use crate::carrier::Carriers;

/// The operations over a locked store, scheduling whom they wake on the host's carriers: what
/// a surface holds for one call, and opens as the domain it needs.
pub struct Ops<'a> {
    store: &'a mut Store,
    carriers: &'a dyn Carriers,
}

impl<'a> Ops<'a> {
    /// The operations over `store`, scheduling on `carriers`.
    pub fn new(store: &'a mut Store, carriers: &'a dyn Carriers) -> Self {
        Self { store, carriers }
    }

    /// The conversation operations.
    pub fn conversations(&mut self) -> Conversations<'_> {
        Conversations(self.reborrow())
    }

    /// The delegation operations.
    pub fn delegation(&mut self) -> Delegation<'_> {
        Delegation(self.reborrow())
    }

    /// The transfer operations (they wake no agent: `carriers` go unused).
    pub fn transfers(&mut self) -> Transfers<'_> {
        Transfers(self.reborrow())
    }

    fn reborrow(&mut self) -> Ops<'_> {
        Ops {
            store: &mut *self.store,
            carriers: self.carriers,
        }
    }

    /// Renews the endpoint `acting` acts through (an agent through its exact endpoint), unless
    /// the host itself is the caller: the host keeps the leases of the endpoints it carries.
    fn renew(&mut self, caller: &Caller, acting: &Acting) -> ConversationResult<()> {
        match acting {
            Acting::Agent(a) if !caller.is_host() => self.store.touch_endpoint(caller, a).map(drop),
            _ => Ok(()),
        }
    }
}

/// One page of a list, and the cursor of the next (`None` on the last page): an id for most
/// lists, a sequence number for a transcript or an inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T, C = String> {
    /// The items, in the list's order.
    pub items: Vec<T>,
    /// What to pass as `after` for the next page: the last item's cursor when the page is full.
    pub next_after: Option<C>,
}

impl<T, C> Page<T, C> {
    /// The page `items` of a list asked for `limit` items: another may follow only if it is
    /// full.
    pub fn of(items: Vec<T>, limit: usize, cursor: impl Fn(&T) -> C) -> Self {
        let next_after = (items.len() == limit).then(|| items.last().map(&cursor)).flatten();
        Self { items, next_after }
    }
}
