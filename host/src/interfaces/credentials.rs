//! `ahp:agent/credentials`: credential references resolved through the vault, every attempt
//! audited without its value.
//!
//! A value is handed to the guest only where the operator's policy says so: the snapshot lists
//! the ref for a server, the policy binds that very ref to that server, *and* marks it
//! `reveal`. A credential the policy binds without revealing is still used — the host injects
//! it into the server's requests (`crate::egress`) — but never enters the sandbox. A value
//! whose `credential_resolved` audit row cannot be written is not handed out. During an
//! activation the row is held for the activation's end ([`Journal`](super::Journal)) and
//! committed before anything the guest does can leave the sandbox.

use ahp_store::EventKind;
use ahp_store::snapshot::{MAX_CRED_REF_BYTES, validate_cred_ref};
use serde_json::json;

use super::bindings::v0_3::ahp::agent::credentials::{Credential, Error, Host};
use super::context::{AgentCtx, MAX_RESOLUTIONS_PER_TURN};
use crate::vault;

impl Host for AgentCtx {
    fn resolve(&mut self, cred_ref: String) -> Result<Credential, Error> {
        self.calls.resolutions += 1;
        if self.calls.resolutions > MAX_RESOLUTIONS_PER_TURN {
            // Past the bound nothing more is audited: the guest is looping, not asking.
            return Err(Error::NotAllowed(format!(
                "more than {MAX_RESOLUTIONS_PER_TURN} resolutions in one turn"
            )));
        }
        let refusal = if let Err(rule) = validate_cred_ref(&cred_ref) {
            Some(format!("malformed reference: {rule}"))
        } else if !self.snapshot.mcp_config.iter().any(|s| s.cred_ref == cred_ref) {
            Some("not listed by any MCP server of this transfer's snapshot".to_owned())
        } else if !self.grants.binds(&cred_ref) {
            Some("the operator's policy does not bind it to this transfer's servers".to_owned())
        } else if !self.grants.reveals(&cred_ref) {
            Some("the operator's policy injects it into its server's requests and does not reveal it".to_owned())
        } else {
            None
        };
        if let Some(reason) = refusal {
            let _ = self.audit(EventKind::CredentialDenied, &cred_ref, Some(&reason));
            return Err(Error::NotAllowed(reason));
        }
        match self.vault.resolve(&cred_ref) {
            Ok(value) => match self.audit(EventKind::CredentialResolved, &cred_ref, None) {
                Ok(()) => Ok(Credential { cred_ref, value }),
                // Not audited, not handed out.
                Err(e) => Err(Error::Unavailable(format!("the resolution could not be audited: {e}"))),
            },
            Err(vault::Error::NotFound(_)) => {
                let _ = self.audit(EventKind::CredentialDenied, &cred_ref, Some("not in the vault"));
                Err(Error::NotFound)
            }
            Err(e) => {
                tracing::error!(transfer = %self.transfer, error = %e, "vault failure");
                let _ = self.audit(EventKind::CredentialDenied, &cred_ref, Some("vault unavailable"));
                Err(Error::Unavailable(e.to_string()))
            }
        }
    }
}

impl AgentCtx {
    /// Records a resolution attempt (never the value).
    fn audit(&self, kind: EventKind, cred_ref: &str, reason: Option<&str>) -> Result<(), ahp_store::Error> {
        // The ref comes from the guest: keep at most a bounded prefix of it in the log.
        let mut shown: String = cred_ref.chars().take(MAX_CRED_REF_BYTES).collect();
        if shown.len() < cred_ref.len() {
            shown.push('…');
        }
        let mut detail = json!({ "credRef": shown });
        if let Some(reason) = reason {
            detail["reason"] = json!(reason);
        }
        // During an activation the row is held for its end (see `Journal`): recorded before
        // anything the guest does can leave the sandbox.
        if self.journal.event(kind, detail.clone()) {
            return Ok(());
        }
        let recorded = self.db(|db| db.record_event(&self.transfer, kind, detail));
        if let Err(e) = &recorded {
            tracing::error!(transfer = %self.transfer, error = %e, "could not audit a credential resolution");
        }
        recorded.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interfaces::context::test_support::state;

    #[test]
    fn resolves_only_listed_refs_and_bounds_the_calls() {
        let (mut st, dir) = state(0, ahp_store::Tier::Nano);
        std::fs::write(dir.path().join("vault/inventory-api"), b"sk").unwrap();
        std::fs::write(dir.path().join("vault/unlisted"), b"other").unwrap();
        assert_eq!(st.resolve("inventory-api".into()).unwrap().value, b"sk");
        assert!(matches!(st.resolve("unlisted".into()), Err(Error::NotAllowed(_))));
        assert!(matches!(
            st.resolve("../vault/inventory-api".into()),
            Err(Error::NotAllowed(_))
        ));
        let long = "a".repeat(10_000);
        assert!(matches!(st.resolve(long), Err(Error::NotAllowed(_))));
        let events = st.db(|db| db.get_status(&st.transfer)).unwrap().events;
        let denied: Vec<_> = events
            .iter()
            .filter(|e| e.kind == EventKind::CredentialDenied)
            .collect();
        assert_eq!(denied.len(), 3);
        assert!(
            denied[2].detail["credRef"].as_str().unwrap().len() < 200,
            "a long ref is cut in the log"
        );
        for _ in 4..MAX_RESOLUTIONS_PER_TURN {
            st.resolve("inventory-api".into()).unwrap();
        }
        assert!(matches!(st.resolve("inventory-api".into()), Err(Error::NotAllowed(_))));
    }

    #[test]
    fn the_policy_decides_what_is_revealed_and_an_unaudited_value_is_not_handed_out() {
        let (mut st, dir) = state(0, ahp_store::Tier::Nano);
        std::fs::write(dir.path().join("vault/inventory-api"), b"sk").unwrap();
        let mcp_config = st.snapshot.mcp_config.clone();
        let grants = |credential: serde_json::Value| {
            let policy: crate::policy::Policy = serde_json::from_value(serde_json::json!({ "servers": [
                { "server": "https://inventory.example.com", "credential": credential },
            ]}))
            .unwrap();
            std::sync::Arc::new(policy.grants(&mcp_config))
        };
        // Bound and injected, not revealed.
        st.grants = grants(serde_json::json!({ "credRef": "inventory-api" }));
        assert!(
            matches!(st.resolve("inventory-api".into()), Err(Error::NotAllowed(r)) if r.contains("does not reveal"))
        );
        // The policy binds another ref to that server: the snapshot's cannot be used.
        st.grants = grants(serde_json::json!({ "credRef": "crm-key", "reveal": true }));
        assert!(matches!(st.resolve("inventory-api".into()), Err(Error::NotAllowed(r)) if r.contains("does not bind")));
        // Revealed — unless its audit cannot be written.
        st.grants = grants(serde_json::json!({ "credRef": "inventory-api", "reveal": true }));
        assert_eq!(st.resolve("inventory-api".into()).unwrap().value, b"sk");
        st.transfer = "tr_not_in_the_store".into();
        assert!(matches!(st.resolve("inventory-api".into()), Err(Error::Unavailable(_))));
    }
}
