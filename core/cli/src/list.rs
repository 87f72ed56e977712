//! `toolhost list`: the tools a profile sees, its extensions in run order, skipped files.

use std::process::ExitCode;

use anyhow::Result;
use serde_json::{json, Value};
use toolhost::config::{Access, Config, PolicyDecision};
use toolhost::{Catalog, CatalogMode, Host, ListedTool};

use crate::Global;
use crate::{check_profile, relative};

/// Every tool a profile sees, with the layer and file that wins and what it shadows.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The agent profile.
    #[arg(long, short, default_value = "default")]
    profile: String,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    /// Load every library, as a call would, instead of trusting the metadata cache
    /// (usr/.cache/metadata.json) for libraries whose bytes it knows.
    #[arg(long)]
    load: bool,
}

impl Args {
    /// `toolhost list`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        list(&global.host()?, &self.profile, self.json, self.load)
    }
}

pub(crate) fn list(host: &Host, profile: &str, json: bool, load: bool) -> Result<ExitCode> {
    check_profile(host, profile)?;
    crate::mcp::settle(host, profile)?;
    let mode = match load {
        true => CatalogMode::Load,
        false => CatalogMode::Cached,
    };
    let listing = host.catalog_with(profile, mode);
    if json {
        let value = listing_json(host, profile, &listing);
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print_listing(host, profile, &listing);
    }
    Ok(ExitCode::SUCCESS)
}

/// The profile's configuration; a mistake in it is a warning here (every call reports it).
fn profile_config(host: &Host, profile: &str) -> Option<std::sync::Arc<Config>> {
    host.config(profile)
        .map_err(|e| eprintln!("warning: {}", toolhost::mask_log_line(&e.to_string())))
        .ok()
}

/// The file that both `a` and `b` (links in two layers) resolve to, if they resolve to one.
fn same_file(a: &std::path::Path, b: &std::path::Path) -> Option<std::path::PathBuf> {
    let a = std::fs::canonicalize(a).ok()?;
    (std::fs::canonicalize(b).ok()? == a).then_some(a)
}

/// Why the config refuses the tool (`[access]`), if it does.
fn denial(config: Option<&Config>, tool: &ListedTool) -> Option<String> {
    let capabilities = &tool.info().capabilities;
    match config?.access(&tool.name, capabilities) {
        Access::Denied { reason } => Some(reason),
        Access::Allowed => None,
    }
}

/// The approval policy for the tool's calls, and where it was decided.
fn policy(config: Option<&Config>, tool: &ListedTool) -> Option<(PolicyDecision, String)> {
    let risk = tool.info().risk_level;
    let (decision, source) = config?.policy(&tool.name, risk);
    Some((decision, source.to_string()))
}

pub(crate) fn print_listing(host: &Host, profile: &str, listing: &Catalog) {
    let config = profile_config(host, profile);
    let config = config.as_deref();
    let fragments: std::collections::HashSet<String> = host
        .prompt_fragments(profile)
        .into_iter()
        .map(|(file, _)| file)
        .collect();
    println!(
        "Tools for profile '{profile}' (root {}):",
        host.root().display()
    );
    let is_root = toolhost::Layout::new(host.root()).is_root();
    match (listing.tools.is_empty(), is_root) {
        (false, _) => {}
        (true, true) => {
            println!("  (none: run `cargo xtask install` to build the built-in plugins)")
        }
        (true, false) => println!(
            "  (none: {} has no core/, plugins/ or usr/ folder; pass --root, or set \
             TOOLHOST_ROOT, to the folder that has them)",
            host.root().display()
        ),
    }
    for tool in &listing.tools {
        print_tool(host, config, &fragments, tool);
    }
    #[cfg(feature = "mcp")]
    print_mcp(host, profile, listing);
    match toolhost::governance::overdue() {
        0 => {}
        1 => println!("1 call still running past its deadline or a stop"),
        n => println!("{n} calls still running past their deadline or a stop"),
    }
    print_extensions_and_skipped(host, listing);
}

