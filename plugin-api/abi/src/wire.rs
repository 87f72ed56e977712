//! The types that cross the library boundary.
//!
//! Every struct here is `#[repr(C)]` and derives [`StableAbi`], so its layout is part of the
//! checked contract; which change to these types needs which release is the crate docs'
//! section "Versions and evolution". JSON values (arguments, metadata, extension data) cross as
//! UTF-8 strings, which keeps the layout small and lets both sides evolve their Rust types
//! freely.
//!
//! The instances a library creates ([`FfiTool`], [`FfiExtension`]) own their plugin's
//! reference: the host calls them through safe methods and dropping one gives the reference
//! back, so the host holds no raw pointer of its own.

use std::ffi::c_void;

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    package_version_strings,
    sabi_types::VersionStrings,
    std_types::{ROption, RResult, RStr, RString},
    StableAbi,
};
use async_ffi::FfiFuture;

use crate::FfiContext;

/// A result that crosses the boundary.
pub type FfiResult<T> = RResult<T, FfiError>;

/// The codes an error's kind crosses the boundary as (`plugin_api::ErrorKind` on the author's
/// side). A code this side does not know reads as [`INTERNAL`](kind::INTERNAL).
pub mod kind {
    /// The model can fix this by changing its call.
    pub const REPAIRABLE: u8 = 0;
    /// The arguments do not match the tool's parameters.
    pub const VALIDATION: u8 = 1;
    /// The tool ran and reports a domain failure.
    pub const BUSINESS: u8 = 2;
    /// The tool took too long.
    pub const TIMEOUT: u8 = 3;
    /// Something the tool depends on failed.
    pub const DEPENDENCY: u8 = 4;
    /// A bug or an unexpected failure, including panics.
    pub const INTERNAL: u8 = 5;
    /// The user paused, stopped or interrupted the agent.
    pub const INTERVENTION: u8 = 6;
}

/// An error that crosses the boundary: a [`kind`] code and a message.
///
/// The kind travels as a plain `u8` so that a kind added later decodes as
/// [`kind::INTERNAL`] instead of breaking the layout.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct FfiError {
    /// The [`kind`] code of the error.
    pub kind: u8,
    /// Human-readable message.
    pub message: RString,
}

impl FfiError {
    /// An error of kind `kind` (a [`kind`] code).
    pub fn new(kind: u8, message: impl Into<RString>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// An [`INTERNAL`](kind::INTERNAL) error.
    pub fn internal(message: impl Into<RString>) -> Self {
        Self::new(kind::INTERNAL, message)
    }
}

/// A tool's response on the wire (`plugin_api::Response` on the author's side).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Default)]
pub struct FfiResponse {
    /// The text returned to the model.
    pub message: RString,
    /// Ends the agent's message loop when true.
    pub break_loop: bool,
    /// A JSON object attached to the history entry, if any.
    pub additional: ROption<RString>,
    /// A JSON object of metadata for the log and the audit, if any.
    pub metadata: ROption<RString>,
    /// The content blocks after the message, in order, as a JSON array of MCP-shaped blocks
    /// (`plugin_api::Content`); `RNone` when there are none.
    pub content: ROption<RString>,
    /// The structured result (JSON), checked by the host against the tool's output schema.
    pub structured_content: ROption<RString>,
}

/// The fields of a call context that a plugin reads as text.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextField {
    /// The agent's display name.
    AgentName,
    /// The active profile.
    Profile,
    /// The tool being called (as requested, without the method).
    ToolName,
    /// The `method` of a `name:method` call, or empty.
    Method,
    /// The extension point being run, or empty in a tool call.
    ExtensionPoint,
    /// The file name (without extension) of the running extension, or empty.
    ExtensionName,
    /// The id of the call's log item, as decimal text.
    LogId,
    /// The call's private scratch folder, readable and writable in a sandboxed worker, or
    /// empty where the call has none (in the host's process). Added in 0.6.
    Scratch,
    /// The W3C `traceparent` of the call's span when the host exports traces, or empty: what
    /// the plugin's own outgoing requests may carry. Added in 0.6.
    TraceParent,
}

