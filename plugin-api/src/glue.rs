//! The glue behind [`export_tool!`](crate::export_tool) and
//! [`export_extension!`](crate::export_extension): an author's tool or extension as one of the
//! wire's instance types (plugin-abi writes their `extern "C"` functions), with the panic guard
//! and the plugin's runtime around every call. Not a public API: only the
//! macros use it (through the hidden `__private` module). The macros are defined here too.

use std::marker::PhantomData;
use std::sync::Arc;

use abi_stable::std_types::{ROption, RResult, RString};
use async_ffi::{FfiFuture, FutureExt};
use plugin_abi::export::{extension_module, tool_module, Package};
use plugin_abi::guard::{catch_panic, Guarded};
use plugin_abi::instance::{ExtensionInstance, Hooks, ToolInstance, ToolInstanceHooks};
use plugin_abi::wire::{FfiExtension, FfiTool, PluginModuleRef};
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

/// Plugin code called by the host: polled in the plugin's runtime, its panics caught.
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

/// An author's tool or extension as the host sees it (the wire's instance traits).
pub struct Exported<T>(T);

impl<T: Tool> ToolInstance for Exported<T> {
    fn execute(
        self: &Arc<Self>,
        ctx: FfiContext,
        args: RString,
    ) -> FfiFuture<FfiResult<FfiResponse>> {
        let this = self.clone();
        let ctx = Context::from_ffi(ctx);
        to_ffi_future(async move { execute_json(&this.0, &ctx, args).await })
    }

    fn readiness(&self) -> Option<RString> {
        // A panic is an answer too: the tool is not ready, and the panic says why.
        match catch_panic(|| self.0.readiness()) {
            Ok(readiness) => readiness.reason().map(RString::from),
            Err(panic) => Some(format!("its readiness check panicked: {panic}").into()),
        }
    }
}

impl<T: ToolHooks> ToolInstanceHooks for Exported<T> {
    fn before_execution(
        self: &Arc<Self>,
        ctx: FfiContext,
        args: RString,
    ) -> FfiFuture<FfiResult<()>> {
        let this = self.clone();
        let ctx = Context::from_ffi(ctx);
        to_ffi_future(async move {
            let args = Args::from_json(&args)?;
            this.0.before_execution(&ctx, &args).await
        })
    }

    fn after_execution(
        self: &Arc<Self>,
        ctx: FfiContext,
        response: FfiResponse,
    ) -> FfiFuture<FfiResult<()>> {
        let this = self.clone();
        let ctx = Context::from_ffi(ctx);
        to_ffi_future(async move {
            let response = Response::from(response);
            this.0.after_execution(&ctx, &response).await
        })
    }
}

impl<E: Extension> ExtensionInstance for Exported<E> {
    fn execute(
        self: &Arc<Self>,
        ctx: FfiContext,
        data: RString,
    ) -> FfiFuture<FfiResult<ROption<RString>>> {
        let this = self.clone();
        let ctx = Context::from_ffi(ctx);
        to_ffi_future(async move {
            let mut data = PointData::from_json(data);
            this.0.execute(&ctx, &mut data).await?;
            Ok(ROption::from(data.into_changed_json().map(RString::from)))
        })
    }
}

/// A call of `execute` as it arrives from the host: JSON text in, the wire response out. The
/// `testing` kit calls it too, so a test sees what the host would. The text is dropped once
/// parsed, before the tool runs: a large argument is not held twice while the tool works.
pub(crate) async fn execute_json<T: Tool>(
    tool: &T,
    ctx: &Context,
    args: impl AsRef<str>,
) -> Result<FfiResponse, ToolError> {
    let parsed = Args::from_json(args.as_ref());
    drop(args);
    tool.execute(ctx, parsed?).await.map(FfiResponse::from)
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

/// Chosen when the tool implements [`ToolHooks`].
pub trait ProbeWithHooks<T> {
    /// The hook entry points.
    fn hooks(&self) -> Hooks<Exported<T>>;
}

impl<T: ToolHooks> ProbeWithHooks<T> for &HookProbe<T> {
    fn hooks(&self) -> Hooks<Exported<T>> {
        Hooks::of()
    }
}

/// Chosen otherwise: the host runs its defaults without crossing the boundary.
pub trait ProbeWithoutHooks<T> {
    /// No hook entry points.
    fn hooks(&self) -> Hooks<Exported<T>>;
}

impl<T> ProbeWithoutHooks<T> for HookProbe<T> {
    fn hooks(&self) -> Hooks<Exported<T>> {
        Hooks::none()
    }
}

/// Creates a tool instance (the body of the macro's `new_tool`).
pub fn new_tool<T: Tool>(
    package: &'static Package,
    make: impl FnOnce() -> T,
    hooks: Hooks<Exported<T>>,
) -> FfiResult<FfiTool> {
    catch("the tool's constructor", || {
        let tool = make();
        let mut info = tool.info();
        package.fill(&mut info.description, &mut info.version);
        let info = serde_json::to_string(&info)?;
        Ok(FfiTool::new(Exported(tool), hooks, info.into()))
    })
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
        Ok(FfiExtension::new(Exported(ext), info.into()))
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
