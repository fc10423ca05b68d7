//! Tests of the delegation domain, through the public `Store` methods.
