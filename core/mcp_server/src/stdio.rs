//! MCP over a byte stream pair (standard input and output): each line the client sends is
//! read with a bound on its length and checked as JSON-RPC ([`crate::jsonrpc`]), so a
//! malformed, over-long or wrongly shaped message gets its error response instead of no
//! answer; a message that passes is parsed once, here, and handed to rmcp as a message
//! ([`Messages`], its transport), its line dropped first; a call whose line is mostly one
//! string argument is parsed with the line's buffer becoming that string, so it costs its
//! size once. rmcp's own messages and those errors reach
//! the client through one writer, a whole line at a time. Asked to stop, it refuses new
//! requests, waits (within the grace period) for the answers to those in flight and for
//! running tasks, then ends the session.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use toolhost::long_string::{marked, LongString};

use super::error::{McpServerError, McpServerErrorKind};
use super::jsonrpc::{self, Refusal, INVALID_REQUEST};
use super::session::Session;
use super::shutdown::InFlight;
use super::tasks::Tasks;

/// The JSON-RPC error code of a request that arrives while the server stops (a server error,
/// in the range JSON-RPC leaves to servers).
const SHUTTING_DOWN: i64 = -32000;

/// How a stdio server stops: when `asked` completes, it gives the calls in flight and the
/// tasks running `grace` to finish.
pub(crate) struct Stop {
    pub(crate) asked: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
    pub(crate) grace: Duration,
    pub(crate) tasks: Arc<Tasks>,
}

/// Standard output for the JSON-RPC stream alone: the host's private standard output
/// ([`toolhost::fds::host_stdout`]), so what a tool prints (`println!`, `write(1, ...)`) goes
/// to the log, never to the client.
pub(crate) fn private_stdout() -> std::io::Result<impl AsyncWrite + Send + Unpin + 'static> {
    #[cfg(unix)]
    return Ok(tokio::fs::File::from_std(toolhost::fds::host_stdout()?));
    #[cfg(not(unix))]
    Ok(tokio::io::stdout())
}

/// A line buffer larger than this is given back once its line is parsed, not kept for the
/// next (one large request must not cost its size for the session's life).
const KEPT_LINE_BYTES: usize = 64 << 10;

/// Serves `session` over `input` and `output` until the client closes its side, or `stop`
/// asks and what is in flight has ended; a line of more than `max_line` bytes is refused and
/// skipped.
pub(crate) async fn serve<R, W>(
    session: Session,
    (input, output): (R, W),
    max_line: usize,
    stop: Stop,
) -> Result<(), McpServerError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    // One message waits for rmcp at a time: the reader reads the next line only once rmcp
    // took the one before.
    let (to_rmcp, incoming) = mpsc::channel(1);
    let (lines, outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(write_lines(outgoing, output));
    let requests = Arc::new(InFlight::default());
    let stopping = Arc::new(AtomicBool::new(false));
    let (end, ended) = oneshot::channel();
    let stopper = tokio::spawn(stopper(stop, requests.clone(), stopping.clone(), end));
    let transport = Messages {
        incoming,
        lines: lines.clone(),
        requests: requests.clone(),
    };
    let checked = Checked {
        to_rmcp,
        lines,
        max_line,
        requests,
        stopping,
    };
    let reader = tokio::spawn(read_checked(input, checked, ended));
    let session_error = |e: &dyn std::fmt::Display| {
        McpServerError::new(McpServerErrorKind::Session, format!("MCP session: {e}"))
    };
    let served = async {
        let running = rmcp::ServiceExt::serve(session, transport)
            .await
            .map_err(|e| session_error(&e))?;
        running.waiting().await.map_err(|e| session_error(&e))?;
        Ok(())
    }
    .await;
    reader.abort();
    stopper.abort();
    // rmcp's transport is dropped now, and the reader with its sender: the writer ends once
    // the last line is written.
    let _ = writer.await;
    served
}

/// rmcp's side of the connection: the messages the reader parsed, and a line for each of
/// rmcp's own, sent to the writer (an answer to a client's request counted off `requests`).
struct Messages {
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    lines: mpsc::UnboundedSender<Vec<u8>>,
    requests: Arc<InFlight>,
}

impl rmcp::transport::Transport<RoleServer> for Messages {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answer = matches!(item, JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_));
        let sent = serde_json::to_vec(&item)
            .map_err(std::io::Error::other)
            .and_then(|mut line| {
                line.push(b'\n');
                self.lines
                    .send(line)
                    .map_err(|_| std::io::Error::other("the client's output is closed"))
            });
        if sent.is_ok() && answer {
            self.requests.leave();
        }
        std::future::ready(sent)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
}

