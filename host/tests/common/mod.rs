//! Scenarios shared by more than one test binary.

pub(crate) mod assistant;
pub(crate) mod rss;
pub(crate) mod worker;
