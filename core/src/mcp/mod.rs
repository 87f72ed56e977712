//! The MCP client: tools of the MCP servers listed in `usr/mcp.json` (and a profile's
//! `usr/agents/<P>/mcp.json`, see [`config`]) offered to agents as `<server>.<tool>`.
//!
//! - `config/`: the `mcpServers` files, layered (`read.rs` one file, `entry.rs` one server);
//! - `server/`: one server's state, restarts with backoff, shutdown (`tools.rs` its tools:
//!   listed, re-listed, checked against the pins, approved);
//! - `connect.rs`: starting the process and the handshake;
//! - `child.rs`: a stdio server's process, its group and its connection;
//! - `stdout_check.rs`: a stdio server's output lines that would be dropped, named;
//! - `handler.rs`: progress and `tools/list_changed` notifications, a server's requests;
//! - `ask.rs`: a server's form (`elicitation/create`) for the person behind the call;
//! - `tool.rs`: one tool, its metadata and breaker;
//! - `call.rs`: one governed call of a tool (progress, cancellation, the result);
//! - `pins.rs`: the tool definitions approved (`usr/mcp-tools/`), against rug pulls;
//! - `oauth/`: OAuth 2.1 for HTTP servers that ask to sign in (`toolhost mcp login`).
//!
//! Servers run on a runtime of their own (one thread), so they outlive the runtime of any
//! caller and start in the background as soon as the host (or an agent of a profile) exists.
//! A call of a server's tool is looked up before the layers: an MCP tool wins over a library
//! of the same name.

mod ask;
mod call;
mod child;
pub mod config;
mod connect;
mod handler;
mod large_line;
pub mod oauth;
pub mod pins;
mod server;
mod stdout_check;
mod tool;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::layout::Layout;
use crate::secrets::Secrets;
use crate::sync::lock;
use config::{McpConfig, ServerConfig};
use server::Server;

pub(crate) use ask::Asker;
pub use config::MCP_FILE_NAME;
pub use pins::{changes_digest, ChangedTool};
pub use server::McpState;
pub use tool::McpTool;
pub(crate) use tool::{from_native_name, DEFAULT_TIMEOUT_SECONDS};

/// How long shutting the servers down may take when the host is dropped.
const SHUTDOWN: Duration = Duration::from_secs(6);

/// One server of a profile, as `toolhost mcp` shows it.
#[derive(Clone)]
pub struct McpServerStatus {
    /// Its name.
    pub name: String,
    /// Its state.
    pub state: McpState,
    /// Its tools (none unless ready).
    pub tools: Vec<Arc<McpTool>>,
    /// The last thing that went wrong, if anything did.
    pub last_error: Option<String>,
    /// Its tools whose definitions changed since approved ([`pins`]).
    pub changed: Vec<pins::ChangedTool>,
}

/// What a change of the `mcp.json` files did to one profile's servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpReload {
    /// The profile.
    pub profile: String,
    /// The servers added (started).
    pub started: Vec<String>,
    /// The servers whose entry changed (stopped, then started as the entry says now).
    pub restarted: Vec<String>,
    /// The servers removed or switched off (stopped; their tools leave).
    pub stopped: Vec<String>,
    /// The mistakes the files hold now that they did not before, one line each.
    pub errors: Vec<String>,
}

/// A profile's servers.
pub(crate) struct ProfileServers {
    pub(crate) config: McpConfig,
    pub(crate) servers: Vec<Arc<Server>>,
}

/// Every server the host started, shared by the profiles whose configuration is the same.
#[derive(Default)]
pub(crate) struct McpClients {
    runtime: OnceLock<tokio::runtime::Runtime>,
    servers: Mutex<HashMap<ServerConfig, Arc<Server>>>,
    profiles: Mutex<HashMap<String, Arc<ProfileServers>>>,
}

impl McpClients {
    /// The profile's servers, started in the background the first time the profile is seen.
    pub(crate) fn profile(
        &self,
        layout: &Layout,
        profile: &str,
        max_text_bytes: u64,
        secrets: &Arc<Secrets>,
    ) -> Arc<ProfileServers> {
        if let Some(found) = lock(&self.profiles).get(profile) {
            return found.clone();
        }
        let config = McpConfig::load(layout, profile, max_text_bytes);
        for e in &config.errors {
            tracing::warn!("{e}");
        }
        let found = self.started(config, layout, max_text_bytes, secrets);
        let mut profiles = lock(&self.profiles);
        profiles.entry(profile.to_owned()).or_insert(found).clone()
    }

    /// The servers of a profile's `config`, each running (started if it is new), with their
    /// tools checked against the pins.
    fn started(
        &self,
        config: McpConfig,
        layout: &Layout,
        max_text_bytes: u64,
        secrets: &Arc<Secrets>,
    ) -> Arc<ProfileServers> {
        let pins = pins::ToolPins::new(layout, max_text_bytes, secrets.clone());
        let servers = config
            .servers
            .iter()
            .map(|c| self.server(c, secrets, &pins))
            .collect();
        Arc::new(ProfileServers { config, servers })
    }

