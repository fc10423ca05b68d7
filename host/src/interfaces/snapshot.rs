//! `ahp:agent/snapshot`: the session the guest resumes, read-only, history paged.

use super::AgentCtx;
use super::bindings::v0_3::ahp::agent::snapshot::{Error, Host, McpServer, Message};

/// Largest page of history one `messages` call returns. 256 messages of at most 256 KiB each
/// is already more than a guest should copy at once; the iterator in the SDK asks for this.
pub const MAX_PAGE: u32 = 256;

impl Host for AgentCtx {
    fn transfer_id(&mut self) -> String {
        self.transfer.clone()
    }

    fn system_prompt(&mut self) -> String {
        self.snapshot.system_prompt.clone()
    }

    fn message_count(&mut self) -> u32 {
        u32::try_from(self.snapshot.message_history.len()).unwrap_or(u32::MAX)
    }

    fn messages(&mut self, after: u32, limit: u32) -> Result<Vec<Message>, Error> {
        if limit > MAX_PAGE {
            return Err(Error::LimitTooLarge(MAX_PAGE));
        }
        let history = &self.snapshot.message_history;
        let start = (after as usize).min(history.len());
        let end = start.saturating_add(limit as usize).min(history.len());
        Ok(history[start..end]
            .iter()
            .map(|m| Message {
                role: m.role.clone(),
                content: m.content.clone(),
            })
            .collect())
    }

    fn tool_state(&mut self) -> String {
        self.snapshot.tool_state.to_string()
    }

    fn mcp_servers(&mut self) -> Vec<McpServer> {
        self.snapshot
            .mcp_config
            .iter()
            .map(|s| McpServer {
                server: s.server.clone(),
                cred_ref: s.cred_ref.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interfaces::context::test_support::state;

    #[test]
    fn pages_the_history_and_bounds_the_page() {
        let (mut st, _dir) = state(600, ahp_store::Tier::Nano);
        assert_eq!(st.message_count(), 600);
        assert!(matches!(
            st.messages(0, MAX_PAGE + 1),
            Err(Error::LimitTooLarge(MAX_PAGE))
        ));
        let first = st.messages(0, MAX_PAGE).unwrap();
        assert_eq!(first.len(), 256);
        assert_eq!(first[0].content, "m0");
        let last = st.messages(512, MAX_PAGE).unwrap();
        assert_eq!(last.len(), 88);
        assert_eq!(last[87].content, "m599");
        assert!(st.messages(600, 10).unwrap().is_empty());
        assert!(st.messages(u32::MAX, MAX_PAGE).unwrap().is_empty());
        assert_eq!(st.tool_state(), r#"{"k":1}"#);
        assert_eq!(st.mcp_servers()[0].cred_ref, "inventory-api");
    }
}
