//! One MCP session (a stdio connection, or an HTTP session or request): the handler rmcp
//! drives.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};

use super::{call, telemetry, tools, Shared};
use tracing::Instrument;

/// The handler of one session. Cheap to make: the host and the clients are shared.
#[derive(Clone)]
pub(crate) struct Session {
    shared: Arc<Shared>,
    /// The tools approved "for this session".
    approved: Arc<Mutex<HashSet<String>>>,
    /// Why the client cannot be asked for approvals on this transport, if it cannot.
    no_approvals: Option<&'static str>,
}

impl Session {
    /// A session that can ask its client (stdio, HTTP with sessions).
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            approved: Arc::default(),
            no_approvals: None,
        }
    }

    /// A session of one stateless HTTP request: the client's answer to an elicitation would
    /// come back in another request, which this session never sees.
    pub(crate) fn stateless(shared: Arc<Shared>) -> Self {
        Self {
            no_approvals: Some(
                "policy asks, and a client of stateless HTTP cannot be asked: serve with --sessions",
            ),
            ..Self::new(shared)
        }
    }
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolhost", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "The native tools of toolhost profile '{}'.",
                self.shared.profile
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let span = telemetry::request_span("tools/list", None, &context.id, &context.meta);
        let host = self.shared.host.clone();
        let profile = self.shared.profile.clone();
        // A cold listing loads libraries: off the async threads.
        let listed = tokio::task::spawn_blocking(move || tools::list(&host, &profile))
            .instrument(span)
            .await
            .map_err(|e| {
                ErrorData::internal_error(format!("listing the tools failed: {e}"), None)
            })?;
        Ok(ListToolsResult::with_all_items(listed))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let shared = &self.shared;
        let yes = shared
            .yes_to_writes
            .load(std::sync::atomic::Ordering::SeqCst);
        let approvals = call::Approvals {
            session: &self.approved,
            unavailable: self.no_approvals,
            yes_to_writes: yes,
        };
        let (id, meta) = (&context.id, &context.meta);
        let span = telemetry::request_span("tools/call", Some(&request.name), id, meta);
        let call_id = id.to_string();
        let result = call::call(&shared.host, &shared.profile, approvals, request, context);
        let result = toolhost::telemetry::with_call_id(&call_id, result);
        Ok(result.instrument(span).await.into())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.shared.peers.add(context.peer);
    }
}