    /// The running server for `config`, started if it is new.
    fn server(
        &self,
        config: &ServerConfig,
        secrets: &Arc<Secrets>,
        pins: &pins::ToolPins,
    ) -> Arc<Server> {
        let mut servers = lock(&self.servers);
        if let Some(server) = servers.get(config) {
            return server.clone();
        }
        let runtime = self.runtime().handle().clone();
        let server = Server::new(config.clone(), runtime, pins.clone());
        server.start(secrets);
        servers.insert(config.clone(), server.clone());
        server
    }

    /// Reads the `mcp.json` files of every profile seen so far again: a server added starts,
    /// one whose entry changed starts anew, one removed or switched off stops (once no profile
    /// uses it), and an unchanged one keeps running. What changed, per profile.
    pub(crate) fn reload(
        &self,
        layout: &Layout,
        max_text_bytes: u64,
        secrets: &Arc<Secrets>,
    ) -> Vec<McpReload> {
        let seen: Vec<(String, Arc<ProfileServers>)> = lock(&self.profiles)
            .iter()
            .map(|(name, servers)| (name.clone(), servers.clone()))
            .collect();
        let mut reloads = Vec::new();
        for (profile, old) in seen {
            let config = McpConfig::load(layout, &profile, max_text_bytes);
            if config == old.config {
                continue;
            }
            let errors: Vec<String> = config
                .errors
                .iter()
                .filter(|e| !old.config.errors.contains(e))
                .map(ToString::to_string)
                .collect();
            for e in &errors {
                tracing::warn!("{e}");
            }
            let before = |name: &str| old.config.servers.iter().find(|s| s.name == name);
            let now = |name: &str| config.servers.iter().any(|s| s.name == name);
            let mut reload = McpReload {
                profile: profile.clone(),
                started: Vec::new(),
                restarted: Vec::new(),
                stopped: Vec::new(),
                errors,
            };
            for server in &config.servers {
                match before(&server.name) {
                    None => reload.started.push(server.name.clone()),
                    Some(old) if old != server => reload.restarted.push(server.name.clone()),
                    Some(_) => {}
                }
            }
            for server in &old.config.servers {
                if !now(&server.name) {
                    reload.stopped.push(server.name.clone());
                }
            }
            let servers = self.started(config, layout, max_text_bytes, secrets);
            lock(&self.profiles).insert(profile, servers);
            reloads.push(reload);
        }
        if !reloads.is_empty() {
            self.stop_unused();
        }
        reloads
    }

    /// A lock in `usr/mcp-tools/` changed: the servers whose tools are held back check them again.
    pub(crate) fn pins_changed(&self) {
        let servers: Vec<Arc<Server>> = lock(&self.servers).values().cloned().collect();
        for server in servers {
            server.pins_changed();
        }
    }

    /// Stops the servers no profile uses any more (in the background).
    fn stop_unused(&self) {
        let used: std::collections::HashSet<ServerConfig> = lock(&self.profiles)
            .values()
            .flat_map(|p| p.config.servers.iter().cloned())
            .collect();
        let mut unused = Vec::new();
        lock(&self.servers).retain(|config, server| {
            let keep = used.contains(config);
            if !keep {
                unused.push(server.clone());
            }
            keep
        });
        for server in unused {
            if let Some(service) = server.stop() {
                drop(self.runtime().spawn(server::shutdown(service)));
            }
        }
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("toolhost-mcp")
                .enable_all()
                .build()
                .expect("the MCP client's runtime (one thread) could not start")
        })
    }
}

impl ProfileServers {
    /// The server named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Server>> {
        self.servers.iter().find(|s| s.config.name == name)
    }

    /// Each server's state, tools and last error.
    pub(crate) fn status(&self) -> Vec<McpServerStatus> {
        self.servers
            .iter()
            .map(|server| {
                let (state, tools, last_error) = server.snapshot();
                McpServerStatus {
                    name: server.config.name.clone(),
                    state,
                    tools: tools.to_vec(),
                    last_error,
                    changed: server.changed_tools(),
                }
            })
            .collect()
    }

    /// Every tool of the servers that are ready.
    pub(crate) fn tools(&self) -> Vec<Arc<McpTool>> {
        let mut tools: Vec<Arc<McpTool>> = self
            .servers
            .iter()
            .flat_map(|s| s.snapshot().1.to_vec())
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }
}

impl Drop for McpClients {
    /// Shuts every server down (input closed, then SIGTERM, then killed), bounded in time; a
    /// child still running after that is killed when its handle drops with the runtime.
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        let services: Vec<_> = lock(&self.servers)
            .drain()
            .filter_map(|(_, server)| server.stop())
            .collect();
        // On a thread of its own: the host may be dropped inside an async context, where
        // blocking on a runtime is not allowed.
        let stopping = std::thread::spawn(move || {
            runtime.block_on(async {
                let all: Vec<_> = services
                    .into_iter()
                    .map(|service| tokio::spawn(server::shutdown(service)))
                    .collect();
                let joined = async {
                    for task in all {
                        let _ = task.await;
                    }
                };
                let _ = tokio::time::timeout(SHUTDOWN, joined).await;
            });
            runtime.shutdown_timeout(Duration::from_secs(1));
        });
        let _ = stopping.join();
    }
}
