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
//!   [`check_intervention`](Context::check_intervention), loop data, history, secrets) and the
//!   [`Args`].
//! - [`Tool::info`] describes the tool ([`ToolInfo`]: description, JSON Schema parameters,
//!   timeout, retries, [`RiskLevel`], capabilities).
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
//! This is the one statement of the rule; the host's check is written beside it.
//!
//! The host checks, when it loads a library, the `plugin-api` version the library was built
//! against and the exact layout of every type that crosses the boundary; it skips a library
//! built against an incompatible `plugin-api` with a one-line reason. The version alone decides:
//! the major versions must match and, **while the crate is `0.x`, the minor versions must match
//! too** (a 0.3 host loads plugins built against any 0.3.z, and no other).
//!
//! Which change needs which release:
//!
//! - **Patch** (0.3.z): no change to the types that cross the boundary (a fix in the glue, a new
//!   helper on the author side), except fields *appended* to the prefix types a *plugin*
//!   provides (its root module `PluginModule`, `ToolVtable`, `ExtensionVtable`), which an older
//!   host simply does not read.
//! - **Minor** (0.3 to 0.4): any field added to `HostVtable`, the table the *host* provides.
//!   abi_stable checks a prefix type the same way in both directions, so a plugin built against
//!   the shorter table is refused by a host with the longer one (0.1 to 0.2 was such a change:
//!   the secrets and extension services). Also any other change to a boundary type, to the JSON
//!   shape of a point's data, or to the source API authors write against (0.2 to 0.3:
//!   `ToolInfo::new` without a name, the wire types out of sight).
//! - **Major**: none while `0.x`, where a minor release does its work. Before 1.0 this rule must
//!   be revisited: there the host accepts every minor of its major, yet a new `HostVtable` field
//!   would still fail the layout check of older plugins.
//!
//! JSON values (arguments, metadata, point data) cross as text, so the Rust types on either side
//! may grow fields (with `#[serde(default)]`) without touching the layout.
#![deny(missing_docs)]
// Library code handles its errors, or says with `expect` why a value cannot be missing.
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

mod args;
mod context;
mod error;
mod extension;
mod info;
pub mod points;
mod readiness;
mod response;
pub mod runtime;
#[cfg(feature = "testing")]
pub mod testing;
mod tool;

pub use args::Args;
pub use context::Context;
pub use error::{ErrorKind, ToolError};
pub use extension::{Extension, PointData};
pub use info::{ExtensionInfo, RiskLevel, ToolInfo};
pub use readiness::Readiness;
pub use response::Response;
pub use tool::{Tool, ToolHooks};

/// JSON values, as the arguments, metadata and point data use them.
pub use serde_json;

/// The version of the contract this crate defines (its Cargo version); see "Versions and
/// evolution" in the crate docs.
pub const API_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What the host and the export macros use; not part of the author's API, and not covered by
/// its versioning promises.
#[doc(hidden)]
pub mod __private {
    pub mod abi;
    pub mod glue;
    pub mod guard;

    /// Whether a host speaking plugin-api `host` loads a library built against `library`: the
    /// rule of plugin-api's crate docs, "Versions and evolution" (same major; while `0.x`, same
    /// minor).
    pub fn version_compatible(host: &str, library: &str) -> bool {
        let parse = |v: &str| -> Option<(u64, u64)> {
            let mut it = v.split('.');
            Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
        };
        match (parse(host), parse(library)) {
            (Some((hmaj, hmin)), Some((lmaj, lmin))) => hmaj == lmaj && (hmaj != 0 || hmin == lmin),
            _ => false,
        }
    }

    #[cfg(test)]
    mod tests {
        use super::version_compatible;

        #[test]
        fn same_minor_while_zero_same_major_after() {
            assert!(version_compatible("0.3.0", "0.3.0"));
            assert!(version_compatible("0.3.0", "0.3.7"));
            assert!(version_compatible("0.3.7", "0.3.0"));
            assert!(!version_compatible("0.3.0", "0.2.0"));
            assert!(!version_compatible("0.3.0", "0.4.0"));
            assert!(!version_compatible("0.3.0", "1.0.0"));
            assert!(version_compatible("1.2.0", "1.0.5"));
            assert!(version_compatible("1.0.0", "1.9.0"));
            assert!(!version_compatible("1.0.0", "2.0.0"));
        }

        #[test]
        fn unreadable_versions_are_incompatible() {
            assert!(!version_compatible("0.3.0", ""));
            assert!(!version_compatible("0.3.0", "0"));
            assert!(!version_compatible("0.3.0", "x.y.z"));
            assert!(!version_compatible("junk", "0.3.0"));
        }

        #[test]
        fn this_crate_is_compatible_with_itself() {
            assert!(version_compatible(crate::API_VERSION, crate::API_VERSION));
        }
    }
}
