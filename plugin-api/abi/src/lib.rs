//! # plugin-abi: the wire contract between toolhost and its plugins
//!
//! Everything that crosses the boundary between the host and a plugin library is defined here,
//! and nothing else: the `#[repr(C)]` / [`StableAbi`](abi_stable::StableAbi) types ([`wire`]),
//! the host's callback table written once for any host ([`host`]), the safe calls a plugin
//! makes through it ([`FfiContext`]), the instance tables written once for any plugin type
//! ([`instance`]), the root module the export macros put in a library ([`export`]), the panic guard ([`guard`]) and the version rule ([`version_compatible`]).
//!
//! Plugin authors do not use this crate: they write against `plugin-api`, the author façade,
//! whose `export_tool!` / `export_extension!` produce the glue. The host (`toolhost`) and the
//! façade both build on this crate, so there is one definition of the wire, and the version
//! checked when a library loads is this crate's ([`ABI_VERSION`]), not the façade's.
//!
//! ## Versions and evolution
//!
//! This is the one statement of the rule, for both crates; [`version_compatible`] is the check.
//!
//! When the host loads a library it reads the `plugin-abi` version the library was built
//! against and checks the exact layout of every type that crosses the boundary; it skips a
//! library built against an incompatible `plugin-abi` with a one-line reason. The version alone
//! decides: the major versions must match and, **while the crate is `0.x`, the minor versions
//! must match too** (a host speaking 0.5 loads plugins built against any 0.5.z, and no other).
//!
//! Which change needs which `plugin-abi` release:
//!
//! - **Patch** (0.5.z): no change to the types that cross the boundary (a fix in the glue or
//!   the guard), except fields *appended* to the prefix types a *plugin* provides (its root
//!   module [`PluginModule`](wire::PluginModule), [`ToolVtable`](wire::ToolVtable),
//!   [`ExtensionVtable`](wire::ExtensionVtable)), which an older host simply does not read.
//! - **Minor** (0.5 to 0.6): any field added to [`HostVtable`](wire::HostVtable), the table the
//!   *host* provides. abi_stable checks a prefix type the same way in both directions, so a
//!   plugin built against the shorter table is refused by a host with the longer one. Also any
//!   other change to a boundary type, and any change to the JSON that crosses as text (a
//!   point's data, `plugin_api::ToolInfo`, a response's maps) that
//!   the other side cannot read: such a change is made in `plugin-api` but released as a new
//!   minor of this crate, so that built plugins are refused instead of misread.
//! - **Major**: none while `0.x`, where a minor release does its work. Before 1.0 this rule must
//!   be revisited: there the host accepts every minor of its major, yet a new `HostVtable` field
//!   would still fail the layout check of older plugins.
//!
//! `plugin-api` has a semver of its own, for the source code authors write: an author-facing
//! change (a new helper, a `#[non_exhaustive]` type, a renamed method) is a `plugin-api`
//! release that leaves this crate's version alone, so every plugin already built keeps
//! loading. A `plugin-api` release depends on exactly one minor of this crate.
//!
//! JSON values (arguments, metadata, point data) cross as text, so the Rust types on either side
//! may grow fields (with `#[serde(default)]`) without touching the layout.
#![deny(missing_docs)]

mod context;
pub mod export;
pub mod guard;
pub mod host;
pub mod instance;
pub mod wire;

pub use context::FfiContext;
pub use host::HostServices;
pub use wire::{ContextField, FfiError, FfiResponse, FfiResult};

/// The FFI-safe standard types the wire uses, re-exported so neither side names abi_stable.
pub use abi_stable::std_types::{ROption, RResult, RStr, RString};
/// The FFI-safe future the wire uses.
pub use async_ffi::FfiFuture;

/// The version of the wire contract this crate defines (its Cargo version): what a library
/// records when it is built and what the host checks when it loads one (see "Versions and
/// evolution" above).
pub const ABI_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Whether a host speaking plugin-abi `host` loads a library built against `library`: the rule
/// of "Versions and evolution" above (same major; while `0.x`, same minor).
///
/// ```
/// use plugin_abi::version_compatible;
///
/// assert!(version_compatible("0.5.0", "0.5.3"));
/// assert!(!version_compatible("0.5.0", "0.4.0"));
/// assert!(version_compatible("1.2.0", "1.0.5"));
/// ```
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
        assert!(version_compatible(crate::ABI_VERSION, crate::ABI_VERSION));
    }
}
