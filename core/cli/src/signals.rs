//! SIGTERM and SIGINT for the commands that serve or wait (`serve-mcp`, `watch`, `chat`): the
//! first asks the command to stop gracefully ([`Shutdown::requested`]), a second ends the
//! process at once.

use std::time::Duration;

use anyhow::{Context as _, Result};
use tokio::sync::watch;

/// The signals a command stops on, listened to by a thread of their own from
/// [`Shutdown::listen`] on.
#[derive(Clone)]
pub(crate) struct Shutdown {
    asked: watch::Receiver<Option<&'static str>>,
}

/// The exit status of a process ended by a second signal: 128 + the signal's number.
fn status(signal: &str) -> i32 {
    match signal {
        "SIGTERM" => crate::exit::TERMINATED,
        _ => crate::exit::INTERRUPTED,
    }
}

impl Shutdown {
    /// Starts listening; from now on, SIGTERM and SIGINT no longer end the process by
    /// themselves. `what` names what the first signal waits for, in the line it prints
    /// (`calls in flight`).
    pub(crate) fn listen(what: &'static str, grace: Duration) -> Result<Self> {
        Self::listen_to(what, grace, true)
    }

    /// [`listen`](Self::listen), to SIGTERM alone unless `interrupt` (SIGINT then keeps its
    /// own meaning: `chat` on a terminal stops the turn).
    pub(crate) fn listen_to(what: &'static str, grace: Duration, interrupt: bool) -> Result<Self> {
        let (tx, asked) = watch::channel(None);
        let (ready, listening) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let mut signals = match Signals::new(interrupt) {
                        Ok(signals) => signals,
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready.send(Ok(()));
                    let first = signals.next().await;
                    eprintln!(
                        "toolhost: {first}: stopping; {what} get {} s to finish (a second signal ends at once)",
                        grace.as_secs_f64()
                    );
                    let _ = tx.send(Some(first));
                    let second = signals.next().await;
                    eprintln!("toolhost: {second} again: ending now");
                    std::process::exit(status(second));
                });
            })
            .context("cannot start the thread that listens for signals")?;
        listening
            .recv()
            .context("the signal thread ended")?
            .context("cannot listen for SIGTERM and SIGINT")?;
        Ok(Self { asked })
    }

    /// Waits for the first signal; returns its name (`SIGTERM`, `SIGINT`).
    pub(crate) async fn requested(&self) -> &'static str {
        let mut asked = self.asked.clone();
        let signal = asked.wait_for(Option::is_some).await.ok().and_then(|s| *s);
        match signal {
            Some(signal) => signal,
            // The thread is gone (it cannot be, short of a panic): never.
            None => std::future::pending().await,
        }
    }
}

/// SIGTERM and (if listened to) SIGINT as one stream.
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(not(unix))]
    interrupt: bool,
}

impl Signals {
    #[cfg(unix)]
    fn new(interrupt: bool) -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: match interrupt {
                true => Some(signal(SignalKind::interrupt())?),
                false => None,
            },
        })
    }

    #[cfg(not(unix))]
    fn new(interrupt: bool) -> std::io::Result<Self> {
        Ok(Self { interrupt })
    }

    #[cfg(unix)]
    async fn next(&mut self) -> &'static str {
        let int = async {
            match &mut self.int {
                Some(int) => int.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = int => "SIGINT",
        }
    }

    #[cfg(not(unix))]
    async fn next(&mut self) -> &'static str {
        match self.interrupt {
            true => {
                let _ = tokio::signal::ctrl_c().await;
            }
            false => std::future::pending().await,
        }
        "SIGINT"
    }
}
