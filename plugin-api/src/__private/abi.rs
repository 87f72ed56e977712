//! The raw types that cross the library boundary, and the conversions between them and the
//! author-facing types.
//!
//! Plugin authors never touch these: [`export_tool!`](crate::export_tool) and
//! [`export_extension!`](crate::export_extension) generate the glue, and the host wraps them in
//! safe types. They are public (and hidden) so that the host and the glue share one definition.
//!
//! Every struct here is `#[repr(C)]` and derives [`StableAbi`], so its layout is part of the
//! checked contract; which change to these types needs which release is the crate docs' section
//! "Versions and evolution". JSON values (arguments, metadata, extension data) cross as UTF-8
//! strings, which keeps the layout small and lets both sides evolve their Rust types freely.

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
use serde_json::{Map, Value};

use crate::{Context, ErrorKind, PointData, Response, ToolError};

/// A result that crosses the boundary.
pub type FfiResult<T> = RResult<T, FfiError>;

/// An error that crosses the boundary: an [`ErrorKind`] code and a message.
///
/// The kind travels as a plain `u8` ([`kind_code`]) so that a kind added later decodes as
/// [`ErrorKind::Internal`] instead of breaking the layout.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct FfiError {
    /// [`kind_code`] of the error's kind.
    pub kind: u8,
    /// Human-readable message.
    pub message: RString,
}

/// A [`Response`] on the wire.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct FfiResponse {
    /// The text returned to the model.
    pub message: RString,
    /// Ends the agent's message loop when true.
    pub break_loop: bool,
    /// A JSON object attached to the history entry, if any.
    pub additional: ROption<RString>,
    /// A JSON object of metadata for the log and the audit, if any (new in 0.4).
    pub metadata: ROption<RString>,
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
}

/// What a plugin can ask of the host during a call.
///
/// `data` is an opaque, reference-counted pointer owned by the host; `retain` and `release`
/// adjust the count. Every function is safe to call from any thread while the context is alive.
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
    /// out); an unknown key is a repairable error. (New in 0.2; the accessors of the fields
    /// from here on return `Option`, ready for fields a later minor version adds.)
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
    /// interrupted it). New in 0.4.
    #[sabi(missing_field(option))]
    pub is_cancelled: unsafe extern "C" fn(data: *const c_void) -> bool,
    /// A future that completes when the host cancels the call. New in 0.4.
    #[sabi(missing_field(option))]
    pub cancelled: unsafe extern "C" fn(data: *const c_void) -> FfiFuture<()>,
}

/// A call context handed to a plugin: host data plus the host's vtable.
#[repr(C)]
#[derive(StableAbi)]
pub struct FfiContext {
    /// Opaque host data; see [`HostVtable`].
    pub data: *const c_void,
    /// The host's functions.
    pub vtable: HostVtableRef,
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
    /// Whether the tool can run now: `None` if ready, else the reason it is not. New in 0.4.
    #[sabi(missing_field(option))]
    pub readiness: unsafe extern "C" fn(this: *const c_void) -> ROption<RString>,
}

/// A tool instance created by a library.
#[repr(C)]
#[derive(StableAbi)]
pub struct FfiTool {
    /// Opaque plugin data.
    pub this: *const c_void,
    /// The tool's functions.
    pub vtable: ToolVtableRef,
    /// [`ToolInfo`](crate::ToolInfo) as JSON.
    pub info: RString,
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

/// An extension instance created by a library.
#[repr(C)]
#[derive(StableAbi)]
pub struct FfiExtension {
    /// Opaque plugin data.
    pub this: *const c_void,
    /// The extension's functions.
    pub vtable: ExtensionVtableRef,
    /// [`ExtensionInfo`](crate::ExtensionInfo) as JSON.
    pub info: RString,
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
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

/// The exported symbol name of a root module (what `#[export_root_module]` would produce).
///
/// The export macros write the symbol themselves so that plugins need no direct dependency on
/// `abi_stable`; a unit test pins this to abi_stable's own mangling.
pub const ROOT_MODULE_SYMBOL: &str = "_1as_0lib_1header_0root_bmodule_bloader";

/// The code an [`ErrorKind`] crosses the boundary as.
pub const fn kind_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Repairable => 0,
        ErrorKind::Validation => 1,
        ErrorKind::Business => 2,
        ErrorKind::Timeout => 3,
        ErrorKind::Dependency => 4,
        ErrorKind::Internal => 5,
        ErrorKind::Intervention => 6,
    }
}

