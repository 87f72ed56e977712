//! Where plugin code runs: the host side of a call's context (what the plugin's callbacks
//! reach), the call threads that keep a deadline for code that never yields, and a call's
//! cancellation.

pub(crate) mod call_threads;
pub(crate) mod cancel;
pub(crate) mod context;
