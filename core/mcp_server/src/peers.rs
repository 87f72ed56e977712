//! The connected clients, and `notifications/tools/list_changed` sent to each of them when the
//! host reloads, finds or loses a library; `notifications/resources/updated` to those
//! subscribed to a resource whose file changed, and `notifications/resources/list_changed` to
//! every client when a resource comes or goes. The same changes go to the open
//! `subscriptions/listen` requests of 2026-07-28 clients ([`crate::listen`]).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::service::{Peer, RoleServer};
use tokio::runtime::Handle;

use super::error::{McpServerError, McpServerErrorKind};
use crate::lock;
use toolhost::Host;
use toolhost::Watcher;

/// How long the reload thread gathers more changes before it notifies (a `cargo build` or a
/// copy of several files is one notification).
const GATHER: Duration = Duration::from_millis(50);

/// The clients to tell about changes: every initialised session that is still open, and
/// every `subscriptions/listen` request that is.
pub(crate) struct Peers {
    peers: Mutex<Vec<(Peer<RoleServer>, Subscriptions)>>,
    changes: tokio::sync::broadcast::Sender<Change>,
}

/// How many changes a slow listener may fall behind before it is told that everything
/// changed.
const LISTEN_BACKLOG: usize = 64;

impl Default for Peers {
    fn default() -> Self {
        Self {
            peers: Mutex::default(),
            changes: tokio::sync::broadcast::channel(LISTEN_BACKLOG).0,
        }
    }
}

/// A change the clients are told about.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change {
    /// The tools (and perhaps the prompts) changed.
    Tools,
    /// These resources' contents changed; `listed`: a resource came or went.
    Resources { updated: Vec<String>, listed: bool },
}

/// The resource URIs a session subscribed to.
pub(crate) type Subscriptions = Arc<Mutex<HashSet<String>>>;

impl Peers {
    /// Adds a session's client.
    pub(crate) fn add(&self, peer: Peer<RoleServer>, subscriptions: Subscriptions) {
        let mut peers = lock(&self.peers);
        peers.retain(|(p, _)| !p.is_transport_closed());
        peers.push((peer, subscriptions));
    }

    /// The open sessions; forgets closed ones.
    fn open(&self) -> Vec<(Peer<RoleServer>, Subscriptions)> {
        let mut peers = lock(&self.peers);
        peers.retain(|(p, _)| !p.is_transport_closed());
        peers.clone()
    }

    /// Sends `notifications/resources/updated` for each of `updated` to the sessions
    /// subscribed to it, and `notifications/resources/list_changed` to every session when
    /// `listed` says the list changed.
    pub(crate) async fn resources_changed(&self, updated: &[String], listed: bool) {
        let change = Change::Resources {
            updated: updated.to_vec(),
            listed,
        };
        let _ = self.changes.send(change); // no listener: nobody to tell
        for (peer, subscriptions) in self.open() {
            let wanted: Vec<String> = {
                let subscribed = lock(&subscriptions);
                updated
                    .iter()
                    .filter(|u| subscribed.contains(*u))
                    .cloned()
                    .collect()
            };
            for uri in wanted {
                let param = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
                if let Err(e) = peer.notify_resource_updated(param).await {
                    tracing::debug!("resources/updated not sent: {e}");
                }
            }
            if listed {
                if let Err(e) = peer.notify_resource_list_changed().await {
                    tracing::debug!("resources/list_changed not sent: {e}");
                }
            }
        }
    }

    /// The changes from now on, for one `subscriptions/listen` request.
    pub(crate) fn listen(&self) -> tokio::sync::broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// How many sessions are open.
    pub(crate) fn len(&self) -> usize {
        self.open().len()
    }

    /// Sends `notifications/tools/list_changed` to every open session; forgets closed ones.
    /// And `notifications/prompts/list_changed`: a prompt file may have changed with them.
    pub(crate) async fn tools_changed(&self) {
        let _ = self.changes.send(Change::Tools);
        for (peer, _) in self.open() {
            if let Err(e) = peer.notify_tool_list_changed().await {
                tracing::debug!("tools/list_changed not sent: {e}");
            }
            if let Err(e) = peer.notify_prompt_list_changed().await {
                tracing::debug!("prompts/list_changed not sent: {e}");
            }
        }
    }
}

/// Watches the host's folders while it lives and tells every client when the tools change.
/// Made by [`McpServer::watch`](super::McpServer::watch); stops when dropped.
pub struct ReloadNotifier {
    _watcher: Watcher,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for ReloadNotifier {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How often the resources' files are looked at for changes.
const RESOURCE_POLL: Duration = Duration::from_millis(500);

/// Starts watching `host` and notifying `peers` (on the runtime of the caller); the resources
/// of `profile` are looked at every [`RESOURCE_POLL`].
pub(crate) fn watch(
    host: &Arc<Host>,
    profile: &str,
    peers: Arc<Peers>,
) -> Result<ReloadNotifier, McpServerError> {
    let events = host.subscribe();
    let watcher = host
        .watch()
        .map_err(|e| McpServerError::new(McpServerErrorKind::Watch, e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let runtime = Handle::current();
    let stopping = stop.clone();
    let (host, profile) = (host.clone(), profile.to_owned());
    let mut resources = crate::resources::stamps(&host, &profile);
    let mut looked = std::time::Instant::now();
    let thread = std::thread::Builder::new()
        .name("toolhost-mcp-reload".to_owned())
        .spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                if looked.elapsed() >= RESOURCE_POLL {
                    looked = std::time::Instant::now();
                    let now = crate::resources::stamps(&host, &profile);
                    if now != resources {
                        let (updated, listed) = compare(&resources, &now);
                        runtime.block_on(peers.resources_changed(&updated, listed));
                        resources = now;
                    }
                }
                match events.recv_timeout(Duration::from_millis(200)) {
                    Ok(event) => tracing::debug!("{event}"),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
                // More changes of the same burst join this notification.
                while let Ok(event) = events.recv_timeout(GATHER) {
                    tracing::debug!("{event}");
                }
                runtime.block_on(peers.tools_changed());
            }
        })
        .map_err(|e| McpServerError::new(McpServerErrorKind::Watch, e))?;
    Ok(ReloadNotifier {
        _watcher: watcher,
        stop,
        thread: Some(thread),
    })
}

/// The URIs whose stamp changed, and whether a URI came or went.
fn compare<T: PartialEq>(
    before: &BTreeMap<String, T>,
    now: &BTreeMap<String, T>,
) -> (Vec<String>, bool) {
    let updated = now
        .iter()
        .filter(|(uri, stamp)| before.get(*uri).is_some_and(|b| b != *stamp))
        .map(|(uri, _)| uri.clone())
        .collect();
    let listed = before.len() != now.len() || before.keys().any(|k| !now.contains_key(k));
    (updated, listed)
}
