//! `ahp-guest` — what an agent author depends on to build an ahp agent.
//!
//! An ahp agent is a WebAssembly component (target `wasm32-wasip2`) that an ahp host resumes
//! inside a metered sandbox after a session was transferred to it. This crate hides the raw WIT
//! bindings of the `ahp:agent@0.1.0` world and offers an idiomatic API instead:
//!
//! - [`snapshot`]: the session being continued — prompt, history (paged for you), tool state,
//!   MCP servers;
//! - [`credentials`]: resolve the credential references of those servers through the host's vault;
//! - [`metering`]: the budget, and spend the host cannot see (model tokens);
//! - [`checkpoint`]: durable working memory, with serde helpers;
//! - the [`Agent`] trait and the [`export_agent!`] macro that make a type the component's entry
//!   point.
//!
//! ```no_run
//! use ahp_guest::{Agent, checkpoint, snapshot};
//!
//! struct Echo;
//!
//! impl Agent for Echo {
//!     fn resume() -> Result<(), Box<dyn std::error::Error>> {
//!         let last = snapshot::messages().last().map(|m| m.content);
//!         checkpoint::save(&last)?;
//!         Ok(())
//!     }
//! }
//!
//! ahp_guest::export_agent!(Echo);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` in a crate of type `cdylib`.

pub mod checkpoint;
pub mod credentials;
pub mod metering;
pub mod snapshot;

/// The raw bindings generated from `wit/` (not a stable API: use the modules above).
#[doc(hidden)]
#[allow(missing_docs, unreachable_pub, unsafe_code, clippy::all)]
pub mod wit {
    wit_bindgen::generate!({
        path: "../wit",
        world: "ahp:agent/agent",
        pub_export_macro: true,
        export_macro_name: "__export_agent_world",
        default_bindings_module: "ahp_guest::wit",
    });
}

/// An agent: the code the host runs when it activates a transfer.
pub trait Agent {
    /// Continues the session. Called once per activation, inside the sandbox.
    ///
    /// Return `Ok(())` once the agent has resumed: the host then marks the transfer `active`,
    /// which tells the orchestrator it may stop the source loop. An error fails the activation;
    /// its message is recorded for the orchestrator, who may retry with a fresh token.
    ///
    /// # Errors
    ///
    /// Whatever stops the agent from resuming; use `?` freely.
    fn resume() -> Result<(), Box<dyn std::error::Error>>;
}

/// Makes `$agent` (a type implementing [`Agent`]) the component's entry point. Use it once,
/// at the root of the agent crate.
///
/// ```no_run
/// struct Noop;
/// impl ahp_guest::Agent for Noop {
///     fn resume() -> Result<(), Box<dyn std::error::Error>> {
///         Ok(())
///     }
/// }
/// ahp_guest::export_agent!(Noop);
/// ```
#[macro_export]
macro_rules! export_agent {
    ($agent:ty) => {
        #[doc(hidden)]
        struct __AhpAgentExport;

        impl $crate::wit::Guest for __AhpAgentExport {
            fn resume() -> ::core::result::Result<(), ::std::string::String> {
                <$agent as $crate::Agent>::resume().map_err(|e| e.to_string())
            }
        }

        $crate::wit::__export_agent_world!(__AhpAgentExport with_types_in $crate::wit);
    };
}
