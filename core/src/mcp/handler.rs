//! What the client answers to a server: its name, and the notifications it acts on. Progress
//! goes to the call that sent the token, the latest replacing any not yet shown (the call
//! shows at most [`PROGRESS_PER_SECOND`](super::call::PROGRESS_PER_SECOND)); a
//! `notifications/tools/list_changed` asks the server for a re-list, and those of one debounce
//! window become one ([`Server::list_changed`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

#[allow(deprecated)] // sampling: what servers of 2025-11-25 ask
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability, ErrorData,
    FormElicitationCapability, Implementation, ListRootsResult, ProgressNotificationParam,
    ProgressToken, ProtocolVersion, Root, RootsCapabilities, SamplingCapability,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::ClientHandler;
use tokio::sync::watch;

use super::server::Server;

use crate::sync::lock;

/// Progress that arrived before its call registered its token is kept, up to this many.
const MAX_EARLY: usize = 64;

/// Where each running call's progress goes, by its progress token.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    routes: Mutex<HashMap<ProgressToken, watch::Sender<String>>>,
    /// Progress for tokens not registered yet (the server can answer before the caller has
    /// registered the token the SDK gave the request).
    early: Mutex<Vec<(ProgressToken, String)>>,
}

impl ProgressRoutes {
    /// Sends the progress of `token` to `to` from now on (and what came early): each text
    /// replaces the one before, so a storm of notifications costs no memory.
    pub(crate) fn register(&self, token: ProgressToken, to: watch::Sender<String>) {
        let mut early = lock(&self.early);
        early.retain(|(t, text)| {
            if *t == token {
                to.send_replace(text.clone());
                return false;
            }
            true
        });
        lock(&self.routes).insert(token, to);
    }

    /// Stops routing `token`.
    pub(crate) fn unregister(&self, token: &ProgressToken) {
        lock(&self.routes).remove(token);
    }

    fn deliver(&self, token: ProgressToken, text: String) {
        let early = lock(&self.early);
        if let Some(to) = lock(&self.routes).get(&token) {
            to.send_replace(text);
            return;
        }
        let mut early = early;
        if early.len() >= MAX_EARLY {
            early.remove(0);
        }
        early.push((token, text));
    }
}

/// A progress notification as one line: `Step 2 of 5 (2/5)`, `40%`, `3`.
pub(crate) fn progress_text(params: &ProgressNotificationParam) -> String {
    let amount = match params.total {
        Some(total) => format!("{}/{}", params.progress, total),
        None => format!("{}", params.progress),
    };
    match params.message.as_deref().map(str::trim) {
        Some(message) if !message.is_empty() => format!("{message} ({amount})"),
        _ => amount,
    }
}

/// The client side of one connection: it declares form elicitation (a server's form goes to
/// the person behind the call) and sampling (the host's model answers), [`super::ask`].
pub(crate) struct Handler {
    pub(crate) server: Weak<Server>,
    pub(crate) progress: Arc<ProgressRoutes>,
    /// A stdio server's process group, killed when the connection (and so this) is dropped.
    pub(crate) group: Mutex<Option<super::child::Group>>,
    /// Why a stdio server's output broke (a message dropped), once it has.
    pub(crate) broken: super::stdout_check::Broken,
}

impl Handler {
    /// A handler for another connection to the same server (a greeting tried again).
    pub(crate) fn again(&self) -> Self {
        Self {
            server: self.server.clone(),
            progress: self.progress.clone(),
            group: Mutex::default(),
            broken: self.broken.clone(),
        }
    }
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let text = progress_text(&params);
        self.progress.deliver(params.progress_token, text);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let Some(server) = self.server.upgrade() else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let asker = server.asker();
        Ok(super::ask::elicit(asker, &server.config.name, request).await)
    }

    /// A completion asked of the host's model (`super::ask::sample`).
    #[allow(deprecated)] // sampling: what servers of 2025-11-25 ask
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let Some(server) = self.server.upgrade() else {
            return Err(ErrorData::internal_error("the server was shut down", None));
        };
        let asker = server.asker();
        super::ask::sample(asker, &server.config.name, params).await
    }

    /// The roots configured for the server (`"roots"` in its entry; none by default).
    #[allow(deprecated)] // roots: deprecated by SEP-2577, still asked by servers
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let roots = self.server.upgrade().map(|s| shared_roots(&s.config));
        Ok(ListRootsResult::new(roots.unwrap_or_default()))
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        if let Some(server) = self.server.upgrade() {
            server.list_changed(context.peer);
        }
    }

    /// Offers the newest protocol version that has the `initialize` handshake (2025-11-25;
    /// from 2026-07-28 on there is none, so no server can answer `initialize` with it) and
    /// takes the version the server answers with.
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        let mut elicitation = ElicitationCapability::new();
        elicitation.form = Some(FormElicitationCapability::new());
        capabilities.elicitation = Some(elicitation);
        capabilities.sampling = Some(SamplingCapability::default());
        // Roots only for a server the user shares folders with.
        let shares = self
            .server
            .upgrade()
            .is_some_and(|s| !s.config.roots.is_empty());
        if shares {
            capabilities.roots = Some(RootsCapabilities::default());
        }
        let mut info = ClientConfig::new(
            capabilities,
            Implementation::new("toolhost", env!("CARGO_PKG_VERSION")),
        );
        info.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        info
    }
}

/// The roots the user shares with the server of `config`: each folder of its `"roots"` as a
/// `file://` URI, named by its last component.
#[allow(deprecated)] // roots: deprecated by SEP-2577, still asked by servers
pub(crate) fn shared_roots(config: &super::config::ServerConfig) -> Vec<Root> {
    config
        .roots
        .iter()
        .filter_map(|folder| {
            let folder = std::path::absolute(folder).ok()?;
            let uri = reqwest::Url::from_file_path(&folder).ok()?;
            let root = Root::new(uri.to_string());
            Some(match folder.file_name() {
                Some(name) => root.with_name(name.to_string_lossy()),
                None => root,
            })
        })
        .collect()
}
