//! The reload lines of the long-lived commands (`watch`, `serve-mcp`, `chat`): each load,
//! reload, failure and removal once, in the library's one format ([`toolhost::Report`]).

use std::sync::Arc;

use anyhow::Result;
use toolhost::{Host, Watcher};

/// Where the lines go.
pub(crate) enum To {
    /// `watch`: its standard output is the conversation with the user.
    Stdout,
    /// `serve-mcp` (standard output is the protocol) and `chat` (it holds the answers).
    Stderr,
}

/// Watches the host's folders and prints a line for every change, until the watcher is
/// dropped.
pub(crate) fn report(host: &Arc<Host>, to: To) -> Result<Watcher> {
    print(host, to);
    Ok(host.watch()?)
}

/// Prints a line for every change a watcher of `host` (started by the caller) reports.
pub(crate) fn print(host: &Host, to: To) {
    let events = host.subscribe();
    let root = host.root().to_owned();
    std::thread::spawn(move || {
        for event in events {
            let line = event.report(&root);
            match to {
                To::Stdout => println!("{line}"),
                To::Stderr => eprintln!("{line}"),
            }
        }
    });
}
