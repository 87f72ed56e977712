//! Every file and folder name the host knows, in one place (the paths they make are
//! [`Layout`](super::Layout)'s).

/// The name of the lock file, in `usr/` (see [`pins`](crate::pins)).
pub const PINS_FILE_NAME: &str = "plugins.lock";

/// The file of the MCP tool definitions approved by versions before 0.9, in `usr/` (see
/// `mcp::pins`): read for a server that has no file of its own in [`MCP_PINS_DIR_NAME`] yet.
pub const MCP_PINS_FILE_NAME: &str = "mcp-tools.lock";

/// The folder of the MCP tool definitions approved, in `usr/`: one `SERVER.lock` per server
/// (see `mcp::pins`).
pub const MCP_PINS_DIR_NAME: &str = "mcp-tools";

/// The metadata cache's folder, in `usr/`: it holds no plugins, and the watcher ignores it.
pub const CACHE_DIR_NAME: &str = ".cache";

/// The metadata cache file's name, in [`CACHE_DIR_NAME`].
pub const METADATA_FILE_NAME: &str = "metadata.json";

/// The file extension of native libraries on this platform (`so`, `dylib`, `dll`).
pub const LIBRARY_EXTENSION: &str = std::env::consts::DLL_EXTENSION;

/// The name of a configuration file: `usr/toolhost.toml`, `usr/agents/<P>/toolhost.toml`.
pub const CONFIG_FILE_NAME: &str = "toolhost.toml";

/// The file that switches a plugin folder off.
pub const TOGGLE_OFF: &str = ".toggle-0";

/// The installed packages' lock file name, in `usr/` (see [`crate::package::lock`]).
pub const PACKAGES_LOCK_FILE_NAME: &str = "packages.lock";

/// The folder under `usr/` holding the trusted public keys, one `<key id>.pub` each.
pub const TRUSTED_KEYS_DIR: &str = "trusted-keys";

/// A package's manifest file name, at the top of every package.
pub const MANIFEST_FILE_NAME: &str = "toolhost-plugin.toml";

/// The audit log's file name in its folder (see [`crate::audit`]).
pub const AUDIT_FILE_NAME: &str = "audit.jsonl";

/// The audit head's file name in the log's folder.
pub const AUDIT_HEAD_FILE_NAME: &str = "head.json";

/// The folder of the audit values stored apart, in the log's folder.
pub const AUDIT_BLOBS_DIR: &str = "blobs";

/// The record of the library layouts checked, in `usr/.cache/`.
pub const CHECKED_LAYOUTS_FILE_NAME: &str = "checked-layouts";
