//! The glue behind [`export_tool!`](crate::export_tool) and
//! [`export_extension!`](crate::export_extension): the `extern "C"` entry points of a tool or
//! extension type, on top of the wire contract in `plugin-abi`. Not a public API: only the
//! macros use it (through the hidden `__private` module). The macros are defined here too.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{RNone, ROption, RResult, RSome, RString};
use async_ffi::{FfiFuture, FutureExt};
use plugin_abi::export::{extension_module, tool_module, Package};
use plugin_abi::guard::{catch_panic, Guarded};
use plugin_abi::wire::{
    AfterFn, BeforeFn, ExtensionVtable, FfiExtension, FfiTool, PluginModuleRef, ToolVtable,
};
use plugin_abi::{FfiContext, FfiResponse, FfiResult};

use crate::runtime::PluginRuntime;
use crate::{Args, Context, Extension, PointData, Response, Tool, ToolError, ToolHooks};

extern "C" fn shutdown_glue() {
    // A panic must not cross the boundary; there is nobody to report it to at shutdown.
    let _ = catch_panic(crate::runtime::shutdown);
}

/// The root module of a tool library.
pub fn tool_root(
    package: &'static Package,
    new_tool: extern "C" fn() -> FfiResult<FfiTool>,
) -> PluginModuleRef {
    tool_module(package, new_tool, shutdown_glue)
}

/// The root module of an extension library.
pub fn extension_root(
    package: &'static Package,
    new_extension: extern "C" fn() -> FfiResult<FfiExtension>,
) -> PluginModuleRef {
    extension_module(package, new_extension, shutdown_glue)
}

fn catch<T>(what: &str, f: impl FnOnce() -> Result<T, ToolError>) -> FfiResult<T> {
    match catch_panic(f) {
        Ok(Ok(v)) => RResult::ROk(v),
        Ok(Err(e)) => RResult::RErr(e.into()),
        Err(message) => RResult::RErr(ToolError::internal(format!("{what}: {message}")).into()),
    }
}

fn to_ffi_future<T: Send + 'static>(
    fut: impl std::future::Future<Output = Result<T, ToolError>> + Send + 'static,
) -> FfiFuture<FfiResult<T>> {
    let guarded = Guarded::<_, PluginRuntime>::new(fut);
    async move {
        match guarded.await {
            Ok(v) => RResult::ROk(v),
            Err(e) => RResult::RErr(e.into()),
        }
    }
    .into_ffi()
}

/// Finds out whether a tool type implements [`ToolHooks`] (autoref specialisation: the macro
/// calls `(&&HookProbe::<T>::new()).hooks()`).
pub struct HookProbe<T>(PhantomData<T>);

