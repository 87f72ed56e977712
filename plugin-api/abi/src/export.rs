//! What the export macros of `plugin-api` put in a library: its root module and the symbol
//! the host looks it up by.

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{RNone, RSome, RStr};

pub use abi_stable::library::{
    __call_root_module_loader as call_root_module_loader, CheckTypeLayout, LibHeader,
    RootModuleResult,
};

use crate::wire::{FfiExtension, FfiResult, FfiTool, PluginModule, PluginModuleRef};

/// What the macros learn from the plugin crate's `Cargo.toml`.
#[derive(Debug)]
pub struct Package {
    /// `CARGO_PKG_NAME`.
    pub name: &'static str,
    /// `CARGO_PKG_VERSION`.
    pub version: &'static str,
    /// `CARGO_PKG_DESCRIPTION`.
    pub description: &'static str,
}

impl Package {
    /// Fills the description and version a plugin's metadata left empty.
    pub fn fill(&self, description: &mut String, version: &mut String) {
        for (field, value) in [(description, self.description), (version, self.version)] {
            if field.is_empty() {
                *field = value.to_owned();
            }
        }
    }
}

/// The root module of a tool library; `shutdown` stops the plugin's own runtime.
pub fn tool_module(
    package: &'static Package,
    new_tool: extern "C" fn() -> FfiResult<FfiTool>,
    shutdown: extern "C" fn(),
) -> PluginModuleRef {
    PluginModule {
        package: RStr::from_str(package.name),
        package_version: RStr::from_str(package.version),
        new_tool: RSome(new_tool),
        new_extension: RNone,
        shutdown,
    }
    .leak_into_prefix()
}

/// The root module of an extension library.
pub fn extension_module(
    package: &'static Package,
    new_extension: extern "C" fn() -> FfiResult<FfiExtension>,
    shutdown: extern "C" fn(),
) -> PluginModuleRef {
    PluginModule {
        package: RStr::from_str(package.name),
        package_version: RStr::from_str(package.version),
        new_tool: RNone,
        new_extension: RSome(new_extension),
        shutdown,
    }
    .leak_into_prefix()
}
