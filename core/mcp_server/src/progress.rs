//! A call's progress as `notifications/progress`: the agent's [`Output`] for one call, whose
//! progress lines go to the client that gave a progress token.

use std::sync::Arc;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use toolhost::output::{Output, OutputKind, Silent};
use toolhost::Masked;

/// The prefix the lifecycle puts before a progress line (`hooks.rs`).
const PROGRESS_PREFIX: &str = "  ... ";

/// Sends each progress line of one call into a channel; everything else is dropped (standard
/// output belongs to the protocol). The text is already masked.
struct ProgressOutput {
    lines: mpsc::UnboundedSender<String>,
}

impl Output for ProgressOutput {
    fn print(&self, kind: OutputKind, text: &Masked) {
        if kind == OutputKind::Progress {
            let text = text.as_str();
            let text = text.strip_prefix(PROGRESS_PREFIX).unwrap_or(text);
            let _ = self.lines.send(text.to_owned());
        }
    }
}

/// A call's output, and the task that sends its progress notifications.
pub(crate) struct Progress {
    pub(crate) output: Arc<dyn Output>,
    sender: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl Progress {
    /// The output for a call: with a progress token, one that reports to `peer`; without one,
    /// nothing.
    pub(crate) fn new(peer: &Peer<RoleServer>, token: Option<ProgressToken>) -> Self {
        let Some(token) = token else {
            return Self {
                output: Arc::new(Silent),
                sender: None,
            };
        };
        let (lines, rx) = mpsc::unbounded_channel::<String>();
        let (done, finished) = oneshot::channel();
        let task = tokio::spawn(send(peer.clone(), token, rx, finished));
        Self {
            output: Arc::new(ProgressOutput { lines }),
            sender: Some((done, task)),
        }
    }

    /// Sends what the call reported and stops: every notification goes out before the
    /// call's result does.
    pub(crate) async fn finish(self) {
        if let Some((done, task)) = self.sender {
            let _ = done.send(());
            let _ = task.await;
        }
    }
}

/// Sends each line as a notification, numbered from 1, until the call finishes.
async fn send(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    mut lines: mpsc::UnboundedReceiver<String>,
    mut finished: oneshot::Receiver<()>,
) {
    let (mut progress, mut done) = (0.0, false);
    loop {
        let line = if done {
            lines.try_recv().ok() // what was reported before the call finished
        } else {
            tokio::select! {
                biased;
                line = lines.recv() => line,
                _ = &mut finished => {
                    done = true;
                    lines.try_recv().ok()
                }
            }
        };
        let Some(message) = line else { break };
        progress += 1.0;
        let param = ProgressNotificationParam::new(token.clone(), progress).with_message(message);
        if let Err(e) = peer.notify_progress(param).await {
            tracing::debug!("progress notification not sent: {e}");
            break;
        }
    }
}
