//! The conversation tools' arguments and results, in camelCase.
//!
//! Doc comments on fields are the JSON Schema descriptions clients see. Arguments are converted
//! into the store's types, which validate and bound them. Results name their ids `agentId`,
//! `endpointId`, `controllerGeneration`, `conversationId`, `messageId`, `deliveryId` and `wakeId`;
//! mutations say `replayed` (an exact retry returned the original) and `stateChanged` (this call
//! changed durable state). No result ever carries a principal, a digest or an idempotency key;
//! the one secret a result carries is the consume token of an explicit activation, to its caller.

mod app;
mod args;
mod results;

pub use app::*;
pub use args::*;
pub use results::*;
