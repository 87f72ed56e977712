//! `subscriptions/listen` (MCP 2026-07-28): a client of that version has no session to be
//! sent `list_changed` in; it opens one long request whose filter says what it wants to hear
//! (tools, prompts or resources listed, updates of resources by URI), and gets each
//! change the reload watcher finds ([`crate::peers`], the same source as the notifications of
//! older clients) on that request's stream until it cancels it.

use rmcp::model::SubscriptionFilter;
use rmcp::service::{SubscriptionContext, SubscriptionSendError, SubscriptionSink};
use rmcp::ErrorData;
use tokio::sync::broadcast::error::RecvError;

use crate::peers::{Change, Peers};

/// What of a request's filter is accepted: all of it (rmcp keeps only what the server's
/// capabilities advertise). Resource URIs are not checked: a URI that does not exist yet is
/// told about once a file gives it one.
pub(crate) fn accepted(requested: &SubscriptionFilter) -> SubscriptionFilter {
    requested.clone()
}

/// Sends the changes `context` accepted until the client cancels the request or the server
/// stops watching.
pub(crate) async fn listen(peers: &Peers, context: SubscriptionContext) -> Result<(), ErrorData> {
    let mut changes = peers.listen();
    let sink = context.sink().clone();
    loop {
        let change = tokio::select! {
            () = context.cancelled() => return Ok(()),
            change = changes.recv() => change,
        };
        let sent = match change {
            Ok(change) => send(&sink, change).await,
            // Fell behind: whatever was missed, everything may have changed.
            Err(RecvError::Lagged(_)) => {
                let everything = Change::Resources {
                    updated: sink
                        .accepted()
                        .resource_subscriptions
                        .clone()
                        .unwrap_or_default(),
                    listed: true,
                };
                match send(&sink, Change::Tools).await {
                    Ok(()) => send(&sink, everything).await,
                    Err(e) => Err(e),
                }
            }
            Err(RecvError::Closed) => return Ok(()),
        };
        if let Err(e) = sent {
            tracing::debug!("subscriptions/listen {}: {e}", sink.id());
            return Ok(());
        }
    }
}

/// Sends the notifications of `change` that the subscription accepted.
async fn send(sink: &SubscriptionSink, change: Change) -> Result<(), SubscriptionSendError> {
    let accepted = sink.accepted().clone();
    match change {
        Change::Tools => {
            if accepted.tools_list_changed == Some(true) {
                sink.notify_tool_list_changed().await?;
            }
            if accepted.prompts_list_changed == Some(true) {
                sink.notify_prompt_list_changed().await?;
            }
        }
        Change::Resources { updated, listed } => {
            let wanted = accepted.resource_subscriptions.unwrap_or_default();
            for uri in updated.into_iter().filter(|u| wanted.contains(u)) {
                sink.notify_resource_updated(uri).await?;
            }
            if listed && accepted.resources_list_changed == Some(true) {
                sink.notify_resource_list_changed().await?;
            }
        }
    }
    Ok(())
}
