//! The messages between the host and a worker process, and their frames.
//!
//! Every message is one frame: its length as 4 bytes (little-endian), then the message in
//! postcard. The host writes [`ToWorker`] on the worker's standard input; the worker writes
//! [`FromWorker`] on a copy of its standard output (its own standard output is pointed at
//! standard error, so what a plugin prints never mixes with the frames). No I/O happens here
//! beyond reading and writing one frame.

use std::io::{self, Read, Write};

use abi_stable::std_types::{ROption, RString};
use plugin_abi::{FfiError, FfiResponse};
use plugin_api::ToolError;
use serde::{Deserialize, Serialize};

/// The largest frame either side accepts (a tool's answer of 256 MiB is already unusual).
pub(crate) const MAX_FRAME: usize = 1 << 30;

/// What the host sends to a worker.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ToWorker {
    /// Start a call of the tool.
    Call {
        /// The call's number, unique within this worker.
        id: u64,
        /// What to run.
        op: Op,
        /// What the plugin's context says about the call (boxed: the other messages are small).
        info: Box<CallInfo>,
    },
    /// The host stopped waiting for call `id` (deadline, intervention).
    Cancel {
        /// The call.
        id: u64,
    },
    /// The answer to a request the worker made for one of its calls.
    Answer {
        /// The request's number.
        req: u64,
        /// The answer.
        answer: Answer,
    },
    /// Ask the tool whether it is ready; answered by [`FromWorker::Ready`].
    Readiness {
        /// The question's number.
        id: u64,
    },
}

/// Which function of the tool a call runs.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Op {
    /// `execute`, with JSON arguments.
    Execute(String),
    /// The tool's own `before_execution`, with JSON arguments.
    Before(String),
    /// The tool's own `after_execution`, with the response.
    After(WireResponse),
    /// An extension's `execute`, with the point's data as JSON.
    Extension(String),
}

impl Op {
    /// The plugin function it runs, as the worker's span names it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Execute(_) => "execute",
            Self::Before(_) => "before_execution",
            Self::After(_) => "after_execution",
            Self::Extension(_) => "extension",
        }
    }
}

/// What a finished call gives.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Outcome {
    /// `execute`'s response.
    Response(WireResponse),
    /// A hook ran.
    Done,
    /// An extension ran: the new data (JSON) if it changed it.
    Data(Option<String>),
}

/// The text fields of a call's context (read by the plugin without a round trip).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct CallInfo {
    pub agent_name: String,
    pub profile: String,
    pub tool_name: String,
    pub method: String,
    pub extension_point: String,
    pub extension_name: String,
    pub log_id: u64,
    /// The most bytes of an `execute` answer's message the host keeps: the worker cuts the
    /// rest off (at a character boundary) before it crosses the pipe. `u64::MAX`: no cut.
    pub max_output: u64,
    /// The `traceparent` of the host's span of the call, when it is recorded for export (else
    /// empty): the worker times the plugin's part as its child ([`WorkerSpan`]).
    pub traceparent: String,
}

/// The plugin's part of a call, timed by the worker as a child of the host's span
/// ([`CallInfo::traceparent`]); the host exports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WorkerSpan {
    /// Its own `traceparent` (what the plugin read from its context).
    pub traceparent: String,
    /// When it started and ended, in nanoseconds since the Unix epoch.
    pub start_unix_nanos: u64,
    pub end_unix_nanos: u64,
}

