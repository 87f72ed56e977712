//! `toolhost mcp`: the profile's MCP servers, each with its state, its tools and its last
//! error; exit 1 when a file has a mistake or a server is not ready.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use serde_json::{json, Value};
use toolhost::mcp::{McpServerStatus, McpState};
use toolhost::Host;

use crate::approve::shown;
use crate::check_profile;
use crate::Global;
use std::path::PathBuf;

mod import;
mod inputs;
pub(crate) use import::import;
pub(crate) use inputs::ask_inputs;

/// The profile's MCP servers (usr/mcp.json, usr/agents/<P>/mcp.json): each one's state
/// (starting, ready with N tools, failed with the reason), its tools and its last error.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The agent profile.
    #[arg(long, short, default_value = "default")]
    profile: String,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    action: Option<Action>,
}

#[derive(clap::Subcommand)]
enum Action {
    /// The tools of SERVER held back: those whose definition (description, schemas,
    /// annotations) changed since it was first seen or last approved, and those it added
    /// since (usr/mcp-tools/SERVER.lock), each change shown with the digest to approve them
    /// by; exit 1 if any.
    Diff {
        /// The server's name in mcp.json.
        server: String,
    },
    /// Approve the held-back tool definitions of SERVER that `toolhost mcp diff SERVER`
    /// showed: recorded in usr/mcp-tools/SERVER.lock, its tools are offered again. Nothing is
    /// approved if the server's definitions are not those the digest names.
    Approve {
        /// The server's name in mcp.json.
        server: String,
        /// The digest `toolhost mcp diff SERVER` printed for the changes it showed.
        #[arg(long)]
        digest: String,
    },
    /// Sign in to SERVER (an HTTP server that asks for OAuth): the URL is opened in a browser
    /// and printed, a listener on 127.0.0.1 takes the redirect, and the tokens are kept in
    /// usr/mcp-tokens/SERVER.json (mode 0600, never printed). With "grant":
    /// "client_credentials" in its "oauth" settings no browser is involved.
    Login {
        /// The server's name in mcp.json.
        server: String,
        /// Print the URL only; do not open a browser.
        #[arg(long, conflicts_with = "fetch")]
        no_browser: bool,
        /// Fetch the URL with a plain GET that follows the redirects (headless use and tests,
        /// for an authorization server that approves without a person; the environment
        /// variable TOOLHOST_MCP_LOGIN_FETCH=1 does the same for every command).
        #[arg(long)]
        fetch: bool,
    },
    /// Merge the servers of a Cursor or Claude (`mcpServers`), VS Code (`servers`, with its
    /// `inputs`) or Zed (`context_servers`) file into usr/mcp.json; a name already there
    /// refuses the import.
    Import {
        /// The file (`.cursor/mcp.json`, `.vscode/mcp.json`, Zed's settings.json, ...).
        file: PathBuf,
    },
}

impl Args {
    /// `toolhost mcp` and its actions.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        let profile = &self.profile;
        match self.action {
            None => {
                let host = global.host()?;
                ask_inputs(&host, profile)?;
                mcp(&host, profile, self.json)
            }
            Some(Action::Diff { server }) => diff(&global.host()?, profile, &server),
            Some(Action::Approve { server, digest }) => {
                approve(&global.host()?, profile, &server, &digest)
            }
            Some(Action::Login {
                server,
                no_browser,
                fetch,
            }) => login(&global.host()?, profile, &server, no_browser, fetch),
            Some(Action::Import { file }) => import(&global.root, &file),
        }
    }
}

/// How long a command that shows the servers waits for those still starting.
pub(crate) const SETTLE: Duration = Duration::from_secs(20);

/// Waits (at most [`SETTLE`]) until none of the profile's servers is still starting.
pub(crate) fn settle(host: &Host, profile: &str) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(host.wait_for_mcp(profile, SETTLE));
    Ok(())
}

