//! `toolhost` built without its `mcp` feature (the Windows build with Rust 1.85,
//! docs/src/guide/building.md, "Windows under Wine"): there are no MCP servers to wait for or
//! to ask inputs for, and `serve-mcp` and `mcp` are refused with one line saying why.

use anyhow::Result;
use toolhost::Host;

/// Nothing to wait for: this build starts no MCP server.
pub(crate) fn settle(_: &Host, _: &str) -> Result<()> {
    Ok(())
}

/// Nothing to ask: this build reads no mcp.json.
pub(crate) fn ask_inputs(_: &Host, _: &str) -> Result<()> {
    Ok(())
}

/// The one-line reason for a command line clap refused because it names a command this build
/// leaves out (`serve-mcp`, `mcp`), or `None` for any other mistake.
pub(crate) fn left_out(error: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::InvalidSubcommand {
        return None;
    }
    let Some(ContextValue::String(name)) = error.get(ContextKind::InvalidSubcommand) else {
        return None;
    };
    matches!(name.as_str(), "serve-mcp" | "mcp").then(|| {
        format!(
            "toolhost {name}: not in this toolhost, built without its `mcp` feature (as the \
             Windows build is: the MCP SDK, rmcp, needs Rust 1.88)"
        )
    })
}