/// What a worker sends to the host.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum FromWorker {
    /// The library loaded and its tool was created: the first message of a worker.
    Hello(Hello),
    /// The library could not be used: the first and last message of a worker.
    LoadFailed {
        /// [`LoadErrorKind`](crate::LoadErrorKind) as its `Debug` name.
        kind: String,
        /// The reason, as the in-process loader words it.
        reason: String,
    },
    /// Call `id` ended.
    Done {
        /// The call.
        id: u64,
        /// Its result.
        result: Result<Outcome, WireError>,
        /// After an `execute` of a tool with a readiness function: whether it is ready now
        /// (`None` inside if ready, else why not), so the host need not ask before the next.
        ready: Option<Option<String>>,
        /// The plugin's part, when the host's span of the call is recorded.
        span: Option<WorkerSpan>,
    },
    /// The answer to [`ToWorker::Readiness`]: `None` if ready, else why not.
    Ready {
        /// The question.
        id: u64,
        /// Why it is not ready.
        reason: Option<String>,
    },
    /// The plugin called a host function of the context of call `id`.
    Request {
        /// The call whose context it used.
        id: u64,
        /// The request's number, for its [`ToWorker::Answer`]; 0 when no answer is awaited.
        req: u64,
        /// The function and its arguments.
        request: HostRequest,
    },
}

/// A worker's tool or extension, as the host needs to know it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Hello {
    /// The tool's [`ToolInfo`](plugin_api::ToolInfo) (or the extension's `ExtensionInfo`) as
    /// JSON.
    pub info: String,
    /// The crate that built it.
    pub package: String,
    /// Its version.
    pub version: String,
    /// The plugin-abi version (the wire contract) it was built against.
    pub contract: String,
    /// Whether it has its own `before_execution`.
    pub before_hook: bool,
    /// Whether it has its own `after_execution`.
    pub after_hook: bool,
    /// Whether it has a `readiness` function.
    pub readiness: bool,
    /// What its sandbox enforces (`sandboxed`, or what the kernel could not enforce and the
    /// user allowed), if it runs in one.
    pub sandbox: Option<String>,
    /// How long applying it took the worker, in microseconds.
    pub sandbox_micros: u64,
}

/// A host function a plugin called, with its arguments.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum HostRequest {
    LogContent(String),
    SetProgress(String),
    AddProgress(String),
    CheckIntervention,
    LoopDataGet(String),
    LoopDataSet {
        key: String,
        json: String,
    },
    HistoryAdd {
        role: String,
        content: String,
    },
    DefaultBefore(String),
    DefaultAfter(WireResponse),
    Unmask(String),
    Mask(String),
    CallExtensions {
        point: String,
        json: String,
    },
    /// `ask`: a JSON request for whoever the call is served to.
    Ask(String),
}

/// The host's answer to a [`HostRequest`].
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Answer {
    /// Done, nothing to return.
    Unit,
    /// A text.
    Text(String),
    /// A text, if there is one.
    MaybeText(Option<String>),
    /// Done, or failed.
    Status(Result<(), WireError>),
    /// A text, or failed.
    TextResult(Result<String, WireError>),
}

/// A [`Response`](plugin_api::Response) on the pipe, as it crosses the library boundary.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct WireResponse {
    pub message: String,
    pub break_loop: bool,
    pub additional: Option<String>,
    pub metadata: Option<String>,
    /// The content blocks after the message, as a JSON array.
    pub content: Option<String>,
    /// The structured content, as JSON.
    pub structured_content: Option<String>,
    /// Bytes of the message the worker cut off ([`CallInfo::max_output`]).
    pub cut: u64,
}

impl From<FfiResponse> for WireResponse {
    fn from(r: FfiResponse) -> Self {
        Self {
            message: r.message.into_string(),
            break_loop: r.break_loop,
            additional: r.additional.into_option().map(RString::into_string),
            metadata: r.metadata.into_option().map(RString::into_string),
            content: r.content.into_option().map(RString::into_string),
            structured_content: r.structured_content.into_option().map(RString::into_string),
            cut: 0,
        }
    }
}

impl From<WireResponse> for FfiResponse {
    fn from(r: WireResponse) -> Self {
        let opt = |o: Option<String>| match o {
            Some(s) => ROption::RSome(RString::from(s)),
            None => ROption::RNone,
        };
        Self {
            message: RString::from(r.message),
            break_loop: r.break_loop,
            additional: opt(r.additional),
            metadata: opt(r.metadata),
            content: opt(r.content),
            structured_content: opt(r.structured_content),
        }
    }
}