/// One tool: name, risk, layer and file, then its description (or a warning that it has
/// none), what it shadows, and why it is unavailable, not allowed, or asked about.
fn print_tool(
    host: &Host,
    config: Option<&Config>,
    fragments: &std::collections::HashSet<String>,
    tool: &ListedTool,
) {
    let info = tool.info();
    let isolated = match (tool.is_isolated(), tool.sandbox()) {
        (true, Some(sandbox)) => format!(" (isolated, {sandbox})"),
        (true, None) => " (isolated: runs in a worker process, not sandboxed)".to_owned(),
        (false, _) => String::new(),
    };
    println!(
        "  {:<12} {:<5} [{} layer] {}{isolated}",
        tool.name,
        info.risk_level.as_str(),
        tool.layer.kind.as_str(),
        relative(host, &tool.path)
    );
    let fragment = format!("agent.system.tool.{}.md", tool.name);
    if info.description.trim().is_empty() && !fragments.contains(&fragment) {
        println!(
            "               warning: no description: the model sees only the name; give \
             one in ToolInfo::new(\"...\") or a prompts/agent.system.tool.{}.md fragment",
            tool.name
        );
    } else if !info.description.trim().is_empty() {
        println!("               {}", info.description);
    }
    for shadow in &tool.shadows {
        println!("               shadows {}", relative(host, shadow));
        if let Some(file) = same_file(&tool.path, shadow) {
            println!(
                "               warning: both links resolve to {}: building either crate \
                 replaces the other layer's library; give each crate its own library name \
                 (`[lib] name` in its Cargo.toml, as `toolhost new` does) or its own \
                 target folder",
                toolhost::Escaped(&file)
            );
        }
    }
    if let Some(why) = tool.unavailable() {
        println!("               unavailable: {why}");
    }
    if let Some(why) = denial(config, tool) {
        println!("               not allowed: {why}");
    }
    match policy(config, tool) {
        Some((PolicyDecision::Allow, _)) | None => {}
        Some((decision, source)) => println!("               policy: {decision} ({source})"),
    }
}

/// The extensions in the order they run, and the files skipped with why.
fn print_extensions_and_skipped(host: &Host, listing: &Catalog) {
    if !listing.extensions.is_empty() {
        println!("Extensions, in the order they run:");
    }
    for (point, run) in &listing.extensions {
        println!("  {point}:");
        for ext in run {
            let isolated = match ext.isolated {
                true => " (isolated)",
                false => "",
            };
            let file = relative(host, &ext.path);
            println!("    {:<24} {file}{isolated}", ext.name);
        }
    }
    if !listing.skipped.is_empty() {
        println!("Skipped:");
        for e in &listing.skipped {
            println!("  {}: {}", relative(host, &e.path), e.reason);
        }
    }
}

/// The profile's MCP tools (layer `mcp:<server>`), servers not ready, and mistakes in its
/// `mcp.json` files.
#[cfg(feature = "mcp")]
fn print_mcp(host: &Host, profile: &str, listing: &Catalog) {
    for listed in &listing.mcp {
        let (tool, info) = (&listed.tool, listed.tool.info());
        println!(
            "  {:<12} {:<5} [mcp:{} layer]",
            tool.name(),
            info.risk_level.as_str(),
            tool.server()
        );
        if !info.description.is_empty() {
            println!(
                "               {}",
                info.description.lines().next().unwrap_or_default()
            );
        }
        for shadow in &listed.shadows {
            println!("               shadows {}", relative(host, shadow));
        }
        if let Some(why) = tool.unavailable() {
            println!("               unavailable: {why}");
        }
    }
    for server in host.mcp_servers(profile) {
        if let toolhost::mcp::McpState::Failed(why) = &server.state {
            println!("  MCP server {} failed: {why}", server.name);
        } else if server.state.name() == "starting" {
            println!("  MCP server {} is still starting", server.name);
        }
    }
    for e in host.mcp_config_errors(profile) {
        println!("  {e}");
    }
}