/// What a plugin can ask of the host during a call.
///
/// `data` is an opaque, reference-counted pointer owned by the host; `retain` and `release`
/// adjust the count. Every function is safe to call from any thread while the context is alive.
/// A host never fills this table by hand: [`HostServices`](crate::HostServices) writes it.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = HostVtableRef)))]
#[sabi(missing_field(panic))]
pub struct HostVtable {
    /// Adds one reference to `data`.
    pub retain: unsafe extern "C" fn(data: *const c_void),
    /// Removes one reference from `data`.
    pub release: unsafe extern "C" fn(data: *const c_void),
    /// Reads a text field of the context.
    pub field: unsafe extern "C" fn(data: *const c_void, field: ContextField) -> RString,
    /// Replaces the text content of the call's log item.
    pub log_content: unsafe extern "C" fn(data: *const c_void, content: RStr<'_>),
    /// Sets the progress text and fires the `tool_output_update` extension point.
    pub set_progress: unsafe extern "C" fn(data: *const c_void, text: RString) -> FfiFuture<()>,
    /// Appends to the progress text without firing any extension point.
    pub add_progress: unsafe extern "C" fn(data: *const c_void, text: RStr<'_>),
    /// Waits while the agent is paused; fails with an intervention error if it was stopped.
    pub check_intervention: unsafe extern "C" fn(data: *const c_void) -> FfiFuture<FfiResult<()>>,
    /// Reads a loop-data value (JSON text), if set.
    pub loop_data_get: unsafe extern "C" fn(data: *const c_void, key: RStr<'_>) -> ROption<RString>,
    /// Sets a loop-data value from JSON text.
    pub loop_data_set:
        unsafe extern "C" fn(data: *const c_void, key: RStr<'_>, json: RString) -> FfiResult<()>,
    /// Adds a message to the agent's history.
    pub history_add: unsafe extern "C" fn(data: *const c_void, role: RStr<'_>, content: RString),
    /// The host's default `before_execution` (log item, printing).
    pub default_before_execution:
        unsafe extern "C" fn(data: *const c_void, args: RString) -> FfiFuture<FfiResult<()>>,
    /// The host's default `after_execution` (sanitize, history, printing).
    #[sabi(last_prefix_field)]
    pub default_after_execution: unsafe extern "C" fn(
        data: *const c_void,
        response: FfiResponse,
    ) -> FfiFuture<FfiResult<()>>,
    /// Replaces `§§secret(KEY)` placeholders in every string of a JSON value (JSON text in and
    /// out); an unknown key is a repairable error. (The accessors of the fields from here on
    /// return `Option`, ready for fields a later minor version adds.)
    #[sabi(missing_field(option))]
    pub unmask_json: unsafe extern "C" fn(data: *const c_void, json: RString) -> FfiResult<RString>,
    /// Replaces every secret value in a text with its placeholder.
    #[sabi(missing_field(option))]
    pub mask_text: unsafe extern "C" fn(data: *const c_void, text: RString) -> RString,
    /// Runs the extensions of any point on JSON data; returns the JSON they leave.
    #[sabi(missing_field(option))]
    pub call_extensions: unsafe extern "C" fn(
        data: *const c_void,
        point: RString,
        json: RString,
    ) -> FfiFuture<FfiResult<RString>>,
    /// Whether the host has cancelled the call (its deadline passed, or the user stopped or
    /// interrupted it).
    #[sabi(missing_field(option))]
    pub is_cancelled: unsafe extern "C" fn(data: *const c_void) -> bool,
    /// A future that completes when the host cancels the call.
    #[sabi(missing_field(option))]
    pub cancelled: unsafe extern "C" fn(data: *const c_void) -> FfiFuture<()>,
    /// Asks whoever the call is served to (an MCP client, the host's log): a JSON request
    /// (`plugin_api::ask`: a log message, an elicitation, a sampling), answered with JSON.
    #[sabi(missing_field(option))]
    pub ask: unsafe extern "C" fn(
        data: *const c_void,
        request: RString,
    ) -> FfiFuture<FfiResult<RString>>,
}

/// The functions of one tool instance.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = ToolVtableRef)))]
#[sabi(missing_field(panic))]
pub struct ToolVtable {
    /// Runs the tool with JSON arguments.
    pub execute: unsafe extern "C" fn(
        this: *const c_void,
        ctx: FfiContext,
        args: RString,
    ) -> FfiFuture<FfiResult<FfiResponse>>,
    /// The plugin's own `before_execution`, if it overrides the host's default.
    pub before_execution: ROption<
        unsafe extern "C" fn(
            this: *const c_void,
            ctx: FfiContext,
            args: RString,
        ) -> FfiFuture<FfiResult<()>>,
    >,
    /// The plugin's own `after_execution`, if it overrides the host's default.
    pub after_execution: ROption<
        unsafe extern "C" fn(
            this: *const c_void,
            ctx: FfiContext,
            response: FfiResponse,
        ) -> FfiFuture<FfiResult<()>>,
    >,
    /// Frees the instance.
    #[sabi(last_prefix_field)]
    pub drop: unsafe extern "C" fn(this: *const c_void),
    /// Whether the tool can run now: `None` if ready, else the reason it is not.
    #[sabi(missing_field(option))]
    pub readiness: unsafe extern "C" fn(this: *const c_void) -> ROption<RString>,
}

/// A tool's own `before_execution` ([`ToolVtable::before_execution`]; written out there, as
/// the layout derive needs).
pub type BeforeFn = unsafe extern "C" fn(
    this: *const c_void,
    ctx: FfiContext,
    args: RString,
) -> FfiFuture<FfiResult<()>>;
/// A tool's own `after_execution` ([`ToolVtable::after_execution`]).
pub type AfterFn = unsafe extern "C" fn(
    this: *const c_void,
    ctx: FfiContext,
    response: FfiResponse,
) -> FfiFuture<FfiResult<()>>;

/// A tool instance created by a library; dropping it frees the instance.
#[repr(C)]
#[derive(StableAbi)]
pub struct FfiTool {
    this: *const c_void,
    vtable: ToolVtableRef,
    info: RString,
}

// SAFETY: the export glue keeps the instance in an `Arc<T>` with `T: Send + Sync`, and every
// vtable function may be called from any thread (`FfiTool::from_raw`'s contract).
unsafe impl Send for FfiTool {}
unsafe impl Sync for FfiTool {}

impl FfiTool {
    /// A tool instance from its parts; plugins make one with `FfiTool::new`
    /// ([`instance`](crate::instance)).
    ///
    /// # Safety
    /// Every function of `vtable` must accept `this` from any thread until `drop` is called
    /// with it, which this value does once, when dropped.
    pub(crate) unsafe fn from_raw(
        this: *const c_void,
        vtable: ToolVtableRef,
        info: RString,
    ) -> Self {
        Self { this, vtable, info }
    }

    /// The tool's metadata (`ToolInfo` as JSON).
    pub fn info(&self) -> &str {
        &self.info
    }

    /// Runs the tool with JSON arguments; `ctx` is handed over with its reference.
    pub fn execute(&self, ctx: FfiContext, args: RString) -> FfiFuture<FfiResult<FfiResponse>> {
        // SAFETY: `this` is alive until drop (`from_raw`'s contract).
        unsafe { (self.vtable.execute())(self.this, ctx, args) }
    }

    /// Whether the tool overrides `before_execution`.
    pub fn has_before_execution(&self) -> bool {
        self.vtable.before_execution().is_some()
    }

    /// Whether the tool overrides `after_execution`.
    pub fn has_after_execution(&self) -> bool {
        self.vtable.after_execution().is_some()
    }

    /// Whether the tool was built with a readiness check (plugins of contract 0.4 on).
    pub fn has_readiness(&self) -> bool {
        self.vtable.readiness().is_some()
    }

    /// The tool's own `before_execution`, or `None` (the context dropped) if it has none.
    pub fn before_execution(
        &self,
        ctx: FfiContext,
        args: RString,
    ) -> Option<FfiFuture<FfiResult<()>>> {
        let hook = self.vtable.before_execution().into_option()?;
        // SAFETY: as in `execute`.
        Some(unsafe { hook(self.this, ctx, args) })
    }

    /// The tool's own `after_execution`, or `None` (the context dropped) if it has none.
    pub fn after_execution(
        &self,
        ctx: FfiContext,
        response: FfiResponse,
    ) -> Option<FfiFuture<FfiResult<()>>> {
        let hook = self.vtable.after_execution().into_option()?;
        // SAFETY: as in `execute`.
        Some(unsafe { hook(self.this, ctx, response) })
    }

    /// `None` if the tool can run now (or has no readiness check), else why not.
    pub fn readiness(&self) -> Option<RString> {
        let readiness = self.vtable.readiness()?;
        // SAFETY: as in `execute`; the glue catches the plugin's panics.
        unsafe { readiness(self.this) }.into_option()
    }
}

impl Drop for FfiTool {
    fn drop(&mut self) {
        // SAFETY: gives back the instance reference, once (`from_raw`'s contract).
        unsafe { (self.vtable.drop())(self.this) }
    }
}

/// The functions of one extension instance.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = ExtensionVtableRef)))]
#[sabi(missing_field(panic))]
pub struct ExtensionVtable {
    /// Runs the extension with the point's data as JSON; returns the new data if it changed.
    pub execute: unsafe extern "C" fn(
        this: *const c_void,
        ctx: FfiContext,
        data: RString,
    ) -> FfiFuture<FfiResult<ROption<RString>>>,
    /// Frees the instance.
    #[sabi(last_prefix_field)]
    pub drop: unsafe extern "C" fn(this: *const c_void),
}

/// An extension instance created by a library; dropping it frees the instance.
#[repr(C)]
#[derive(StableAbi)]
pub struct FfiExtension {
    this: *const c_void,
    vtable: ExtensionVtableRef,
    info: RString,
}

// SAFETY: as for `FfiTool`.
unsafe impl Send for FfiExtension {}
unsafe impl Sync for FfiExtension {}

impl FfiExtension {
    /// An extension instance from its parts; plugins make one with `FfiExtension::new`
    /// ([`instance`](crate::instance)).
    ///
    /// # Safety
    /// As for [`FfiTool::from_raw`].
    pub(crate) unsafe fn from_raw(
        this: *const c_void,
        vtable: ExtensionVtableRef,
        info: RString,
    ) -> Self {
        Self { this, vtable, info }
    }

    /// The extension's metadata (`ExtensionInfo` as JSON).
    pub fn info(&self) -> &str {
        &self.info
    }

    /// Runs the extension on the point's data; `ctx` is handed over with its reference.
    pub fn execute(
        &self,
        ctx: FfiContext,
        data: RString,
    ) -> FfiFuture<FfiResult<ROption<RString>>> {
        // SAFETY: `this` is alive until drop (`from_raw`'s contract).
        unsafe { (self.vtable.execute())(self.this, ctx, data) }
    }
}

impl Drop for FfiExtension {
    fn drop(&mut self) {
        // SAFETY: as for `FfiTool`.
        unsafe { (self.vtable.drop())(self.this) }
    }
}

/// The root module every plugin library exports.
///
/// Exactly one of `new_tool` and `new_extension` is set.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
#[sabi(missing_field(panic))]
pub struct PluginModule {
    /// The crate that built the library (`CARGO_PKG_NAME`).
    pub package: RStr<'static>,
    /// Its version (`CARGO_PKG_VERSION`).
    pub package_version: RStr<'static>,
    /// Creates the tool, if this library is a tool.
    pub new_tool: ROption<extern "C" fn() -> FfiResult<FfiTool>>,
    /// Creates the extension, if this library is an extension.
    pub new_extension: ROption<extern "C" fn() -> FfiResult<FfiExtension>>,
    /// Stops the plugin's own runtime and threads; called before the host lets go of the
    /// library for good.
    #[sabi(last_prefix_field)]
    pub shutdown: extern "C" fn(),
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "toolhost_plugin";
    const NAME: &'static str = "toolhost_plugin";
    // This crate's version: the one the host checks (see `version_compatible`).
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

/// The exported symbol name of a root module (what `#[export_root_module]` would produce).
///
/// The export macros write the symbol themselves so that plugins need no direct dependency on
/// `abi_stable`; a unit test pins this to abi_stable's own mangling.
pub const ROOT_MODULE_SYMBOL: &str = "_1as_0lib_1header_0root_bmodule_bloader";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_module_symbol_matches_abi_stable() {
        // The export macros hard-code this name; it must stay what abi_stable looks up.
        assert_eq!(
            ROOT_MODULE_SYMBOL,
            abi_stable::library::ROOT_MODULE_LOADER_NAME
        );
    }
}