/// Once `stop` asks: sets `stopping`, then, when no request is in flight and no task runs
/// (or the grace period is over), sends `end`.
async fn stopper(
    stop: Stop,
    requests: Arc<InFlight>,
    stopping: Arc<AtomicBool>,
    end: oneshot::Sender<()>,
) {
    stop.asked.await;
    stopping.store(true, Ordering::SeqCst);
    let finished = tokio::time::timeout(stop.grace, async {
        requests.idle().await;
        while stop.tasks.running() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    if finished.is_err() {
        tracing::warn!(
            "{} request(s) and {} task(s) still running at the end of the grace period ({} s): cancelled",
            requests.count(),
            stop.tasks.running(),
            stop.grace.as_secs_f64()
        );
        stop.tasks.cancel_all();
    }
    let _ = end.send(());
}

/// What the reader passes messages to.
struct Checked {
    to_rmcp: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
    lines: mpsc::UnboundedSender<Vec<u8>>,
    max_line: usize,
    /// The client's requests rmcp has not answered yet.
    requests: Arc<InFlight>,
    /// Set once the server stops: a new request is refused.
    stopping: Arc<AtomicBool>,
}

/// Reads the client's lines, passes those that are JSON-RPC messages on to rmcp and answers
/// the others, until the input ends or `ended` (the server stopped); rmcp's input ends then.
async fn read_checked<R: AsyncRead + Unpin>(
    input: R,
    checked: Checked,
    mut ended: oneshot::Receiver<()>,
) {
    let Checked {
        to_rmcp,
        lines,
        max_line,
        requests,
        stopping,
    } = checked;
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = tokio::select! {
            read = read_line(&mut input, &mut line, max_line) => read,
            _ = &mut ended => break,
        };
        let read = match read {
            Ok(read) => read,
            Err(e) => {
                tracing::debug!("reading the client's messages: {e}");
                break;
            }
        };
        let message = match read {
            Line::End => break,
            Line::TooLong => Err(Some(Refusal {
                code: INVALID_REQUEST,
                message: format!(
                    "a message of more than {max_line} bytes is refused (--max-body-bytes)"
                ),
                id: serde_json::Value::Null,
                notification: false,
            })),
            Line::Read if line.iter().all(u8::is_ascii_whitespace) => continue,
            Line::Read => judged(&mut line, &stopping, &requests),
        };
        if line.capacity() > KEPT_LINE_BYTES {
            line = Vec::new();
        }
        match message {
            Ok(message) => {
                if to_rmcp.send(message).await.is_err() {
                    break; // rmcp ended the session
                }
            }
            Err(None) => {}
            Err(Some(refusal)) => {
                if refusal.notification {
                    tracing::debug!("a notification was dropped: {}", refusal.message);
                    continue;
                }
                let mut answer = refusal.to_json().into_bytes();
                answer.push(b'\n');
                if lines.send(answer).is_err() {
                    break;
                }
            }
        }
    }
}

/// What becomes of a line the client sent: rmcp's message (a request counted in `requests`),
/// a refusal to answer (`Err(Some(_))`), or nothing (`Err(None)`: a response to the server's
/// own question that rmcp cannot read, dropped).
fn judged(
    line: &mut Vec<u8>,
    stopping: &AtomicBool,
    requests: &InFlight,
) -> Result<RxJsonRpcMessage<RoleServer>, Option<Refusal>> {
    // A request or a notification is parsed by the check; a response is parsed here.
    let message = match long_argument(line) {
        Some(message) => message,
        None => match jsonrpc::checked(line).map_err(Some)? {
            Some(message) => message,
            None => serde_json::from_slice(line).map_err(|e| {
                tracing::debug!("a message rmcp cannot read was dropped: {e}");
                None
            })?,
        },
    };
    if let JsonRpcMessage::Request(request) = &message {
        if stopping.load(Ordering::SeqCst) {
            return Err(Some(Refusal {
                code: SHUTTING_DOWN,
                message: "the server is shutting down: no new request is taken".into(),
                id: serde_json::to_value(&request.id).unwrap_or_default(),
                notification: false,
            }));
        }
        requests.add();
    }
    Ok(message)
}

/// A `tools/call` whose line is mostly one string of its arguments, checked and parsed with
/// the line's buffer reused for that string ([`LongString`]; `line` is left empty then): a
/// large argument costs its size once, not twice. `None` for any other line (`line` as it
/// was), which the usual check reads, with its usual errors.
fn long_argument(line: &mut Vec<u8>) -> Option<RxJsonRpcMessage<RoleServer>> {
    let long = LongString::find(line)?;
    let mut message = jsonrpc::checked(long.rest()).ok()??;
    let JsonRpcMessage::Request(request) = &mut message else {
        return None;
    };
    let ClientRequest::CallToolRequest(call) = &mut request.request else {
        return None;
    };
    let slot = call
        .params
        .arguments
        .as_mut()?
        .values_mut()
        .find_map(|value| marked(value, long.mark()))?;
    match long.decode(std::mem::take(line)) {
        Ok(text) => {
            *slot = text;
            Some(message)
        }
        Err(back) => {
            *line = back;
            None
        }
    }
}

/// What one read of a line gave.
enum Line {
    /// A line (without its end of line) is in the buffer.
    Read,
    /// The line was longer than the bound: it was read to its end and dropped.
    TooLong,
    /// The input ended.
    End,
}

/// Reads one line into `line` (keeping at most `max` bytes of it, so that a line without end
/// costs no more memory than that).
async fn read_line<R: AsyncRead + Unpin>(
    input: &mut BufReader<R>,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::End,
                (false, false) => Line::Read, // a last line without its end of line
            });
        }
        let (chunk, ended) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (&available[..at], Some(at + 1)),
            None => (available, None),
        };
        if !too_long && line.len() + chunk.len() <= max {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line.clear();
        }
        let used = ended.unwrap_or(available.len());
        input.consume(used);
        if ended.is_some() {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(if too_long { Line::TooLong } else { Line::Read });
        }
    }
}

/// Writes each line to the client as it comes, flushed.
async fn write_lines<W: AsyncWrite + Unpin>(
    mut lines: mpsc::UnboundedReceiver<Vec<u8>>,
    mut output: W,
) {
    while let Some(line) = lines.recv().await {
        if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
            break;
        }
    }
}