impl<T> HookProbe<T> {
    /// A probe for `T`.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

/// The hook entry points of a tool, if it has its own.
pub type Hooks = (ROption<BeforeFn>, ROption<AfterFn>);

/// Chosen when the tool implements [`ToolHooks`].
pub trait ProbeWithHooks {
    /// The hook entry points.
    fn hooks(&self) -> Hooks;
}

impl<T: ToolHooks> ProbeWithHooks for &HookProbe<T> {
    fn hooks(&self) -> Hooks {
        (
            RSome(before_glue::<T> as BeforeFn),
            RSome(after_glue::<T> as AfterFn),
        )
    }
}

/// Chosen otherwise: the host runs its defaults without crossing the boundary.
pub trait ProbeWithoutHooks {
    /// No hook entry points.
    fn hooks(&self) -> Hooks;
}

impl<T> ProbeWithoutHooks for HookProbe<T> {
    fn hooks(&self) -> Hooks {
        (RNone, RNone)
    }
}

/// Borrows the `Arc<T>` behind `this` without touching its count.
///
/// # Safety
/// `this` must come from `Arc::<T>::into_raw` and still be owned by the host.
unsafe fn borrow_arc<T>(this: *const c_void) -> ManuallyDrop<Arc<T>> {
    // SAFETY: per the contract above; never dropped, so the count is unchanged.
    ManuallyDrop::new(unsafe { Arc::from_raw(this.cast::<T>()) })
}

/// Creates a tool instance (the body of the macro's `new_tool`).
pub fn new_tool<T: Tool>(
    package: &'static Package,
    make: impl FnOnce() -> T,
    hooks: Hooks,
) -> FfiResult<FfiTool> {
    catch("the tool's constructor", || {
        let tool = make();
        let mut info = tool.info();
        package.fill(&mut info.description, &mut info.version);
        let info = serde_json::to_string(&info)?;
        let vtable = ToolVtable {
            execute: execute_glue::<T>,
            before_execution: hooks.0,
            after_execution: hooks.1,
            drop: drop_glue::<T>,
            readiness: readiness_glue::<T>,
        }
        .leak_into_prefix();
        let this = Arc::into_raw(Arc::new(tool)).cast();
        // SAFETY: the functions are written for `T`, whose `Arc` `this` is, and `T: Send + Sync`.
        Ok(unsafe { FfiTool::new(this, vtable, info.into()) })
    })
}

unsafe extern "C" fn execute_glue<T: Tool>(
    this: *const c_void,
    ctx: FfiContext,
    args: RString,
) -> FfiFuture<FfiResult<FfiResponse>> {
    // SAFETY: the host passes the pointer it got from `new_tool`.
    let tool = Arc::clone(&*unsafe { borrow_arc::<T>(this) });
    let ctx = Context::from_ffi(ctx);
    to_ffi_future(async move { execute_json(&*tool, &ctx, &args).await })
}

/// A call of `execute` as it arrives from the host: JSON text in, the wire response out. The
/// `testing` kit calls it too, so a test sees what the host would.
pub(crate) async fn execute_json<T: Tool>(
    tool: &T,
    ctx: &Context,
    args: &str,
) -> Result<FfiResponse, ToolError> {
    let args = Args::from_json(args)?;
    tool.execute(ctx, args).await.map(FfiResponse::from)
}

unsafe extern "C" fn readiness_glue<T: Tool>(this: *const c_void) -> ROption<RString> {
    // SAFETY: as in `execute_glue`.
    let tool = unsafe { borrow_arc::<T>(this) };
    // A panic is an answer too: the tool is not ready, and the panic says why.
    match catch_panic(|| tool.readiness()) {
        Ok(readiness) => match readiness.reason() {
            None => ROption::RNone,
            Some(reason) => ROption::RSome(reason.into()),
        },
        Err(panic) => ROption::RSome(format!("its readiness check panicked: {panic}").into()),
    }
}

unsafe extern "C" fn before_glue<T: ToolHooks>(
    this: *const c_void,
    ctx: FfiContext,
    args: RString,
) -> FfiFuture<FfiResult<()>> {
    // SAFETY: as in `execute_glue`.
    let tool = Arc::clone(&*unsafe { borrow_arc::<T>(this) });
    let ctx = Context::from_ffi(ctx);
    to_ffi_future(async move {
        let args = Args::from_json(&args)?;
        tool.before_execution(&ctx, &args).await
    })
}

unsafe extern "C" fn after_glue<T: ToolHooks>(
    this: *const c_void,
    ctx: FfiContext,
    response: FfiResponse,
) -> FfiFuture<FfiResult<()>> {
    // SAFETY: as in `execute_glue`.
    let tool = Arc::clone(&*unsafe { borrow_arc::<T>(this) });
    let ctx = Context::from_ffi(ctx);
    to_ffi_future(async move {
        let response = Response::from(response);
        tool.after_execution(&ctx, &response).await
    })
}

unsafe extern "C" fn drop_glue<T>(this: *const c_void) {
    // SAFETY: the host gives back the reference it got from `new_tool`/`new_extension`, once.
    // A panicking Drop must not unwind into the host.
    let _ = catch_panic(|| unsafe { drop(Arc::from_raw(this.cast::<T>())) });
}

/// Creates an extension instance (the body of the macro's `new_extension`).
pub fn new_extension<E: Extension>(
    package: &'static Package,
    make: impl FnOnce() -> E,
) -> FfiResult<FfiExtension> {
    catch("the extension's constructor", || {
        let ext = make();
        let mut info = ext.info();
        package.fill(&mut info.description, &mut info.version);
        let info = serde_json::to_string(&info)?;
        let vtable = ExtensionVtable {
            execute: extension_glue::<E>,
            drop: drop_glue::<E>,
        }
        .leak_into_prefix();
        let this = Arc::into_raw(Arc::new(ext)).cast();
        // SAFETY: as in `new_tool`.
        Ok(unsafe { FfiExtension::new(this, vtable, info.into()) })
    })
}

unsafe extern "C" fn extension_glue<E: Extension>(
    this: *const c_void,
    ctx: FfiContext,
    data: RString,
) -> FfiFuture<FfiResult<ROption<RString>>> {
    // SAFETY: as in `execute_glue`.
    let ext = Arc::clone(&*unsafe { borrow_arc::<E>(this) });
    let ctx = Context::from_ffi(ctx);
    to_ffi_future(async move {
        let mut data = PointData::from_json(data);
        ext.execute(&ctx, &mut data).await?;
        Ok(ROption::from(data.into_changed_json().map(RString::from)))
    })
}

/// Exports a [`Tool`] from a `cdylib` crate. This is the only FFI glue a tool needs.
///
/// `export_tool!(MyTool)` creates the tool with `Default::default()`;
/// `export_tool!(MyTool = MyTool::new(...))` with an expression of your own, evaluated when the
/// host loads the library (a panic there is reported as a load error). If `MyTool` also
/// implements [`ToolHooks`], its hooks replace the host's defaults.
///
/// The crate's `Cargo.toml` needs `crate-type = ["cdylib"]`; its `description` and `version`
/// fill the [`ToolInfo`](crate::ToolInfo) fields the tool leaves empty. Use the macro once per
/// library.
///
/// ```
/// use plugin_api::{Args, Context, Response, Tool, ToolError};
///
/// struct Counter {
///     start: u64,
/// }
///
/// impl Tool for Counter {
///     async fn execute(&self, _ctx: &Context, args: Args) -> Result<Response, ToolError> {
///         let n = args.get("n").and_then(|v| v.as_u64()).unwrap_or(0);
///         Ok(Response::text((self.start + n).to_string()))
///     }
/// }
///
/// // No `Default`: say how to make one.
/// plugin_api::export_tool!(Counter = Counter { start: 100 });
/// ```
#[macro_export]
macro_rules! export_tool {
    ($ty:ty) => {
        $crate::export_tool!($ty = <$ty as ::core::default::Default>::default());
    };
    ($ty:ty = $make:expr) => {
        // Names the missing trait at the user's type, before any glue fails on it.
        const _: fn() = || {
            fn assert_tool<T: $crate::Tool>() {}
            assert_tool::<$ty>();
        };
        $crate::__export_plugin!(tool_root, FfiTool, |package| {
            #[allow(unused_imports)]
            use $crate::__private::{ProbeWithHooks as _, ProbeWithoutHooks as _};
            let hooks = (&&$crate::__private::HookProbe::<$ty>::new()).hooks();
            $crate::__private::new_tool::<$ty>(package, || $make, hooks)
        });
    };
}

/// Exports an [`Extension`] from a `cdylib` crate; the counterpart of
/// [`export_tool!`](crate::export_tool) with the same two forms.
///
/// ```
/// use plugin_api::points::ToolOutputUpdate;
/// use plugin_api::{Context, Extension, ExtensionInfo, PointData, ToolError};
///
/// /// Shows progress in capitals (installed in `extensions/tool_output_update/`).
/// #[derive(Default)]
/// struct LoudProgress;
///
/// impl Extension for LoudProgress {
///     fn info(&self) -> ExtensionInfo {
///         ExtensionInfo::new("Shows progress in capitals.")
///     }
///     async fn execute(&self, _ctx: &Context, data: &mut PointData) -> Result<(), ToolError> {
///         let mut update: ToolOutputUpdate = data.read()?;
///         update.progress = update.progress.to_uppercase();
///         data.write(&update)
///     }
/// }
///
/// plugin_api::export_extension!(LoudProgress);
/// ```
#[macro_export]
macro_rules! export_extension {
    ($ty:ty) => {
        $crate::export_extension!($ty = <$ty as ::core::default::Default>::default());
    };
    ($ty:ty = $make:expr) => {
        // Names the missing trait at the user's type, before any glue fails on it.
        const _: fn() = || {
            fn assert_extension<T: $crate::Extension>() {}
            assert_extension::<$ty>();
        };
        $crate::__export_plugin!(extension_root, FfiExtension, |package| {
            $crate::__private::new_extension::<$ty>(package, || $make)
        });
    };
}

/// Writes the exported root module; shared by the two export macros.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_plugin {
    ($module:ident, $instance:ident, |$package:ident| $create:block) => {
        #[doc(hidden)]
        #[unsafe(export_name = "_1as_0lib_1header_0root_bmodule_bloader")]
        pub static __TOOLHOST_PLUGIN_ROOT: $crate::__private::LibHeader = {
            static PACKAGE: $crate::__private::Package = $crate::__private::Package {
                name: ::core::env!("CARGO_PKG_NAME"),
                version: ::core::env!("CARGO_PKG_VERSION"),
                description: ::core::env!("CARGO_PKG_DESCRIPTION"),
            };
            extern "C" fn create(
            ) -> $crate::__private::FfiResult<$crate::__private::$instance> {
                let $package = &PACKAGE;
                $create
            }
            fn root() -> $crate::__private::PluginModuleRef {
                $crate::__private::$module(&PACKAGE, create)
            }
            extern "C" fn erased() -> $crate::__private::RootModuleResult {
                $crate::__private::call_root_module_loader(root)
            }
            // SAFETY: the same construction `#[abi_stable::export_root_module]` emits.
            unsafe {
                $crate::__private::LibHeader::from_constructor::<
                    $crate::__private::PluginModuleRef,
                >(erased, $crate::__private::CheckTypeLayout::Yes)
            }
        };
    };
}
