//! `ahp-guest` — what an agent author depends on to build an ahp agent.
//!
//! An ahp agent is a WebAssembly component (target `wasm32-wasip2`) that an ahp host resumes
//! inside a metered sandbox after a session was transferred to it, then keeps running: people
//! and other agents post to it, and the host runs one conversation *turn* in the sandbox each
//! time messages wait for it. This crate hides the raw WIT bindings of the `ahp:agent@0.3.0`
//! world (`wit/agent.wit`) and offers an idiomatic API instead:
//!
//! - [`snapshot`]: the session being continued — prompt, history (paged for you), tool state,
//!   MCP servers;
//! - [`credentials`]: resolve the credential references of those servers through the host's vault;
//! - [`model`]: think with the operator's models through the host's gateway, paid from the
//!   budget by reservation (no key in the sandbox);
//! - [`tools`]: the MCP tools of those servers, called by the host as MCP client;
//! - [`agent_loop`]: model → tool calls → results → model, with a step cap;
//! - [`metering`]: the budget, and spend the host cannot see;
//! - [`checkpoint`]: durable working memory, with serde helpers;
//! - [`conversations`]: the turn's wake, its inbox (paged for you), transcripts, replies;
//! - [`delegation`]: tasks for other agents of the same owner, their results, waits that wake
//!   the turn when they are done, and goals;
//! - the [`Agent`] trait and the [`export_agent!`] macro that make a type the component's entry
//!   point.
//!
//! An agent that remembers the last message of its session and answers every message it is
//! sent, counting them in its checkpoint:
//!
//! ```no_run
//! use ahp_guest::{Agent, checkpoint, conversations, snapshot};
//!
//! struct Echo;
//!
//! impl Agent for Echo {
//!     fn resume() -> Result<(), Box<dyn std::error::Error>> {
//!         let last = snapshot::messages().last().map(|m| m.content);
//!         checkpoint::save(&(last, 0_u64))?;
//!         Ok(())
//!     }
//!
//!     fn turn() -> Result<(), Box<dyn std::error::Error>> {
//!         // After a host restart `turn` runs in a fresh sandbox without `resume`.
//!         let (last, mut answered): (Option<String>, u64) = checkpoint::load()?.unwrap_or_default();
//!         // One turn makes at most MAX_REPLIES replies; the rest wait for the next wake.
//!         for delivery in conversations::inbox().take(conversations::MAX_REPLIES) {
//!             let delivery = delivery?;
//!             answered += 1;
//!             delivery.reply(&format!("#{answered}: {}", delivery.message().body))?;
//!             delivery.consume()?;
//!         }
//!         checkpoint::save(&(last, answered))?;
//!         Ok(())
//!     }
//! }
//!
//! ahp_guest::export_agent!(Echo);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` in a crate of type `cdylib`
//! (`ahp agent new NAME` writes such a project; the author's guide is `docs/agents.md` in the
//! ahp repository, and `ahp run` tries a component locally).

pub mod agent_loop;
pub mod checkpoint;
pub mod conversations;
pub mod credentials;
pub mod delegation;
pub mod metering;
pub mod model;
mod pages;
pub mod snapshot;
pub mod tools;

/// The raw bindings generated from `wit/` (not a stable API: use the modules above).
///
/// `wit/` holds the `ahp:agent@0.3.0` package; the frozen packages in `wit/v0.1.0/` and
/// `wit/v0.2.0/` are not
/// read (wit-bindgen parses the directory's own `*.wit` files and `deps/`, no other
/// subdirectory).
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

/// An agent: the code the host runs when it activates a transfer, then at each turn.
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

    /// One conversation turn: called when messages wait in the agent's inbox. Read the whole
    /// [`conversations::inbox`] (a burst of messages shares one turn), answer with
    /// [`Delivery::reply`](conversations::Delivery::reply) and
    /// [`consume`](conversations::Delivery::consume) what you handled, at most
    /// [`conversations::MAX_REPLIES`] of them; deliveries left unconsumed stay queued for the
    /// next turn.
    ///
    /// The turn runs in the same sandbox as `resume` while it lives, but after a host restart
    /// in a fresh one, without `resume` first: keep what a turn needs in [`checkpoint`].
    ///
    /// The default does nothing and returns `Ok(())`: a resume-only agent lets its inbox wait.
    ///
    /// # Errors
    ///
    /// Whatever stops the turn; the message is recorded for the host's operator, the wake is
    /// not run again, and the unconsumed deliveries wait for the next wake.
    fn turn() -> Result<(), Box<dyn std::error::Error>> {
        Ok(())
    }
}

/// Makes `$agent` (a type implementing [`Agent`]) the component's entry point, exporting both
/// `resume` and `turn`. Use it once, at the root of the agent crate.
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

            fn turn() -> ::core::result::Result<(), ::std::string::String> {
                <$agent as $crate::Agent>::turn().map_err(|e| e.to_string())
            }
        }

        $crate::wit::__export_agent_world!(__AhpAgentExport with_types_in $crate::wit);
    };
}
