//! `ahp:agent/credentials`: credential references resolved through the vault, allowed only
//! for the refs the guest's own snapshot lists, every attempt audited without its value.

use ahp_store::EventKind;
use ahp_store::snapshot::{MAX_CRED_REF_BYTES, validate_cred_ref};
use serde_json::json;

use crate::sandbox::bindings::ahp::agent::credentials::{Credential, Error, Host};
use crate::sandbox::state::{MAX_RESOLUTIONS_PER_TURN, SandboxState};
use crate::vault;

impl Host for SandboxState {
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
        } else if !self.allowed_refs.contains(&cred_ref) {
            Some("not listed by any MCP server of this transfer's snapshot".to_owned())
        } else {
            None
        };
        if let Some(reason) = refusal {
            self.audit(EventKind::CredentialDenied, &cred_ref, Some(&reason));
            return Err(Error::NotAllowed(reason));
        }
        match self.vault.resolve(&cred_ref) {
            Ok(value) => {
                self.audit(EventKind::CredentialResolved, &cred_ref, None);
                Ok(Credential { cred_ref, value })
            }
            Err(vault::Error::NotFound(_)) => {
                self.audit(EventKind::CredentialDenied, &cred_ref, Some("not in the vault"));
                Err(Error::NotFound)
            }
            Err(e) => {
                tracing::error!(transfer = %self.transfer, error = %e, "vault failure");
                self.audit(EventKind::CredentialDenied, &cred_ref, Some("vault unavailable"));
                Err(Error::Unavailable(e.to_string()))
            }
        }
    }
}

impl SandboxState {
    fn audit(&self, kind: EventKind, cred_ref: &str, reason: Option<&str>) {
        // The ref comes from the guest: keep at most a bounded prefix of it in the log.
        let mut shown: String = cred_ref.chars().take(MAX_CRED_REF_BYTES).collect();
        if shown.len() < cred_ref.len() {
            shown.push('…');
        }
        let mut detail = json!({ "credRef": shown });
        if let Some(reason) = reason {
            detail["reason"] = json!(reason);
        }
        if let Err(e) = self.db(|db| db.record_event(&self.transfer, kind, detail)) {
            tracing::error!(transfer = %self.transfer, error = %e, "could not audit a credential resolution");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::state::test_support::state;

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
}