/// A [`ToolError`] on the pipe: its kind code and message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WireError {
    pub kind: u8,
    pub message: String,
}

impl From<ToolError> for WireError {
    fn from(e: ToolError) -> Self {
        Self::from(FfiError::from(e))
    }
}

impl From<FfiError> for WireError {
    fn from(e: FfiError) -> Self {
        Self {
            kind: e.kind,
            message: e.message.into_string(),
        }
    }
}

impl From<WireError> for FfiError {
    fn from(e: WireError) -> Self {
        FfiError::new(e.kind, e.message)
    }
}

impl From<WireError> for ToolError {
    fn from(e: WireError) -> Self {
        ToolError::from(FfiError::from(e))
    }
}

/// Writes `message` as one frame (length, then postcard), in one `write_all`, and flushes.
pub(crate) fn write_frame<T: Serialize>(out: &mut impl Write, message: &T) -> io::Result<()> {
    let mut buf = postcard::to_extend(message, vec![0u8; 4])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let len = u32::try_from(buf.len() - 4)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "frame too large"))?;
    buf[..4].copy_from_slice(&len.to_le_bytes());
    out.write_all(&buf)?;
    out.flush()
}

/// Reads one frame; `Ok(None)` at the end of the stream (the other side closed it).
pub(crate) fn read_frame<T: for<'de> Deserialize<'de>>(
    input: &mut impl Read,
    buf: &mut Vec<u8>,
) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        let message = format!("a frame of {len} bytes is larger than {MAX_FRAME}");
        return Err(io::Error::new(io::ErrorKind::InvalidData, message));
    }
    // Grown as the bytes come, not to the size the frame declares: a side that declares a
    // large frame and sends little costs what it sent.
    buf.clear();
    let read = input.take(len as u64).read_to_end(buf)?;
    if read < len {
        let message = format!("the stream ended {read} bytes into a frame of {len}");
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, message));
    }
    postcard::from_bytes(buf)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_that_declares_more_than_it_sends_costs_what_it_sent() {
        // 1 GiB declared, 3 bytes sent, then the end.
        let mut input: &[u8] = &[0, 0, 0, 64, 1, 2, 3];
        let mut buf = Vec::new();
        let error = read_frame::<FromWorker>(&mut input, &mut buf).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof, "{error}");
        assert!(buf.capacity() < 1 << 20, "{} bytes held", buf.capacity());
    }

    #[test]
    fn frames_round_trip_and_end_cleanly() {
        let mut pipe = Vec::new();
        let call = ToWorker::Call {
            id: 7,
            op: Op::Execute("{\"a\":1}".into()),
            info: Box::new(CallInfo {
                tool_name: "echo".into(),
                ..CallInfo::default()
            }),
        };
        write_frame(&mut pipe, &call).unwrap();
        write_frame(&mut pipe, &ToWorker::Cancel { id: 7 }).unwrap();
        let mut input = &pipe[..];
        let mut buf = Vec::new();
        match read_frame::<ToWorker>(&mut input, &mut buf).unwrap() {
            Some(ToWorker::Call {
                id: 7,
                op: Op::Execute(args),
                info,
            }) => {
                assert_eq!(args, "{\"a\":1}");
                assert_eq!(info.tool_name, "echo");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            read_frame::<ToWorker>(&mut input, &mut buf).unwrap(),
            Some(ToWorker::Cancel { id: 7 })
        ));
        assert!(read_frame::<ToWorker>(&mut input, &mut buf)
            .unwrap()
            .is_none());
    }

    #[test]
    fn an_oversized_length_is_refused_without_allocating_it() {
        let mut input: &[u8] = &[0xff, 0xff, 0xff, 0xff];
        let err = read_frame::<ToWorker>(&mut input, &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
