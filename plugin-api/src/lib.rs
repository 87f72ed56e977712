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
//!   [`check_intervention`](Context::check_intervention), loop data, history with a [`Role`],
//!   secrets) and the [`Args`].
//! - [`Tool::info`] describes the tool ([`ToolInfo`]: description, JSON Schema parameters,
//!   timeout, retries, [`RiskLevel`], capabilities).
//! - A [`Response`] carries a message and, after it, [`Content`] blocks (images, audio,
//!   embedded resources, resource links, more text) and structured content checked against
//!   the tool's output schema ([`ToolInfo::output_schema_for`]); over MCP they are MCP's own
//!   content blocks and `structuredContent`.
//! - The [`Context`] asks whoever the call is served to ([`ask`]): [`Context::log`] a message,
//!   [`Context::elicit`] the user a form, [`Context::sample`] a model a completion (an MCP
//!   client's, under `toolhost serve-mcp`).
//! - [`TypedTool`] is a [`Tool`] whose arguments are one Rust type: its JSON Schema becomes
//!   the parameters and `execute` receives the arguments parsed.
//! - What a call goes through, step by step, is [`Tool`]'s "Lifecycle".
//! - [`ToolHooks`] replaces the host's default `before_execution` / `after_execution`.
//! - [`Extension`] runs at a named point of the agent's loop with that point's [`PointData`];
//!   [`points`] has the type of each built-in point's data, and [`ExtensionInfo`] describes
//!   the extension.
//! - Errors are [`ToolError`]s with an [`ErrorKind`]: a *repairable* error goes back to the model
//!   so it can fix its call; `?` turns the common errors (I/O, JSON, parsing, tokio) into
//!   internal ones (a tokio timeout into a timeout), and [`ToolError::from_error`] any other
//!   with the kind you choose.
//! - A panic anywhere in plugin code becomes an error for that call, with the panic message.
//! - tokio works inside `execute` (timers, I/O): the plugin has its own runtime, see
//!   [`runtime`].
//! - [`serde_json`] is re-exported, so a plugin needs no dependency of its own for JSON values.
//! - With the feature `testing` (in `[dev-dependencies]`), `testing::TestContext` is a
//!   [`Context`] without a host, to unit-test a tool like any Rust code.
//!
//! ## An extension
//!
//! An extension library lives in `extensions/<point>/` and changes the data of that point:
//!
//! ```
//! use plugin_api::points::ToolExecuteAfter;
//! use plugin_api::{Context, Extension, PointData, ToolError};
//!
//! #[derive(Default)]
//! struct Sign;
//!
//! impl Extension for Sign {
//!     async fn execute(&self, _ctx: &Context, data: &mut PointData) -> Result<(), ToolError> {
//!         let mut after: ToolExecuteAfter = data.read()?;
//!         after.response.message.push_str(" (checked)");
//!         data.write(&after)
//!     }
//! }
//!
//! plugin_api::export_extension!(Sign);
//! ```
//!
//! ## Versions and evolution
//!
//! Two versions matter. The host checks, when it loads a library, the version of the *wire
//! contract* it was built against ([`ABI_VERSION`], the `plugin-abi` crate this one builds
//! on) and the layout of every type that crosses the boundary. This crate, the author's
//! façade, has a semver of its own ([`API_VERSION`]) for the source code you write: a release
//! that changes only that leaves the wire alone, and plugins already built keep loading. Which
//! change needs which release of which crate is stated once, in
//! [plugin-abi's crate docs, "Versions and evolution"](plugin_abi#versions-and-evolution).
#![deny(missing_docs)]
// Library code handles its errors, or says with `expect` why a value cannot be missing.
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

mod args;
pub mod ask;
mod content;
mod context;
mod error;
mod extension;
mod glue;
mod info;
pub mod points;
mod readiness;
mod response;
mod role;
pub mod runtime;
#[cfg(feature = "testing")]
pub mod testing;
mod tool;

pub use args::Args;
pub use content::{Content, EmbeddedResource};
pub use context::Context;
pub use error::{ErrorKind, ToolError};
pub use extension::{Extension, PointData};
pub use info::{ExtensionInfo, RiskLevel, ToolInfo};
pub use readiness::Readiness;
pub use response::Response;
pub use role::Role;
pub use tool::{Tool, ToolHooks, TypedTool};

/// JSON values, as the arguments, metadata and point data use them.
pub use serde_json;

/// This crate's own version: the author API's semver (see "Versions and evolution").
pub const API_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version of the wire contract this crate builds plugins against, the one the host checks
/// when it loads a library (`plugin_abi::ABI_VERSION`).
pub const ABI_VERSION: &str = plugin_abi::ABI_VERSION;

/// What the export macros expand to; not part of the author's API, and not covered by its
/// versioning promises. It holds safe functions and names from `plugin-abi` only.
#[doc(hidden)]
pub mod __private {
    pub use crate::glue::{
        extension_root, new_extension, new_tool, tool_root, HookProbe, ProbeWithHooks,
        ProbeWithoutHooks,
    };
    pub use plugin_abi::export::{
        call_root_module_loader, CheckTypeLayout, LibHeader, Package, RootModuleResult,
    };
    pub use plugin_abi::wire::{FfiExtension, FfiTool, PluginModuleRef};
    pub use plugin_abi::FfiResult;
}
