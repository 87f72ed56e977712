//! # plugin-api: write agent tools as native plugins
//!
//! This crate is the whole contract between the `toolhost` host and a plugin library. A plugin
//! is a `cdylib` crate that depends on `plugin-api`, implements [`Tool`] (or [`Extension`]), and
//! calls one macro. The host finds the built library in its layered folders, checks that it was
//! built against a compatible contract, and runs every call through the agent's lifecycle.
//!
//! ## Hello world
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [package]
//! name = "hello"
//! description = "Greets someone by name."
//!
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! plugin-api = { path = "../plugin-api" }
//! ```
//!
//! `src/lib.rs`:
//!
//! ```
//! use plugin_api::{Args, Context, Response, Tool, ToolError};
//!
//! #[derive(Default)]
//! struct Hello;
//!
//! impl Tool for Hello {
//!     async fn execute(&self, _ctx: &Context, args: Args) -> Result<Response, ToolError> {
//!         let name = args.str("name").unwrap_or("world");
//!         Ok(Response::text(format!("Hello, {name}!")))
//!     }
//! }
//!
//! plugin_api::export_tool!(Hello);
//! ```
//!
//! Build it with `cargo build --release`, copy `target/release/libhello.so` to
//! `usr/tools/hello.so`, and `toolhost call hello --args '{"name":"Ada"}'` answers
//! `Hello, Ada!`. The file name is the tool's name.
//!
//! ## What you can use
//!
//! - [`Tool::execute`] gets a [`Context`] (agent name and profile, the call's log item,
//!   [`set_progress`](Context::set_progress) / [`add_progress`](Context::add_progress),
//!   [`check_intervention`](Context::check_intervention), loop data, history) and the [`Args`].
//! - [`Tool::info`] describes the tool ([`ToolInfo`]: description, JSON Schema parameters,
//!   timeout, retries, [`RiskLevel`], capabilities).
//! - [`ToolHooks`] replaces the host's default `before_execution` / `after_execution`.
//! - [`Extension`] runs at a named point of the agent's loop with that point's [`PointData`].
//! - Errors are [`ToolError`]s with an [`ErrorKind`]: a *repairable* error goes back to the model
//!   so it can fix its call; `?` turns any other error into an internal one.
//! - A panic anywhere in plugin code becomes an error for that call, with the panic message.
//! - tokio works inside `execute` (timers, I/O): the plugin has its own runtime, see
//!   [`runtime`].
//!
//! ## Compatibility
//!
//! The host checks the contract's version and the exact layout of every type in [`abi`] when it
//! loads a library, and skips one built against an incompatible `plugin-api` with a one-line
//! reason. While the crate is `0.x`, plugins must be built against the same minor version as the
//! host (`0.2.*` with `0.2.*`).
//!
//! What may change in a patch release: fields appended to the prefix types a *plugin* provides
//! (`PluginModule`, `ToolVtable`, `ExtensionVtable`), which an older host simply does not read.
//! What needs a minor release: any field added to [`HostVtable`](abi::HostVtable), which the
//! *host* provides. abi_stable checks a prefix type the same way in both directions, so a plugin
//! built against the shorter table is refused by a host with the longer one (0.1 to 0.2 was such
//! a change: the secrets and extension services).
#![deny(missing_docs)]

pub mod abi;
mod args;
mod context;
mod error;
mod extension;
mod info;
mod response;
pub mod runtime;
mod tool;

#[doc(hidden)]
#[path = "export.rs"]
pub mod __private;

pub use args::Args;
pub use context::Context;
pub use error::{ErrorKind, ToolError};
pub use extension::{Extension, PointData};
pub use info::{ExtensionInfo, RiskLevel, ToolInfo};
pub use response::Response;
pub use tool::{Tool, ToolHooks};

/// The version of the contract this crate defines (its Cargo version).
pub const API_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The names of the extension points the host fires, around a tool call and in the message loop.
/// A plugin may also fire a point of its own with
/// [`Context::call_extensions`](crate::Context::call_extensions).
pub mod points {
    /// Once per agent, before its first monologue; data `{"agent", "profile"}`.
    pub const AGENT_INIT: &str = "agent_init";
    /// When a user message starts a monologue; data `{"message"}`.
    pub const MONOLOGUE_START: &str = "monologue_start";
    /// When a monologue ends; data `{"result"}` (the final answer, or `null`).
    pub const MONOLOGUE_END: &str = "monologue_end";
    /// At the start of each iteration; data `{"iteration"}`.
    pub const MESSAGE_LOOP_START: &str = "message_loop_start";
    /// At the end of each iteration; data `{"iteration"}`.
    pub const MESSAGE_LOOP_END: &str = "message_loop_end";
    /// Before a message joins the history; data `{"role", "content"}` (may change `content`).
    pub const HIST_ADD_BEFORE: &str = "hist_add_before";
    /// After a tool's result joined the history; data `{"tool_name", "result"}`.
    pub const HIST_ADD_TOOL_RESULT: &str = "hist_add_tool_result";
    /// When an error goes back to the model; data `{"kind", "message", "text"}` (may change
    /// `text`, what the model sees).
    pub const ERROR_FORMAT: &str = "error_format";
    /// When the system prompt is assembled; data `{"parts"}` (may change the parts).
    pub const SYSTEM_PROMPT: &str = "system_prompt";
    /// Before `execute`; data `{"tool_name", "args"}`.
    pub const TOOL_EXECUTE_BEFORE: &str = "tool_execute_before";
    /// After `execute`; data `{"tool_name", "response"}`.
    pub const TOOL_EXECUTE_AFTER: &str = "tool_execute_after";
    /// When a tool sets its progress; data `{"tool_name", "progress"}`.
    pub const TOOL_OUTPUT_UPDATE: &str = "tool_output_update";
}

#[cfg(test)]
mod tests {
    #[test]
    fn root_module_symbol_matches_abi_stable() {
        // The export macros hard-code this name; it must stay what abi_stable looks up.
        let expected = abi_stable::library::ROOT_MODULE_LOADER_NAME;
        assert_eq!(crate::abi::ROOT_MODULE_SYMBOL, expected);
    }
}
