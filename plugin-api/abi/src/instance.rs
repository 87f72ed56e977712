//! The plugin's side of the instance tables, written once: the export glue implements the
//! safe traits [`ToolInstance`] (and [`ToolInstanceHooks`]) or [`ExtensionInstance`] for its
//! wrapper of the author's type, and [`FfiTool::new`] / [`FfiExtension::new`] write the
//! `extern "C"` functions, the reference counting and the drop for that type.
//!
//! As with [`HostServices`](crate::HostServices), the functions are generic over the instance
//! type and monomorphized: no dynamic dispatch or allocation beyond what each call does.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{RNone, ROption, RSome, RString};
use async_ffi::FfiFuture;

use crate::guard::catch_panic;
use crate::wire::{
    AfterFn, BeforeFn, ExtensionVtable, FfiExtension, FfiResponse, FfiResult, FfiTool, ToolVtable,
};
use crate::FfiContext;

/// A tool instance as the export glue presents it to the host.
///
/// Every method must catch the plugin's panics (the glue's guard does): an `extern "C"`
/// function may not unwind.
pub trait ToolInstance: Send + Sync + Sized + 'static {
    /// Runs the tool with JSON arguments.
    fn execute(
        self: &Arc<Self>,
        ctx: FfiContext,
        args: RString,
    ) -> FfiFuture<FfiResult<FfiResponse>>;
    /// `None` if the tool can run now, else why not.
    fn readiness(&self) -> Option<RString>;
}

/// A tool instance with its own `before_execution` / `after_execution`.
pub trait ToolInstanceHooks: ToolInstance {
    /// The tool's own `before_execution`, with the arguments as JSON text.
    fn before_execution(
        self: &Arc<Self>,
        ctx: FfiContext,
        args: RString,
    ) -> FfiFuture<FfiResult<()>>;
    /// The tool's own `after_execution`.
    fn after_execution(
        self: &Arc<Self>,
        ctx: FfiContext,
        response: FfiResponse,
    ) -> FfiFuture<FfiResult<()>>;
}

/// An extension instance as the export glue presents it to the host.
pub trait ExtensionInstance: Send + Sync + Sized + 'static {
    /// Runs the extension on the point's data (JSON text); the new data if it changed.
    fn execute(
        self: &Arc<Self>,
        ctx: FfiContext,
        data: RString,
    ) -> FfiFuture<FfiResult<ROption<RString>>>;
}

/// The hook entry points of tool type `T`: its own, or none (the host then runs its defaults
/// without crossing the boundary).
pub struct Hooks<T> {
    before: ROption<BeforeFn>,
    after: ROption<AfterFn>,
    instance: PhantomData<fn(T)>,
}

impl<T> Hooks<T> {
    /// No hooks of its own.
    pub fn none() -> Self {
        Self {
            before: RNone,
            after: RNone,
            instance: PhantomData,
        }
    }
}

impl<T: ToolInstanceHooks> Hooks<T> {
    /// `T`'s own hooks.
    pub fn of() -> Self {
        Self {
            before: RSome(before::<T> as BeforeFn),
            after: RSome(after::<T> as AfterFn),
            instance: PhantomData,
        }
    }
}

impl FfiTool {
    /// A tool instance for the host, with its metadata (`ToolInfo` as JSON).
    pub fn new<T: ToolInstance>(instance: T, hooks: Hooks<T>, info: RString) -> Self {
        let vtable = ToolVtable {
            execute: execute::<T>,
            before_execution: hooks.before,
            after_execution: hooks.after,
            drop: drop_instance::<T>,
            readiness: readiness::<T>,
        }
        .leak_into_prefix();
        let this = Arc::into_raw(Arc::new(instance)).cast();
        // SAFETY: the functions are written for `T`, whose `Arc` `this` is, and `T` is
        // `Send + Sync`.
        unsafe { Self::from_raw(this, vtable, info) }
    }
}

impl FfiExtension {
    /// An extension instance for the host, with its metadata (`ExtensionInfo` as JSON).
    pub fn new<E: ExtensionInstance>(instance: E, info: RString) -> Self {
        let vtable = ExtensionVtable {
            execute: extension_execute::<E>,
            drop: drop_instance::<E>,
        }
        .leak_into_prefix();
        let this = Arc::into_raw(Arc::new(instance)).cast();
        // SAFETY: as in `FfiTool::new`.
        unsafe { Self::from_raw(this, vtable, info) }
    }
}

/// Borrows the `Arc<T>` behind `this` without touching its count.
///
/// # Safety
/// `this` must come from `FfiTool::new` / `FfiExtension::new` for `T`, and its instance must
/// not be dropped yet (the vtable contract), as in every function below.
unsafe fn borrow<T>(this: *const c_void) -> ManuallyDrop<Arc<T>> {
    // SAFETY: per the contract above; never dropped, so the count is unchanged.
    ManuallyDrop::new(unsafe { Arc::from_raw(this.cast::<T>()) })
}

unsafe extern "C" fn execute<T: ToolInstance>(
    this: *const c_void,
    ctx: FfiContext,
    args: RString,
) -> FfiFuture<FfiResult<FfiResponse>> {
    unsafe { borrow::<T>(this) }.execute(ctx, args)
}

unsafe extern "C" fn readiness<T: ToolInstance>(this: *const c_void) -> ROption<RString> {
    unsafe { borrow::<T>(this) }.readiness().into()
}

unsafe extern "C" fn before<T: ToolInstanceHooks>(
    this: *const c_void,
    ctx: FfiContext,
    args: RString,
) -> FfiFuture<FfiResult<()>> {
    unsafe { borrow::<T>(this) }.before_execution(ctx, args)
}

unsafe extern "C" fn after<T: ToolInstanceHooks>(
    this: *const c_void,
    ctx: FfiContext,
    response: FfiResponse,
) -> FfiFuture<FfiResult<()>> {
    unsafe { borrow::<T>(this) }.after_execution(ctx, response)
}

unsafe extern "C" fn extension_execute<E: ExtensionInstance>(
    this: *const c_void,
    ctx: FfiContext,
    data: RString,
) -> FfiFuture<FfiResult<ROption<RString>>> {
    unsafe { borrow::<E>(this) }.execute(ctx, data)
}

unsafe extern "C" fn drop_instance<T>(this: *const c_void) {
    // SAFETY: the host gives back the reference `new` made, once. A panicking `Drop` must not
    // unwind into the host.
    let _ = catch_panic(|| unsafe { drop(Arc::from_raw(this.cast::<T>())) });
}
