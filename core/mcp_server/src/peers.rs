//! The connected clients, and `notifications/tools/list_changed` sent to each of them when the
//! host reloads, finds or loses a library.

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

/// The clients to tell about changes: every initialised session that is still open.
#[derive(Default)]
pub(crate) struct Peers {
    peers: Mutex<Vec<Peer<RoleServer>>>,
}

impl Peers {
    /// Adds a session's client.
    pub(crate) fn add(&self, peer: Peer<RoleServer>) {
        let mut peers = lock(&self.peers);
        peers.retain(|p| !p.is_transport_closed());
        peers.push(peer);
    }

    /// How many sessions are open.
    pub(crate) fn len(&self) -> usize {
        let mut peers = lock(&self.peers);
        peers.retain(|p| !p.is_transport_closed());
        peers.len()
    }

    /// Sends `notifications/tools/list_changed` to every open session; forgets closed ones.
    pub(crate) async fn tools_changed(&self) {
        let peers: Vec<_> = {
            let mut peers = lock(&self.peers);
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        for peer in peers {
            if let Err(e) = peer.notify_tool_list_changed().await {
                tracing::debug!("tools/list_changed not sent: {e}");
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

/// Starts watching `host` and notifying `peers` (on the runtime of the caller).
pub(crate) fn watch(host: &Arc<Host>, peers: Arc<Peers>) -> Result<ReloadNotifier, McpServerError> {
    let events = host.subscribe();
    let watcher = host
        .watch()
        .map_err(|e| McpServerError::new(McpServerErrorKind::Watch, e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let runtime = Handle::current();
    let stopping = stop.clone();
    let thread = std::thread::Builder::new()
        .name("toolhost-mcp-reload".to_owned())
        .spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
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