/// Decodes [`kind_code`]; an unknown code (from a newer plugin) is `Internal`.
pub const fn kind_from_code(code: u8) -> ErrorKind {
    match code {
        0 => ErrorKind::Repairable,
        1 => ErrorKind::Validation,
        2 => ErrorKind::Business,
        3 => ErrorKind::Timeout,
        4 => ErrorKind::Dependency,
        6 => ErrorKind::Intervention,
        _ => ErrorKind::Internal,
    }
}

/// A [`ToolError`] in its wire form.
pub fn error_to_ffi(error: ToolError) -> FfiError {
    let (kind, message) = error.into_parts();
    FfiError {
        kind: kind_code(kind),
        message: RString::from(message),
    }
}

/// A [`ToolError`] from its wire form.
pub fn error_from_ffi(error: FfiError) -> ToolError {
    ToolError::new(kind_from_code(error.kind), error.message.into_string())
}

/// A [`Response`] in its wire form.
pub fn response_to_ffi(response: Response) -> FfiResponse {
    FfiResponse {
        message: RString::from(response.message),
        break_loop: response.break_loop,
        additional: map_to_ffi(response.additional),
        metadata: map_to_ffi(response.metadata),
    }
}

fn map_to_ffi(map: Option<Map<String, Value>>) -> ROption<RString> {
    match map {
        Some(map) => ROption::RSome(RString::from(
            serde_json::to_string(&map).unwrap_or_default(),
        )),
        None => ROption::RNone,
    }
}

/// A JSON object from its wire form; anything else is kept under the key `"value"`.
fn map_from_ffi(text: ROption<RString>) -> Option<Map<String, Value>> {
    text.into_option()
        .map(|text| match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => map,
            Ok(other) => Map::from_iter([("value".to_owned(), other)]),
            Err(_) => Map::from_iter([("value".to_owned(), Value::String(text.into_string()))]),
        })
}

/// A [`Response`] from its wire form. `additional` that is not a JSON object is kept under the
/// key `"value"` so that nothing is lost.
pub fn response_from_ffi(response: FfiResponse) -> Response {
    Response {
        message: response.message.into_string(),
        break_loop: response.break_loop,
        additional: map_from_ffi(response.additional),
        metadata: map_from_ffi(response.metadata),
    }
}

/// Takes ownership of a context received from the host.
///
/// # Safety
/// `ffi` must come from the host and carry one reference that the new value now owns.
pub unsafe fn context_from_ffi(ffi: FfiContext) -> Context {
    // SAFETY: per this function's contract.
    unsafe { Context::from_ffi(ffi) }
}

/// An extension point's data from the JSON text the host sent (invalid JSON reads as `null`).
pub fn point_data_from_json(json: RString) -> PointData {
    PointData::from_json(json)
}

/// The JSON text to send back to the host: `Some` only if an extension changed the data.
pub fn point_data_into_changed_json(data: PointData) -> Option<RString> {
    data.into_changed_json().map(RString::from)
}

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

    #[test]
    fn kind_codes_round_trip_and_unknown_is_internal() {
        for kind in [
            ErrorKind::Repairable,
            ErrorKind::Validation,
            ErrorKind::Business,
            ErrorKind::Timeout,
            ErrorKind::Dependency,
            ErrorKind::Internal,
            ErrorKind::Intervention,
        ] {
            assert_eq!(kind_from_code(kind_code(kind)), kind);
        }
        assert_eq!(kind_from_code(200), ErrorKind::Internal);
    }

    #[test]
    fn response_round_trips_and_keeps_non_object_additional() {
        let r = Response::text("hi").with_additional("k", Value::from(1));
        assert_eq!(response_from_ffi(response_to_ffi(r.clone())), r);
        let odd = FfiResponse {
            message: "m".into(),
            break_loop: true,
            additional: ROption::RSome("[1]".into()),
            metadata: ROption::RNone,
        };
        let back = response_from_ffi(odd);
        assert_eq!(back.additional.unwrap()["value"], serde_json::json!([1]));
    }
}
