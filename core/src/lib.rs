//! # toolhost: the host for native agent tools
//!
//! `toolhost` finds tool and extension libraries (built with [`plugin_api`]) in layered folders,
//! loads each one from a private copy after checking its contract (again only when its bytes
//! change), and runs every tool call through Agent Zero's lifecycle.
//!
//! ```no_run
//! use std::sync::Arc;
//! use toolhost::{Agent, Host};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let host = Arc::new(Host::new("/path/to/root")?); // holds core/, plugins/, usr/
//! for tool in host.list("default").tools {
//!     println!("{} from {}", tool.name, tool.layer.label);
//! }
//! let agent = Agent::new(host, "A0", "default")?;
//! let answer = agent
//!     .call_tool("response", serde_json::json!({"text": "done"}))
//!     .await?; // or a ToolError, with kind() and message()
//! assert!(answer.break_loop);
//! # Ok(()) }
//! ```
//!
//! ## Layers
//!
//! See [`Layout`]: a profile's folders come first, then the user's `usr/`, then each plugin
//! under `plugins/`, then `core/`. The first layer that has `tools/<name>.so` wins; extensions
//! (`extensions/<point>/<file>.so`) and prompt fragments (`prompts/agent.system.tool.<name>.md`)
//! are merged by file name, first occurrence winning, and sorted by file name.
//!
//! ## Live reload
//!
//! [`Host::watch`] keeps a long-lived host up to date with its folders: a rebuilt library is
//! loaded as a new generation and serves the next call, a new file is found, a removed one
//! falls back to the next layer, and [`Host::subscribe`] reports each change.
//!
//! ```no_run
//! use std::sync::Arc;
//! use toolhost::{Host, ReloadEvent};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let host = Arc::new(Host::new("/path/to/root")?);
//! let reloads = host.subscribe();
//! let _watcher = host.watch()?; // stops when dropped
//! for event in reloads {
//!     match event {
//!         ReloadEvent::Failed { kept: Some(kept), error } => {
//!             eprintln!("{}: {} (still serving {kept})", error.path.display(), error.reason)
//!         }
//!         other => println!("{other}"),
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! A call runs on the generation it started with, to the end. A new build that fails to load
//! leaves the previous one serving. When the last call on an old generation ends, the host
//! calls the library's shutdown hook, which stops its runtime thread. Libraries are never
//! unmapped; [`Host::generations`] counts them. Without a watcher, [`Host::files_changed`] does
//! the same for files you name.
//!
//! ## The message loop
//!
//! [`Agent::monologue`] runs Agent Zero's loop with any [`Model`]: the model's replies are read
//! leniently ([`parse_reply`]), their tools called through the lifecycle, and the loop ends
//! with the message of the tool that sets `break_loop`. [`ScriptedModel`] replays a
//! conversation, so the loop runs with no network. Secrets from `usr/secrets.env` are masked
//! everywhere the model, a log or a person could see them ([`Secrets`]): the history, the log,
//! the session files, the printed output and error text only take [`Masked`] values, which
//! only `Secrets` makes. An agent's state is its transcript ([`Agent::history`], [`Agent::log`],
//! recorded by [`Agent::record_session`]) and its intervention state ([`Agent::pause`],
//! [`Agent::interject`], ...).
//!
//! ```no_run
//! use std::sync::Arc;
//! use toolhost::{Agent, Host, LoopOptions, ScriptedModel};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let agent = Agent::new(Arc::new(Host::new(".")?), "A0", "default")?;
//! agent.record_session(std::path::Path::new("usr/sessions"))?;
//! let model = ScriptedModel::new([
//!     r#"{"tool_name": "greet", "tool_args": {"name": "§§secret(GUEST)"}}"#.to_owned(),
//!     r#"{"tool_name": "response", "tool_args": {"text": "Greeted."}}"#.to_owned(),
//! ]);
//! let answer = agent
//!     .monologue(&model, "Greet our guest.", &LoopOptions::default())
//!     .await?;
//! println!("{answer}");
//! # Ok(()) }
//! ```
//!
//! ## Configuration
//!
//! [`config`] reads `usr/toolhost.toml` and a profile's `usr/agents/<P>/toolhost.toml` (which
//! overrides it key by key) into a [`config::Config`]: output limit, call timeouts, retries and
//! backoff, the circuit breaker, approval policy by risk level and by tool, access lists (by
//! name or `cap:<tag>`) and the audit log. A typo or a bad value is one
//! [`config::ConfigError`] line naming the file, the line and the key.
//! [`config::save_tool_policy`] records an "always" answer in a file, comments kept.
//!
//! ## Crates
//!
//! Three seams of the host are crates of their own, each built on this crate's public API
//! (or on nothing): `toolhost-reply` reads the tool request in a model's reply (re-exported
//! here as [`read_reply`] and [`parse_reply`]), `toolhost-openai` speaks to real models over
//! OpenAI-compatible chat completions, and `toolhost-mcp-server` serves the host's tools to MCP
//! clients. The MCP client below is this crate's default feature `mcp`; the test kit turns it
//! off, so a plugin's tests build no MCP, HTTP or TLS stack.
//!
//! ## MCP servers
//!
//! [`mcp`] offers the tools of the MCP servers listed in `usr/mcp.json` (and a profile's
//! `usr/agents/<P>/mcp.json`) as `<server>.<tool>`, looked up before the layers and called
//! through the same lifecycle and governance. Servers start in the background with the host;
//! [`Host::mcp_servers`] says where each one is (starting, ready, failed), and dropping the host
//! shuts them down.
//!
//! ## Audit log
//!
//! [`audit::Audit`] appends each tool call, approval decision and circuit-breaker change to
//! `usr/audit/audit.jsonl` ([`Layout::audit_dir`]), one JSON line each, chained by SHA-256 so
//! that [`audit::verify`] finds the first line edited, deleted, moved or cut. Several host
//! processes may append at once.
//!
//! ## Failures
//!
//! A library that cannot be used (empty, truncated, not a plugin, built against another
//! contract, failing at start-up) is skipped with one [`LoadError`] line; the rest keeps working.
//! A plugin's panic becomes an error of that call. What no process survives (an abort, a
//! segmentation fault, a stack overflow, running out of memory) fails only its call when the
//! plugin is [isolated](isolation): `isolate = [...]` in `toolhost.toml` runs it in a worker
//! process, with memory and CPU limits.
#![deny(missing_docs)]
// Library code handles its errors, or says with `expect` why a value cannot be missing.
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

