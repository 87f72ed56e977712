//! Where plugin code runs: the call threads that keep a deadline for code that never yields,
//! and a call's cancellation.

pub(crate) mod call_threads;
pub(crate) mod cancel;
