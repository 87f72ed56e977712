//! One tool call: the host side of its context (`context.rs`, what a plugin's callbacks
//! reach), the fixed lifecycle (`lifecycle.rs`, the order documented on
//! [`plugin_api::Tool`](plugin_api::Tool#lifecycle)), the host's default hooks, the extension
//! points and what is read back from them, long answers, and the built-in `parallel` tool.

pub(crate) mod approve;
pub(crate) mod ask;
pub(crate) mod audit;
pub(crate) mod content;
pub(crate) mod context;
pub(crate) mod extension_points;
pub(crate) mod form;
pub(crate) mod govern;
pub(crate) mod governed;
pub(crate) mod hooks;
pub(crate) mod lifecycle;
pub(crate) mod long_output;
pub(crate) mod parallel;
pub(crate) mod read_back;
pub(crate) mod sample;

pub use ask::{Answering, Asker};
pub use hooks::{nice_key, sanitize};
pub use long_output::DEFAULT_MAX_OUTPUT;
pub use parallel::{MAX_CALLS, MAX_PARALLEL};
