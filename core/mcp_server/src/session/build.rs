//! Making a session, and what its handlers share: the key of `requestState`s, caching
//! hints, blocking work off the async threads.

use super::*;

impl Session {
    /// A session that can ask its client (stdio, HTTP with sessions).
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            approved: Arc::default(),
            no_approvals: None,
            log_threshold: Arc::default(),
            subscriptions: Arc::default(),
            token_key: None,
        }
    }

    /// Seals `requestState` with `key`, derived from the listener's token (and marks the
    /// caching hints private).
    pub(crate) fn with_token_key(mut self, key: Option<Arc<StateKey>>) -> Self {
        self.token_key = key;
        self
    }

    pub(super) fn state_key(&self) -> &StateKey {
        self.token_key.as_deref().unwrap_or(&self.shared.state_key)
    }

    /// The caching hints of a list, for a 2026-07-28 request (none for earlier versions).
    pub(super) fn list_hints(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Option<(u64, rmcp::model::CacheScope)> {
        cache_hints::is_stateless(context).then(|| cache_hints::list(self.token_key.is_some()))
    }

    /// A session of one stateless HTTP request: the client's answer to an elicitation would
    /// come back in another request, which this session never sees.
    pub(crate) fn stateless(shared: Arc<Shared>) -> Self {
        Self {
            no_approvals: Some("a client of stateless HTTP cannot be asked: serve with --sessions"),
            ..Self::new(shared)
        }
    }

    /// Runs `f` off the async threads (a cold listing loads libraries, a read reads files).
    pub(super) async fn blocking<T: Send + 'static>(
        &self,
        what: &str,
        f: impl FnOnce(&toolhost::Host, &str) -> T + Send + 'static,
    ) -> Result<T, ErrorData> {
        let host = self.shared.host.clone();
        let profile = self.shared.profile.clone();
        tokio::task::spawn_blocking(move || f(&host, &profile))
            .await
            .map_err(|e| ErrorData::internal_error(format!("{what} failed: {e}"), None))
    }
}
