//! Accepting connections: each served by hyper with the endpoint, within the bound on
//! connections and the client's time, and the draining and grace periods of a stop.

use crate::shutdown::InFlight;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use super::*;

/// What serves each accepted connection.
pub(super) struct Accept {
    pub(super) endpoint: Arc<Endpoint>,
    pub(super) permits: Arc<Semaphore>,
    pub(super) header_timeout: Duration,
    /// `true` once the server stops: each connection closes after its answer.
    pub(super) closing: watch::Sender<bool>,
    pub(super) connections: Arc<InFlight>,
}

impl Accept {
    /// Serves `stream` in a task of its own.
    pub(super) fn spawn(&self, stream: TcpStream) {
        // The answer's last bytes go at once, not after the client's delayed ACK (40 ms a
        // call on a kept-alive connection without it).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY could not be set: {e}");
        }
        let permit = self.permits.clone().try_acquire_owned().ok();
        let endpoint = self.endpoint.clone();
        let mut closing = self.closing.subscribe();
        let counted = self.connections.enter();
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout);
        tokio::spawn(async move {
            let _counted = counted;
            let Some(_permit) = permit else {
                // Over the cap: answered at once, and closed.
                builder.keep_alive(false);
                let busy = service_fn(|_| async { Ok::<_, Infallible>(busy()) });
                let _ = builder.serve_connection(TokioIo::new(stream), busy).await;
                return;
            };
            let handler = service_fn(move |request: Request<Incoming>| {
                let endpoint = endpoint.clone();
                async move { Ok::<_, Infallible>(endpoint.route(request).await) }
            });
            let connection = builder.serve_connection(TokioIo::new(stream), handler);
            tokio::pin!(connection);
            let stopping = async move {
                let _ = closing.wait_for(|closing| *closing).await;
            };
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = stopping => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = served {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
}

/// Accepts connections on `listener` and hands each to `accept` until `stop` completes; a
/// failed accept waits as `failures` says (the serving and the draining phase alike).
pub(super) async fn accept_until(
    listener: &TcpListener,
    accept: &Accept,
    failures: &mut AcceptFailures,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    failures.wait(&e).await;
                    continue;
                }
            },
            () = &mut stop => return,
        };
        failures.reset();
        accept.spawn(stream);
    }
}

/// A failing `accept` (no file descriptor left, most often): the loop waits a little longer
/// after each failure in a row (up to a second), and says so at most once a second.
#[derive(Default)]
pub(super) struct AcceptFailures {
    pub(super) in_a_row: u32,
    pub(super) unreported: u64,
    pub(super) reported: Option<Instant>,
}

impl AcceptFailures {
    pub(super) async fn wait(&mut self, error: &std::io::Error) {
        self.in_a_row = self.in_a_row.saturating_add(1);
        self.unreported += 1;
        if self
            .reported
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1))
        {
            let more = match self.unreported {
                1 => String::new(),
                n => format!(" ({n} failures since the last report)"),
            };
            tracing::warn!("accepting a connection failed: {error}{more}; retrying with backoff");
            self.reported = Some(Instant::now());
            self.unreported = 0;
        }
        let delay = Duration::from_millis(5) * 2u32.saturating_pow(self.in_a_row.min(8));
        tokio::time::sleep(delay.min(Duration::from_secs(1))).await;
    }

    pub(super) fn reset(&mut self) {
        self.in_a_row = 0;
    }
}
