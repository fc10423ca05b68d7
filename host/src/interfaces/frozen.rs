//! The interfaces every frozen version of `ahp:agent` shares with the current one unchanged
//! but for the generated types — `snapshot`, `credentials`, `checkpoint` — written once for
//! `v0_1` and `v0_2`: each function forwards to its `@0.3.0` twin, converting only the types,
//! so the versions cannot drift apart.

/// Implements the frozen `snapshot`, `credentials` and `checkpoint` `Host` traits of the module
/// the caller imports as `old`, forwarding to the current ones it imports as `new`.
macro_rules! forward_unchanged_interfaces {
    () => {
        impl old::snapshot::Host for AgentCtx {
            fn transfer_id(&mut self) -> String {
                new::snapshot::Host::transfer_id(self)
            }

            fn system_prompt(&mut self) -> String {
                new::snapshot::Host::system_prompt(self)
            }

            fn message_count(&mut self) -> u32 {
                new::snapshot::Host::message_count(self)
            }

            fn messages(
                &mut self,
                after: u32,
                limit: u32,
            ) -> Result<Vec<old::snapshot::Message>, old::snapshot::Error> {
                match new::snapshot::Host::messages(self, after, limit) {
                    Ok(page) => Ok(page
                        .into_iter()
                        .map(|m| old::snapshot::Message {
                            role: m.role,
                            content: m.content,
                        })
                        .collect()),
                    Err(new::snapshot::Error::LimitTooLarge(n)) => Err(old::snapshot::Error::LimitTooLarge(n)),
                }
            }

            fn tool_state(&mut self) -> String {
                new::snapshot::Host::tool_state(self)
            }

            fn mcp_servers(&mut self) -> Vec<old::snapshot::McpServer> {
                new::snapshot::Host::mcp_servers(self)
                    .into_iter()
                    .map(|s| old::snapshot::McpServer {
                        server: s.server,
                        cred_ref: s.cred_ref,
                    })
                    .collect()
            }
        }

        impl old::credentials::Host for AgentCtx {
            fn resolve(&mut self, cred_ref: String) -> Result<old::credentials::Credential, old::credentials::Error> {
                use new::credentials::Error as E;
                match new::credentials::Host::resolve(self, cred_ref) {
                    Ok(c) => Ok(old::credentials::Credential {
                        cred_ref: c.cred_ref,
                        value: c.value,
                    }),
                    Err(E::NotAllowed(m)) => Err(old::credentials::Error::NotAllowed(m)),
                    Err(E::NotFound) => Err(old::credentials::Error::NotFound),
                    Err(E::Unavailable(m)) => Err(old::credentials::Error::Unavailable(m)),
                }
            }
        }

        impl old::checkpoint::Host for AgentCtx {
            fn save(&mut self, state: Vec<u8>) -> Result<(), old::checkpoint::Error> {
                new::checkpoint::Host::save(self, state).map_err(checkpoint_error)
            }

            fn load(&mut self) -> Result<Option<Vec<u8>>, old::checkpoint::Error> {
                new::checkpoint::Host::load(self).map_err(checkpoint_error)
            }
        }

        fn checkpoint_error(e: new::checkpoint::Error) -> old::checkpoint::Error {
            match e {
                new::checkpoint::Error::TooLarge(n) => old::checkpoint::Error::TooLarge(n),
                new::checkpoint::Error::Unavailable(m) => old::checkpoint::Error::Unavailable(m),
            }
        }
    };
}

pub(super) use forward_unchanged_interfaces;