// The tree is the architecture: each folder is one concern (the book's architecture page maps
// them, in the order they may import each other: a module imports only those above it, which
// tests/integration/book.rs checks). layout, config, secrets, transcript, audit, load and model
// import nothing of the rest (but the leaf helpers sync, hash, fds and long_string); governance holds rules
// and state and applies none itself. The modules import each other
// without a circle: plugin, isolation and mcp take the plugin's view of a call's context
// (FfiContext), and only agent holds the host's side of it (agent::call::context).
mod agent;
pub mod audit;
pub mod config;
mod exec;
pub mod fds;
pub mod governance;
mod hash;
mod host;
pub mod isolation;
mod layout;
mod load;
pub mod long_string;
#[cfg(feature = "mcp")]
pub mod mcp;
mod model;
pub mod package;
mod plugin;
mod secrets;
mod sync;
pub mod telemetry;
mod transcript;
pub mod worker;

pub use agent::output;

/// How long what is running (a call, a model's turn, MCP requests and tasks) may take to
/// finish once a host process is asked to stop (SIGTERM, SIGINT), by default: 30 s. Past it,
/// what is left is cancelled.
pub const DEFAULT_GRACE: std::time::Duration = std::time::Duration::from_secs(30);
pub use load::pins;

pub use agent::call::{nice_key, sanitize, DEFAULT_MAX_OUTPUT, MAX_CALLS, MAX_PARALLEL};
pub use agent::call::{Answering, Asker};
pub use agent::message_loop::{LoopError, LoopOptions, MISFORMAT_WARNING, REPEAT_WARNING};
pub use agent::Agent;
pub use exec::call_threads::run_calls_on_workers;
pub use host::reload::{ReloadEvent, Report, Served, Watcher, WriteWatcher};
pub use host::skills::{skill_frontmatter, FrontmatterError, SkillText, SKILL_PROMPT_BYTES};
pub use host::HostError;
pub use host::{
    CachedTool, Catalog, CatalogMode, FoundTool, Generations, Host, HostOptions, ListedExtension,
    ListedTool, Resolution, RunsAs, ToolSource,
};
#[cfg(feature = "mcp")]
pub use host::{ListedMcpTool, McpApprovalError, McpApprovalErrorKind};
pub use isolation::IsolationSettings;
pub use layout::{is_safe_name, ToolName};
pub use layout::{read_text, ReadError, ReadErrorKind, CACHE_DIR_NAME, METADATA_FILE_NAME};
pub use layout::{
    Escaped, FileRole, Layer, LayerKind, Layout, Location, WatchTargets, LIBRARY_EXTENSION,
    MAX_LINK_HOPS,
};
pub use layout::{DEFAULT_MAX_LIBRARY_BYTES, DEFAULT_MAX_TEXT_BYTES};
pub use load::{version_compatible, LoadStats};
pub use load::{LoadError, LoadErrorKind, PrivateDirError};
pub use model::{
    Delta, Model, ModelError, ModelErrorKind, ModelFuture, ModelReply, ModelRequest, ReplyFuture,
    Script, ScriptError, ScriptErrorKind, ScriptedModel, ToolProtocol, ToolSpec, Usage,
};
pub use model::{SamplingModel, SamplingModels};
pub use plugin::{inspect, Declared, ExtensionHandle, Inspection, ToolHandle, ToolSandbox};
pub use plugin_api::{ErrorKind, Response, RiskLevel, ToolError, ToolInfo};
pub use secrets::{
    mask_log_line, placeholder, MaskStream, Masked, MaskedError, MaskedInLogs, Secrets,
    SecretsError, SecretsFileError, TextFields, MIN_MASKED_LEN, PLACEHOLDER_START,
};
pub use toolhost_reply::{
    parse_reply, read_reply, read_reply_typed, read_reply_with, Misformat, ToolRequest,
    MAX_REPLY_DEPTH,
};
pub use transcript::Session;
pub use transcript::{HistoryMessage, Image, LogItem, LogKind, Role, ToolCall};
