//! A call context as it crosses the boundary, and the plugin's safe calls through it.

use std::ffi::c_void;

use abi_stable::std_types::{ROption, RStr, RString};
use abi_stable::StableAbi;
use async_ffi::FfiFuture;

use crate::wire::{ContextField, FfiResponse, FfiResult, HostVtableRef};

/// A call context handed to a plugin: one reference to the host's data, and the host's
/// [`HostVtable`](crate::wire::HostVtable).
///
/// It owns its reference: cloning adds one, dropping gives it back, and passing it to a
/// plugin function hands it over. A host makes one with [`FfiContext::new`] from its
/// [`HostServices`](crate::HostServices); the methods here are the plugin's calls into it
/// (the `plugin_api::Context` the author sees wraps this type).
#[repr(C)]
#[derive(StableAbi)]
pub struct FfiContext {
    data: *const c_void,
    vtable: HostVtableRef,
}

// SAFETY: the host promises (see `HostVtable`) that its data is reference-counted and that every
// vtable function may be called from any thread; `HostServices` requires `Send + Sync`.
unsafe impl Send for FfiContext {}
unsafe impl Sync for FfiContext {}

impl FfiContext {
    /// A context from its raw parts; used by [`HostServices`](crate::HostServices) only.
    ///
    /// # Safety
    /// `data` must carry one reference that the new value owns, and `vtable`'s functions must
    /// accept `data` from any thread while a reference is held.
    pub(crate) unsafe fn from_raw(data: *const c_void, vtable: HostVtableRef) -> Self {
        Self { data, vtable }
    }

    /// Reads a text field of the context.
    pub fn field(&self, field: ContextField) -> RString {
        // SAFETY: `data` is alive while `self` holds its reference (as in every call below).
        unsafe { (self.vtable.field())(self.data, field) }
    }

    /// Replaces the text content of the call's log item.
    pub fn log_content(&self, content: &str) {
        // SAFETY: as in `field`.
        unsafe { (self.vtable.log_content())(self.data, RStr::from(content)) }
    }

    /// Sets the progress text (firing the `tool_output_update` point).
    pub fn set_progress(&self, text: RString) -> FfiFuture<()> {
        // SAFETY: as in `field`.
        unsafe { (self.vtable.set_progress())(self.data, text) }
    }

    /// Appends to the progress text.
    pub fn add_progress(&self, text: &str) {
        // SAFETY: as in `field`.
        unsafe { (self.vtable.add_progress())(self.data, RStr::from(text)) }
    }

    /// Waits while the agent is paused; an intervention error if it was stopped.
    pub fn check_intervention(&self) -> FfiFuture<FfiResult<()>> {
        // SAFETY: as in `field`.
        unsafe { (self.vtable.check_intervention())(self.data) }
    }

    /// A loop-data value as JSON text, if set.
    pub fn loop_data_get(&self, key: &str) -> ROption<RString> {
        // SAFETY: as in `field`.
        unsafe { (self.vtable.loop_data_get())(self.data, RStr::from(key)) }
    }

    /// Sets a loop-data value from JSON text.
    pub fn loop_data_set(&self, key: &str, json: RString) -> FfiResult<()> {
        // SAFETY: as in `field`.
        unsafe { (self.vtable.loop_data_set())(self.data, RStr::from(key), json) }
    }

    /// Adds a message to the agent's history (`role`: `user`, `ai`, `tool` or `warning`).
    pub fn history_add(&self, role: &str, content: RString) {
        // SAFETY: as in `field`.
        unsafe { (self.vtable.history_add())(self.data, RStr::from(role), content) }
    }

    /// The host's default `before_execution`, with the arguments as JSON text.
    pub fn default_before_execution(&self, args: RString) -> FfiFuture<FfiResult<()>> {
        // SAFETY: as in `field`.
        unsafe { (self.vtable.default_before_execution())(self.data, args) }
    }

    /// The host's default `after_execution`.
    pub fn default_after_execution(&self, response: FfiResponse) -> FfiFuture<FfiResult<()>> {
        // SAFETY: as in `field`.
        unsafe { (self.vtable.default_after_execution())(self.data, response) }
    }

    /// Fills `§§secret(KEY)` placeholders into a JSON text; `None` on a host without secrets.
    pub fn unmask_json(&self, json: RString) -> Option<FfiResult<RString>> {
        let unmask = self.vtable.unmask_json()?;
        // SAFETY: as in `field`.
        Some(unsafe { unmask(self.data, json) })
    }

    /// Masks every secret value in a text; `None` on a host without secrets.
    pub fn mask_text(&self, text: RString) -> Option<RString> {
        let mask = self.vtable.mask_text()?;
        // SAFETY: as in `field`.
        Some(unsafe { mask(self.data, text) })
    }

    /// Runs the extensions of `point` on JSON data; `None` on a host without that service.
    pub fn call_extensions(
        &self,
        point: RString,
        json: RString,
    ) -> Option<FfiFuture<FfiResult<RString>>> {
        let call = self.vtable.call_extensions()?;
        // SAFETY: as in `field`.
        Some(unsafe { call(self.data, point, json) })
    }

    /// Whether the host cancelled the call; `None` on a host without cancellation.
    pub fn is_cancelled(&self) -> Option<bool> {
        let is_cancelled = self.vtable.is_cancelled()?;
        // SAFETY: as in `field`.
        Some(unsafe { is_cancelled(self.data) })
    }

    /// Completes when the host cancels the call; `None` on a host without cancellation.
    pub fn cancelled(&self) -> Option<FfiFuture<()>> {
        let cancelled = self.vtable.cancelled()?;
        // SAFETY: as in `field`.
        Some(unsafe { cancelled(self.data) })
    }
}

impl FfiContext {
    /// Asks whoever the call is served to, with a JSON request; `None` on a host that cannot
    /// be asked.
    pub fn ask(&self, request: RString) -> Option<FfiFuture<FfiResult<RString>>> {
        let ask = self.vtable.ask()?;
        // SAFETY: as in `field`.
        Some(unsafe { ask(self.data, request) })
    }
}

impl Clone for FfiContext {
    fn clone(&self) -> Self {
        // SAFETY: adds the reference the new value owns.
        unsafe { (self.vtable.retain())(self.data) };
        Self {
            data: self.data,
            vtable: self.vtable,
        }
    }
}

impl Drop for FfiContext {
    fn drop(&mut self) {
        // SAFETY: gives back the reference this value owned.
        unsafe { (self.vtable.release())(self.data) }
    }
}
