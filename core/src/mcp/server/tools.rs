//! A server's tools: listed at the start and again when it says they changed, checked
//! against the approved definitions (`pins.rs`), approved.

use super::*;

impl Server {
    /// The server said its tool list changed: a re-list after [`RELIST_DEBOUNCE`], unless
    /// one is already waiting (a storm of notifications costs one re-list per window).
    pub(crate) fn list_changed(self: &Arc<Self>, peer: Peer<RoleClient>) {
        {
            let mut relist = lock(&self.relist);
            if relist.scheduled {
                relist.again = true;
                return;
            }
            relist.scheduled = true;
        }
        let server = self.clone();
        self.runtime.spawn(async move {
            loop {
                tokio::time::sleep(RELIST_DEBOUNCE).await;
                lock(&server.relist).again = false;
                server.refresh_tools(peer.clone()).await;
                let mut relist = lock(&server.relist);
                if !std::mem::take(&mut relist.again) {
                    relist.scheduled = false;
                    break;
                }
            }
        });
    }

    /// Reads its tool list again (after `notifications/tools/list_changed`).
    pub(super) async fn refresh_tools(self: &Arc<Self>, peer: Peer<RoleClient>) {
        let listed = self.list_tools(&peer).await;
        let mut inner = self.inner();
        if !matches!(inner.state, McpState::Ready | McpState::Starting) {
            return; // it failed or stopped meanwhile: it offers no tools
        }
        match listed {
            Ok(tools) => inner.tools = tools,
            Err(reason) => inner.last_error = Some(reason),
        }
        drop(inner);
        self.bump();
    }

    pub(super) async fn list_tools(
        self: &Arc<Self>,
        peer: &Peer<RoleClient>,
    ) -> Result<Arc<[Arc<McpTool>]>, String> {
        let listed = list_all_tools(&self.config.name, peer).await?;
        let changed = self.pinned(&listed)?;
        let mut tools = Vec::with_capacity(listed.len());
        for tool in &listed {
            if changed.iter().any(|c| c.tool == *tool.name) {
                continue;
            }
            let breaker = self.breaker(&tool.name);
            match McpTool::new(self, tool, breaker) {
                Ok(tool) => tools.push(Arc::new(tool)),
                Err(reason) => {
                    tracing::warn!("MCP server {}: {reason}", self.config.name);
                    self.inner().last_error = Some(reason);
                }
            }
        }
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let before = std::mem::replace(&mut self.inner().changed, changed.clone());
        let approved: Vec<&str> = before
            .iter()
            .filter(|b| !changed.iter().any(|c| c.tool == b.tool))
            .map(|b| b.tool.as_str())
            .collect();
        if !approved.is_empty() {
            tracing::info!(
                "MCP server {}: the approved definition of {} is offered again",
                self.config.name,
                crate::layout::Escaped(std::path::Path::new(&approved.join(", ")))
            );
        }
        Ok(tools.into())
    }

    /// The tools of `listed` whose definitions changed since approved (those seen for the
    /// first time are recorded), each change logged. A lock that cannot be used fails the
    /// listing: no definition can be told approved.
    pub(super) fn pinned(&self, listed: &[rmcp::model::Tool]) -> Result<Vec<ChangedTool>, String> {
        let name = &self.config.name;
        let changed = self
            .pins
            .check(name, listed)
            .map_err(|e| format!("its tool definitions cannot be checked: {e}"))?;
        if !changed.is_empty() {
            let tools: Vec<&str> = changed.iter().map(|c| c.tool.as_str()).collect();
            tracing::warn!(
                "MCP server {name}: the definition of {} changed since it was approved (or \
                 the tool is new), held back until approved: see `toolhost mcp diff {name}`, \
                 which says how to approve exactly what it shows",
                crate::layout::Escaped(std::path::Path::new(&tools.join(", ")))
            );
        }
        Ok(changed)
    }

    /// Its tools whose definitions changed since approved.
    pub(crate) fn changed_tools(&self) -> Vec<ChangedTool> {
        self.inner().changed.clone()
    }

    /// A lock in `usr/mcp-tools/` changed (an approval by another process, `toolhost mcp
    /// approve`):
    /// if tools of its are held back, it lists its tools again.
    pub(crate) fn pins_changed(self: &Arc<Self>) {
        let peer = {
            let inner = self.inner();
            match inner.changed.is_empty() {
                true => None,
                false => inner.service.as_ref().map(|s| s.peer().clone()),
            }
        };
        if let Some(peer) = peer {
            self.list_changed(peer);
        }
    }

    /// Approves the changed definitions of its tools (recorded in the lock), then lists its
    /// tools again if it runs. The tools approved. `digest` must be the
    /// [`changes_digest`](crate::mcp::pins::changes_digest) of the changes held now: what was shown
    /// is what is approved.
    pub(crate) fn approve(self: &Arc<Self>, digest: &str) -> Result<Vec<String>, String> {
        let changed = self.changed_tools();
        if changed.is_empty() {
            return Ok(Vec::new());
        }
        let now = crate::mcp::pins::changes_digest(&changed);
        if now != digest {
            let name = &self.config.name;
            return Err(format!(
                "the held-back definitions of {name} are not those shown with digest \
                 {digest} (their digest is {now} now): nothing approved; look at them again \
                 with `toolhost mcp diff {name}`"
            ));
        }
        self.pins.approve(&self.config.name, &changed)?;
        let peer = {
            let mut inner = self.inner();
            inner.changed.clear();
            inner.service.as_ref().map(|s| s.peer().clone())
        };
        if let Some(peer) = peer {
            self.list_changed(peer);
        }
        Ok(changed.into_iter().map(|c| c.tool).collect())
    }
}

/// At most this many pages of `tools/list` are read from one server: one that keeps giving a
/// next cursor is a failure, not a loop.
const MAX_LIST_PAGES: usize = 1_000;

/// Every page of the server's `tools/list`, in one client span whose `traceparent` each page
/// request carries (the server's span is its child); the error is one line.
async fn list_all_tools(
    server: &str,
    peer: &Peer<RoleClient>,
) -> Result<Vec<rmcp::model::Tool>, String> {
    let span = telemetry::McpClientSpan::request("tools/list", server);
    let listed = async {
        let mut tools = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_LIST_PAGES {
            let mut params = PaginatedRequestParams::default().with_cursor(cursor);
            if let Some(traceparent) = telemetry::traceparent() {
                params.set_traceparent(&traceparent);
            }
            let page = peer
                .list_tools(Some(params))
                .await
                .map_err(|e| format!("listing its tools failed: {e}"))?;
            tools.extend(page.tools);
            cursor = page.next_cursor;
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        Err(format!(
            "listing its tools failed: it gave a next page {MAX_LIST_PAGES} times; check the \
             server's paging"
        ))
    };
    let listed = span.span().run(listed).await;
    if let Err(reason) = &listed {
        span.failed("list_failed", reason);
    }
    listed
}
