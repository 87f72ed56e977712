//! The host's MCP servers: started in the background per profile, looked up before the
//! layers, and listed.

use std::sync::Arc;
use std::time::Duration;

use super::Host;
use crate::mcp::config::McpConfigError;
use crate::mcp::{McpServerStatus, McpTool, ProfileServers};
use plugin_api::ToolError;

/// Why held-back MCP tool definitions were not approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpApprovalErrorKind {
    /// The profile has no MCP server of that name: `toolhost mcp` lists them.
    UnknownServer,
    /// The server's held-back definitions are not those the digest names (look at them again
    /// with `toolhost mcp diff SERVER`), or its lock (`usr/mcp-tools/SERVER.lock`) cannot be
    /// written (the message names the file).
    NotApproved,
}

/// Why [`Host::approve_mcp_tools`] approved nothing: a [kind](McpApprovalErrorKind) and one
/// line saying what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct McpApprovalError {
    /// What went wrong.
    pub kind: McpApprovalErrorKind,
    /// One line: what is wrong, and what to do.
    pub message: String,
}

impl Host {
    /// The profile's MCP servers (`usr/mcp.json`, `usr/agents/<profile>/mcp.json`), started in
    /// the background the first time the profile is seen (an agent of it, its tools listed or
    /// one called); this never waits for them. None when
    /// [`HostOptions::mcp_client`](crate::HostOptions::mcp_client) is off.
    pub(crate) fn mcp_profile(&self, profile: &str) -> Arc<ProfileServers> {
        if !self.options.mcp_client {
            return Arc::new(ProfileServers {
                config: Default::default(),
                servers: Vec::new(),
            });
        }
        let secrets = self.secrets();
        let cap = self.options.max_text_bytes;
        self.mcp.profile(&self.layout, profile, cap, &secrets)
    }

    /// Each MCP server of the profile: its state (starting, ready, failed), its tools and its
    /// last error. Starts the profile's servers if they were not started yet.
    /// Everything in it that came from the server (its error texts, its tools' descriptions
    /// and schemas) is masked with the current secrets.
    pub fn mcp_servers(&self, profile: &str) -> Vec<McpServerStatus> {
        let mut servers = self.mcp_profile(profile).status();
        let Some(secrets) = self.secret_store().active() else {
            return servers;
        };
        let mask = |text: &mut String| *text = secrets.mask(text).into_inner();
        for server in &mut servers {
            if let crate::mcp::McpState::Failed(reason) = &mut server.state {
                mask(reason);
            }
            if let Some(error) = &mut server.last_error {
                mask(error);
            }
            for tool in &mut server.tools {
                *tool = tool.masked(&secrets);
            }
            for change in &mut server.changed {
                for value in [&mut change.approved, &mut change.now] {
                    *value = secrets.mask_value(std::mem::take(value)).into_inner();
                }
            }
        }
        servers
    }

    /// Whether `path` is an MCP server list: `usr/mcp.json` or `usr/agents/<P>/mcp.json`.
    pub(crate) fn is_mcp_file(&self, path: &std::path::Path) -> bool {
        let usr = self.layout.root().join("usr");
        path.file_name() == Some(crate::mcp::MCP_FILE_NAME.as_ref())
            && path
                .parent()
                .is_some_and(|dir| dir == usr || dir.parent() == Some(usr.join("agents").as_path()))
    }

    /// An `mcp.json` changed: the servers of every profile seen so far follow it (started,
    /// restarted, stopped), each profile's change reported as a [`ReloadEvent::McpServers`](crate::ReloadEvent::McpServers).
    pub(crate) fn mcp_files_changed(&self) {
        let secrets = self.secrets();
        let cap = self.options.max_text_bytes;
        for reload in self.mcp.reload(&self.layout, cap, &secrets) {
            self.emit(crate::host::reload::ReloadEvent::McpServers(reload));
        }
    }

    /// Approves the changed tool definitions of the profile's server `server` (recorded in
    /// `usr/mcp-tools/SERVER.lock`, [`crate::mcp::pins`]): its tools are offered again. Waits
    /// (at most `wait`) for the server to start and list its tools first. `digest` is the
    /// [`changes_digest`](crate::mcp::changes_digest) of the changes shown to the person who
    /// approves: if the server's held-back definitions are not those, nothing is approved.
    /// The tools approved; `Err` says why not (no such server, other definitions than those
    /// shown, the lock cannot be written).
    pub async fn approve_mcp_tools(
        &self,
        profile: &str,
        server: &str,
        digest: &str,
        wait: Duration,
    ) -> Result<Vec<String>, McpApprovalError> {
        let servers = self.mcp_profile(profile);
        let Some(found) = servers.get(server) else {
            return Err(McpApprovalError {
                kind: McpApprovalErrorKind::UnknownServer,
                message: format!("profile '{profile}' has no MCP server '{server}'"),
            });
        };
        found.settled(wait).await;
        found.approve(digest).map_err(|message| McpApprovalError {
            kind: McpApprovalErrorKind::NotApproved,
            message,
        })
    }

    /// The mistakes in the profile's `mcp.json` files, one line each.
    pub fn mcp_config_errors(&self, profile: &str) -> Vec<McpConfigError> {
        self.mcp_profile(profile).config.errors.clone()
    }

    /// The tools of the profile's MCP servers that are ready now, sorted by name.
    pub fn mcp_tools(&self, profile: &str) -> Vec<Arc<McpTool>> {
        self.mcp_profile(profile).tools()
    }

    /// [`mcp_tools`](Self::mcp_tools) as a person or a model is shown them: descriptions and
    /// schemas masked with the current secrets (`list`, the tools prompt, native tool specs).
    pub(crate) fn mcp_tools_shown(&self, profile: &str) -> Vec<Arc<McpTool>> {
        let tools = self.mcp_tools(profile);
        match self.secret_store().active() {
            Some(secrets) => tools.iter().map(|t| t.masked(&secrets)).collect(),
            None => tools,
        }
    }

    /// Waits until none of the profile's MCP servers is still starting, at most `wait` (for
    /// commands that show what the servers offer, such as `toolhost list`).
    pub async fn wait_for_mcp(&self, profile: &str, wait: Duration) {
        let servers = self.mcp_profile(profile);
        let deadline = crate::config::numbers::later(tokio::time::Instant::now(), wait);
        for server in &servers.servers {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            server.settled(left).await;
        }
    }

    /// The MCP tool `name` (`<server>.<tool>`) of the profile. `Ok(None)` when no server of
    /// the profile has that name, or the ready server has no such tool. Waits for a server
    /// that is starting (at most `wait`); a server that is down is started again (after its
    /// backoff) and the error names it.
    pub(crate) async fn mcp_tool(
        &self,
        profile: &str,
        name: &str,
        wait: Duration,
    ) -> Result<Option<Arc<McpTool>>, ToolError> {
        let Some((server_name, tool)) = name.split_once('.') else {
            return Ok(None);
        };
        let servers = self.mcp_profile(profile);
        let Some(server) = servers.get(server_name) else {
            return Ok(None);
        };
        server.ready(&self.secrets(), wait).await?;
        let (_, tools, _) = server.snapshot();
        Ok(tools.iter().find(|t| t.remote == tool).cloned())
    }
}