pub(crate) fn mcp(host: &Host, profile: &str, json: bool) -> Result<ExitCode> {
    check_profile(host, profile)?;
    settle(host, profile)?;
    let servers = host.mcp_servers(profile);
    let errors = host.mcp_config_errors(profile);
    if json {
        let value = json!({
            "servers": servers.iter().map(server_json).collect::<Vec<_>>(),
            "config_errors": errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(outcome(&servers, errors.len()));
    }
    for e in &errors {
        println!("config error: {}", toolhost::mask_log_line(&e.to_string()));
    }
    if servers.is_empty() {
        println!("No MCP servers for profile '{profile}' (list them in usr/mcp.json).");
    }
    for server in &servers {
        let state = match &server.state {
            McpState::Ready => format!("ready with {} tools", server.tools.len()),
            McpState::Failed(why) => format!("failed: {why}"),
            McpState::Starting => format!("still starting after {} s", SETTLE.as_secs()),
            other => other.name().to_owned(),
        };
        println!("{}: {state}", server.name);
        for tool in &server.tools {
            let info = tool.info();
            let line = shown(info.description.lines().next().unwrap_or_default());
            println!(
                "  {:<32} {:<5} {line}",
                tool.name(),
                info.risk_level.as_str()
            );
        }
        if !server.changed.is_empty() {
            let tools: Vec<&str> = server.changed.iter().map(|c| c.tool.as_str()).collect();
            println!(
                "  definition changed since approved: {} (`toolhost mcp diff {}`)",
                shown(&tools.join(", ")),
                server.name
            );
        }
        match (&server.last_error, &server.state) {
            (Some(error), McpState::Failed(why)) if error == why => {}
            (Some(error), _) => println!("  last error: {error}"),
            (None, _) => {}
        }
    }
    Ok(outcome(&servers, errors.len()))
}

/// Success when every file is right and every server ready; else 1, with the count on
/// standard error.
fn outcome(servers: &[McpServerStatus], config_errors: usize) -> ExitCode {
    let down = servers
        .iter()
        .filter(|s| s.state != McpState::Ready)
        .count();
    if down == 0 && config_errors == 0 {
        return ExitCode::SUCCESS;
    }
    let mut problems = Vec::new();
    if config_errors > 0 {
        problems.push(format!("{config_errors} mistake(s) in mcp.json"));
    }
    if down > 0 {
        problems.push(format!("{down} server(s) not ready"));
    }
    eprintln!("error: {}", problems.join(", "));
    ExitCode::FAILURE
}

fn server_json(server: &McpServerStatus) -> Value {
    json!({
        "name": server.name,
        "state": server.state.name(),
        "reason": match &server.state {
            toolhost::mcp::McpState::Failed(why) => Some(why.as_str()),
            _ => None,
        },
        "tools": server.tools.iter().map(|t| json!({
            "name": t.name(),
            "description": t.info().description,
            "risk_level": t.info().risk_level.as_str(),
            "capabilities": t.info().capabilities,
            "input_schema": t.info().parameters,
            "breaker": t.breaker_state().name(),
        })).collect::<Vec<_>>(),
        "last_error": server.last_error,
        "changed_tools": server.changed.iter().map(|c| &c.tool).collect::<Vec<_>>(),
    })
}

/// The server `name` of the profile, once it has settled.
fn settled_server(host: &Host, profile: &str, name: &str) -> Result<McpServerStatus> {
    check_profile(host, profile)?;
    settle(host, profile)?;
    match host
        .mcp_servers(profile)
        .into_iter()
        .find(|s| s.name == name)
    {
        Some(server) => Ok(server),
        None => crate::exit::usage!(
            "profile '{profile}' has no MCP server '{name}' (see `toolhost mcp`)"
        ),
    }
}

/// `toolhost mcp diff SERVER`: each changed definition, member by member (`-` approved,
/// `+` now); exit 1 if anything changed.
pub(crate) fn diff(host: &Host, profile: &str, name: &str) -> Result<ExitCode> {
    let server = settled_server(host, profile, name)?;
    if let McpState::Failed(why) = &server.state {
        println!("{name}: failed: {}", shown(why));
    }
    if server.changed.is_empty() {
        println!("{name}: no tool definition changed since approved");
        return Ok(ExitCode::SUCCESS);
    }
    for change in &server.changed {
        match change.approved.is_null() {
            true => println!(
                "{name}.{}: (a tool added since the server was first seen)",
                shown(&change.tool)
            ),
            false => println!("{name}.{}:", shown(&change.tool)),
        }
        let members = |v: &Value| v.as_object().cloned().unwrap_or_default();
        let (old, new) = (members(&change.approved), members(&change.now));
        let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            let (was, is) = (old.get(key), new.get(key));
            if was == is {
                continue;
            }
            println!("  {key}:");
            let text = |v: &Value| match v {
                Value::String(s) => s.clone(),
                other => serde_json::to_string_pretty(other).unwrap_or_default(),
            };
            for (sign, value) in [("-", was), ("+", is)] {
                if let Some(value) = value {
                    for line in text(value).lines() {
                        println!("    {sign} {}", shown(line));
                    }
                }
            }
        }
    }
    let digest = toolhost::mcp::changes_digest(&server.changed);
    println!("digest: {digest}");
    println!("approve exactly these with `toolhost mcp approve {name} --digest {digest}`");
    Ok(ExitCode::FAILURE)
}

/// `toolhost mcp approve SERVER --digest DIGEST`.
pub(crate) fn approve(host: &Host, profile: &str, name: &str, digest: &str) -> Result<ExitCode> {
    settled_server(host, profile, name)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let approved = runtime.block_on(host.approve_mcp_tools(profile, name, digest, SETTLE))?;
    match approved.is_empty() {
        true => println!("{name}: nothing to approve"),
        false => println!(
            "{name}: approved the new definition of {}",
            shown(&approved.join(", "))
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `toolhost mcp login SERVER`: signs in anew; says what was granted, never the tokens.
pub(crate) fn login(
    host: &Host,
    profile: &str,
    name: &str,
    no_browser: bool,
    fetch: bool,
) -> Result<ExitCode> {
    check_profile(host, profile)?;
    use toolhost::mcp::oauth::BrowserStep;
    let step = match (fetch, no_browser) {
        (true, _) => BrowserStep::Fetch,
        (false, _) if BrowserStep::from_env().is_some() => BrowserStep::Fetch,
        (false, true) => BrowserStep::Print,
        (false, false) => BrowserStep::Open,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let secrets = host.secrets();
    let signed = runtime.block_on(toolhost::mcp::oauth::login(
        host.layout(),
        profile,
        name,
        &secrets,
        host.options().max_text_bytes,
        step,
    ));
    let signed = match signed {
        Ok(signed) => signed,
        Err(e) => {
            eprintln!(
                "error: {name}: {}",
                shown(&toolhost::mask_log_line(&e.message))
            );
            return Ok(ExitCode::FAILURE);
        }
    };
    if !signed.asked {
        println!("{name}: answered without asking to sign in; nothing stored");
        return Ok(ExitCode::SUCCESS);
    }
    let scopes = match signed.scopes.is_empty() {
        true => "no scopes named".to_owned(),
        false => format!("scopes: {}", signed.scopes.join(" ")),
    };
    let file = signed
        .file
        .strip_prefix(host.root())
        .unwrap_or(&signed.file);
    println!(
        "{name}: signed in ({}); the tokens are in {} (mode 0600)",
        shown(&scopes),
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}
