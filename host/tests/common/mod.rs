//! Scenarios shared by more than one suite.

pub(crate) mod assistant;
pub(crate) mod rss;
pub(crate) mod worker;
