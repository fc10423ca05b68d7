//! `ahp:agent@0.1.0`: the frozen interfaces of the first contract, for components built
//! before conversation turns. Each function forwards to its `@0.3.0` twin ([`snapshot`],
//! [`credentials`], [`checkpoint`], through `frozen`; `metering` links every version itself),
//! converting only the generated types, so the versions cannot drift apart.
//!
//! [`snapshot`]: super::snapshot
//! [`credentials`]: super::credentials
//! [`checkpoint`]: super::checkpoint

use super::AgentCtx;
use super::bindings::v0_1::ahp::agent as old;
use super::bindings::v0_3::ahp::agent as new;

super::frozen::forward_unchanged_interfaces!();
