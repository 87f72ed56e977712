//! A call's progress as `notifications/progress`: the agent's [`Output`] for one call, whose
//! progress lines go to the client that gave a progress token.

use std::sync::Arc;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use tokio::sync::mpsc;

use crate::output::{Output, OutputKind, Silent};
use crate::secrets::Masked;

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

/// The output for a call: with a progress token, one that reports to `peer` (the task that
/// sends the notifications ends with the call); without one, nothing.
pub(crate) fn output_for(peer: &Peer<RoleServer>, token: Option<ProgressToken>) -> Arc<dyn Output> {
    let Some(token) = token else {
        return Arc::new(Silent);
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let peer = peer.clone();
    tokio::spawn(async move {
        let mut progress = 0.0;
        // Ends when the call's agent (the only sender) is dropped.
        while let Some(message) = rx.recv().await {
            progress += 1.0;
            let param = ProgressNotificationParam::new(token.clone(), progress).with_message(message);
            if let Err(e) = peer.notify_progress(param).await {
                tracing::debug!("progress notification not sent: {e}");
                break;
            }
        }
    });
    Arc::new(ProgressOutput { lines: tx })
}