/// The profile's MCP tools as rows of the `tools` array.
#[cfg(feature = "mcp")]
fn mcp_json(host: &Host, config: Option<&Config>, listing: &Catalog) -> Vec<Value> {
    listing
        .mcp
        .iter()
        .map(|m| {
            let info = m.tool.info();
            json!({
                "name": m.tool.name(),
                "layer": format!("mcp:{}", m.tool.server()),
                "server": m.tool.server(),
                "shadows": m.shadows.iter().map(|p| relative(host, p)).collect::<Vec<_>>(),
                "description": info.description,
                "risk_level": info.risk_level.as_str(),
                "parameters": info.parameters,
                "capabilities": info.capabilities,
                "breaker": m.tool.breaker_state().name(),
                "unavailable": m.tool.unavailable(),
                "denied": config.and_then(|c| match c.access(m.tool.name(), &info.capabilities) {
                    Access::Denied { reason } => Some(reason),
                    Access::Allowed => None,
                }),
            })
        })
        .collect::<Vec<_>>()
}

fn listing_json(host: &Host, profile: &str, listing: &Catalog) -> Value {
    let config = profile_config(host, profile);
    let config = config.as_deref();
    let extensions: serde_json::Map<String, Value> = listing
        .extensions
        .iter()
        .map(|(point, run)| {
            let list = run
                .iter()
                .map(|e| {
                    json!({
                        "name": e.name,
                        "file": relative(host, &e.path),
                        "description": e.info.description,
                        "isolated": e.isolated,
                    })
                })
                .collect::<Vec<_>>();
            (point.clone(), Value::Array(list))
        })
        .collect();
    #[cfg(feature = "mcp")]
    let (mcp_tools, mcp_errors) = (
        mcp_json(host, config, listing),
        host.mcp_config_errors(profile)
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>(),
    );
    // Without MCP the JSON keeps its shape: no MCP tools, no mistakes in mcp.json.
    #[cfg(not(feature = "mcp"))]
    let (mcp_tools, mcp_errors) = (Vec::<Value>::new(), Vec::<String>::new());
    json!({
        "overdue_calls": toolhost::governance::overdue(),
        "extensions": extensions,
        "tools": mcp_tools.into_iter().chain(listing.tools.iter().map(|t| {
            let info = t.info();
            json!({
                "name": t.name,
                "layer": t.layer.kind.as_str(),
                "layer_dir": t.layer.label,
                "file": relative(host, &t.path),
                "shadows": t.shadows.iter().map(|p| relative(host, p)).collect::<Vec<_>>(),
                "description": info.description,
                "risk_level": info.risk_level.as_str(),
                "version": info.version,
                "package": t.package(),
                "isolated": t.is_isolated(),
                "sandbox": t.sandbox().map(|s| json!({"enforced": s.enforced, "grants": s.grants, "limits": s.limits})),
                "contract": t.contract(),
                "parameters": info.parameters,
                "capabilities": info.capabilities,
                "timeout_seconds": info.timeout_seconds,
                "max_retries": info.max_retries,
                "ready": t.readiness().is_ready(),
                "not_ready_reason": t.readiness().reason(),
                "breaker": t.breaker_state().name(),
                "unavailable": t.unavailable(),
                "denied": denial(config, t),
                "policy": policy(config, t).map(|(decision, _)| decision.as_str()),
            })
        })).collect::<Vec<_>>(),
        "mcp_errors": mcp_errors,
        "skipped": listing.skipped.iter().map(|e| json!({
            "file": relative(host, &e.path),
            "kind": e.kind.as_str(),
            "reason": e.reason,
        })).collect::<Vec<_>>(),
    })
}
