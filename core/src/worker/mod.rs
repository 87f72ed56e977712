//! The worker process of an [isolated](crate::isolation) plugin: it loads one library with the
//! host's checks, says hello, and serves the host's calls over the pipe until the host closes
//! it.
//!
//! - `serve.rs`: loading the library and the loop that runs each call;
//! - `confine.rs`: the sandbox, applied before the library is opened (Landlock, seccomp);
//! - `context.rs`: the context the worker gives the plugin (a second [`HostServices`](plugin_abi::HostServices)
//!   (plugin_abi::HostServices) whose methods ask the host over the pipe).

mod confine;
mod context;
mod serve;

pub use serve::serve_worker;
