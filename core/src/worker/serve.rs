//! The worker process: loads one tool library with the host's checks, says hello, then serves
//! the host's calls over the pipe until the host closes it.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::runtime::Handle;

use super::context::{Reply, WorkerCall, WorkerLink};
use crate::exec::call_threads;
use crate::exec::cancel::Cancel;
use crate::isolation::protocol::{
    read_frame, CallInfo, FromWorker, Hello, Op, Outcome, ToWorker, WireError, WireResponse,
    WorkerSpan,
};
use crate::isolation::sandbox::{Confinement, SANDBOX_ENV, SCRATCH_ENV};
use crate::load::generation::Generation;
use crate::plugin::{ExtensionHandle, ToolHandle};
use crate::sync::lock;
use plugin_api::ToolError;

/// Ends the worker and everything it started (its process group, which the host made its
/// own), at once: the host is gone or done with it. Nothing a plugin started outlives it,
/// whether the host closed the pipe or ended without a word.
pub(super) fn end_with_descendants() -> ! {
    #[cfg(unix)]
    // SAFETY: signals this process's own group, this process included.
    unsafe {
        libc::kill(0, libc::SIGKILL);
    }
    exit_now()
}

/// Ends the worker at once, without running destructors or exit handlers (a plugin's state
/// may be anything by then).
pub(super) fn exit_now() -> ! {
    #[cfg(unix)]
    // SAFETY: ends the process.
    unsafe {
        libc::_exit(0)
    }
    #[cfg(not(unix))]
    std::process::exit(0)
}

/// What a worker serves.
enum Served {
    Tool(Box<ToolHandle>),
    Extension(ExtensionHandle),
}

/// Runs a worker process for the library copy `library`, found at `source` (the hidden
/// `toolhost __worker LIBRARY SOURCE [POINT NAME]` command; with `extension`, the point and
/// file name of an extension). Never returns: the worker ends when the host closes its
/// standard input, or when the host is gone.
pub fn serve_worker(library: &Path, source: &Path, extension: Option<(&str, &str)>) -> ! {
    let (input, output) = match take_stdio() {
        Ok(pipes) => pipes,
        Err(e) => {
            eprintln!("toolhost worker: cannot set up its pipes: {e}");
            exit_now()
        }
    };
    let link = Arc::new(WorkerLink::new(output));
    let scratch = std::env::var_os(SCRATCH_ENV).map(PathBuf::from);
    let plan = std::env::var_os(SANDBOX_ENV);
    // The plugin and what it starts do not see them.
    // SAFETY: still the only thread, so nothing reads the environment meanwhile.
    unsafe {
        std::env::remove_var(SCRATCH_ENV);
        std::env::remove_var(SANDBOX_ENV);
    }
    // Before the library is opened: its constructors run confined too.
    let confining = std::time::Instant::now();
    let sandbox = sandbox(plan, library);
    let sandbox_micros = confining.elapsed().as_micros() as u64;
    let sandbox = match sandbox {
        Ok(sandbox) => sandbox,
        Err(reason) => {
            let kind = crate::LoadErrorKind::Sandbox.as_str().to_owned();
            link.send(&FromWorker::LoadFailed { kind, reason });
            exit_now()
        }
    };
    let tool = match load(library, source, extension) {
        Ok((tool, mut hello)) => {
            hello.sandbox = sandbox;
            hello.sandbox_micros = sandbox_micros;
            link.send(&FromWorker::Hello(hello));
            Arc::new(tool)
        }
        Err(e) => {
            let (kind, reason) = (e.kind.as_str().to_owned(), e.reason);
            link.send(&FromWorker::LoadFailed { kind, reason });
            exit_now()
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("toolhost-worker-rt")
        .build();
    let Ok(runtime) = runtime else {
        eprintln!("toolhost worker: cannot start its runtime");
        exit_now()
    };
    let scratch = scratch.map(Arc::new);
    serve(
        &mut BufReader::new(input),
        &link,
        &tool,
        runtime.handle(),
        &scratch,
    );
    end_with_descendants()
}

/// Reads the sandbox the host asked for (`plan`, from [`SANDBOX_ENV`]) and confines this
/// process to it:
/// `None` if none was asked for, else what is enforced; an error if it cannot be. The library
/// copy the worker loads stays readable: a file copy (removed, open through its descriptor)
/// by a rule of its own; an in-memory file needs none (no rule can name one).
fn sandbox(plan: Option<std::ffi::OsString>, library: &Path) -> Result<Option<String>, String> {
    let Some(text) = plan else {
        return Ok(None);
    };
    let mut plan: Confinement = serde_json::from_str(&text.to_string_lossy())
        .map_err(|e| format!("the host sent an unreadable sandbox: {e}"))?;
    let in_memory = std::fs::read_link(library)
        .is_ok_and(|target| target.to_string_lossy().starts_with("/memfd:"));
    if !in_memory {
        plan.read.push(library.to_owned());
    }
    super::confine::confine(&plan).map(Some)
}

/// Keeps the pipes to the host for the frames, and points standard output at standard error
/// and standard input at `/dev/null`, so a plugin's prints and reads never touch the frames.
#[cfg(unix)]
fn take_stdio() -> std::io::Result<(File, File)> {
    use std::os::fd::FromRawFd;
    let dup = |fd| match unsafe { libc::dup(fd) } {
        -1 => Err(std::io::Error::last_os_error()),
        // SAFETY: a new descriptor that nothing else owns.
        copy => Ok(unsafe { File::from_raw_fd(copy) }),
    };
    let (input, output) = (dup(0)?, dup(1)?);
    let null = File::open("/dev/null")?;
    // SAFETY: plain system calls on descriptors this process owns.
    unsafe {
        use std::os::fd::AsRawFd;
        if libc::dup2(2, 1) == -1 || libc::dup2(null.as_raw_fd(), 0) == -1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok((input, output))
}

/// Keeps the pipes to the host for the frames, and points the process's standard output at
/// its standard error and its standard input at `NUL`, so a plugin's prints and reads (std's
/// own look its handles up at each use) never touch the frames.
#[cfg(windows)]
fn take_stdio() -> std::io::Result<(File, File)> {
    use std::os::windows::io::{AsHandle, AsRawHandle, IntoRawHandle};
    #[link(name = "kernel32")]
    unsafe extern "system" {
        fn SetStdHandle(which: u32, handle: *mut std::ffi::c_void) -> i32;
    }
    const STD_INPUT_HANDLE: u32 = -10i32 as u32;
    const STD_OUTPUT_HANDLE: u32 = -11i32 as u32;
    let input = std::io::stdin().as_handle().try_clone_to_owned()?;
    let output = std::io::stdout().as_handle().try_clone_to_owned()?;
    // Open for the life of the process: it is its standard input from now on.
    let null = File::open("NUL")?.into_raw_handle();
    // SAFETY: open handles of this process, set as its standard handles.
    unsafe {
        if SetStdHandle(STD_OUTPUT_HANDLE, std::io::stderr().as_raw_handle()) == 0
            || SetStdHandle(STD_INPUT_HANDLE, null) == 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok((File::from(input), File::from(output)))
}

#[cfg(not(any(unix, windows)))]
fn take_stdio() -> std::io::Result<(File, File)> {
    Err(std::io::Error::other(
        "isolated plugins need a Unix system or Windows",
    ))
}

/// Loads the tool or extension, as the host would in its own process.
fn load(
    library: &Path,
    source: &Path,
    extension: Option<(&str, &str)>,
) -> Result<(Served, Hello), crate::load::LoadError> {
    let module = crate::load::loader::load_staged(library, source)?;
    let generation = Arc::new(Generation::new(&module, source, 1, Arc::default()));
    let package = module.root.package().as_str().to_owned();
    let contract = module.contract.clone();
    if let Some((point, name)) = extension {
        let handle = ExtensionHandle::create(generation, source, point, name)?;
        let hello = Hello {
            info: serde_json::to_string(handle.info()).unwrap_or_default(),
            package,
            version: handle.version().to_owned(),
            contract,
            before_hook: false,
            after_hook: false,
            readiness: false,
            sandbox: None,
            sandbox_micros: 0,
        };
        return Ok((Served::Extension(handle), hello));
    }
    let (tool, _) = ToolHandle::instantiate(generation, source)?;
    let hello = Hello {
        info: serde_json::to_string(tool.info()).unwrap_or_default(),
        package,
        version: tool.version().to_owned(),
        contract,
        before_hook: tool.has_before_hook(),
        after_hook: tool.has_after_hook(),
        readiness: tool.has_readiness(),
        sandbox: None,
        sandbox_micros: 0,
    };
    Ok((Served::Tool(Box::new(tool)), hello))
}

/// The calls of this worker that have not ended, by number.
type Running = Arc<Mutex<HashMap<u64, Arc<Cancel>>>>;

/// Reads the host's messages until its pipe closes.
fn serve(
    input: &mut BufReader<File>,
    link: &Arc<WorkerLink>,
    tool: &Arc<Served>,
    rt: &Handle,
    scratch: &Option<Arc<PathBuf>>,
) {
    let serving = Serving {
        link,
        tool,
        rt,
        scratch,
        running: Running::default(),
    };
    let mut buf = Vec::new();
    while let Ok(Some(message)) = read_frame::<ToWorker>(input, &mut buf) {
        match message {
            ToWorker::Call { id, op, info } => serving.call(id, op, *info),
            ToWorker::Cancel { id } => {
                if let Some(cancel) = lock(&serving.running).get(&id) {
                    cancel.cancel();
                }
            }
            ToWorker::Answer { req, answer } => match lock(&link.waiting).remove(&req) {
                Some(Reply::Blocking(tx)) => drop(tx.send(answer)),
                Some(Reply::Awaiting(tx)) => drop(tx.send(answer)),
                None => {}
            },
            ToWorker::Readiness { id } => serving.readiness(id),
        }
    }
}

/// What the worker serves the host's messages with.
struct Serving<'a> {
    link: &'a Arc<WorkerLink>,
    tool: &'a Arc<Served>,
    rt: &'a Handle,
    scratch: &'a Option<Arc<PathBuf>>,
    running: Running,
}

impl Serving<'_> {
    /// Starts the call `id` on a thread of its own; without one (the worker at its tasks
    /// limit), the call fails at once instead of never answering.
    fn call(&self, id: u64, op: Op, mut info: CallInfo) {
        let cancel = Arc::new(Cancel::default());
        lock(&self.running).insert(id, cancel.clone());
        // The plugin's part is a child of the host's span: the plugin reads its
        // `traceparent` from the context.
        info.traceparent =
            crate::telemetry::propagation::child_of(&info.traceparent).unwrap_or_default();
        let call = Arc::new(WorkerCall {
            id,
            info,
            cancel,
            link: self.link.clone(),
            scratch_root: self.scratch.clone(),
            scratch: std::sync::OnceLock::new(),
        });
        let (tool, rt, running) = (self.tool.clone(), self.rt.clone(), self.running.clone());
        let dispatched = call_threads::dispatch(Box::new(move || {
            run_call(&tool, &rt, &call, op, &running);
        }));
        if let Err(e) = dispatched {
            lock(&self.running).remove(&id);
            let error = ToolError::internal(format!(
                "the plugin's worker process could not start a thread for the call: {e} (its tasks limit; grant more with tasks:N if it needs more)"
            ));
            self.link.send(&FromWorker::Done {
                id,
                result: Err(WireError::from(error)),
                ready: None,
                span: None,
            });
        }
    }

    /// Answers whether the tool is ready, from a thread of its own (unanswered if no thread
    /// can start: the host's wait for it is bounded).
    fn readiness(&self, id: u64) {
        let (tool, link) = (self.tool.clone(), self.link.clone());
        let _ = call_threads::dispatch(Box::new(move || {
            let reason = match &*tool {
                Served::Tool(tool) => tool.readiness().reason().map(str::to_owned),
                Served::Extension(_) => None,
            };
            link.send(&FromWorker::Ready { id, reason });
        }));
    }
}

/// Runs one call on its thread and sends its result (cut to its output limit), the tool's
/// readiness after an `execute`, and the plugin's span.
fn run_call(tool: &Served, rt: &Handle, call: &Arc<WorkerCall>, op: Op, running: &Running) {
    let id = call.id;
    let max_output = call.info.max_output;
    let execute = matches!(op, Op::Execute(_));
    let start = unix_nanos();
    let mut result = rt.block_on(run(tool, call, op));
    let span = (!call.info.traceparent.is_empty()).then(|| WorkerSpan {
        traceparent: call.info.traceparent.clone(),
        start_unix_nanos: start,
        end_unix_nanos: unix_nanos(),
    });
    if let Ok(Outcome::Response(answer)) = &mut result {
        cut(answer, max_output);
    }
    let ready = match tool {
        Served::Tool(tool) if execute && tool.has_readiness() => {
            Some(tool.readiness().reason().map(str::to_owned))
        }
        _ => None,
    };
    lock(running).remove(&id);
    call.remove_scratch();
    call.link.send(&FromWorker::Done {
        id,
        result,
        ready,
        span,
    });
}

/// Now, in nanoseconds since the Unix epoch.
fn unix_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Cuts `answer`'s message to its first `max` bytes (a character boundary), noting how many
/// were cut, and gives the rest's memory back before the answer is sent.
fn cut(answer: &mut WireResponse, max: u64) {
    let len = answer.message.len();
    let Ok(max) = usize::try_from(max) else {
        return;
    };
    if len <= max {
        return;
    }
    let mut keep = max;
    while !answer.message.is_char_boundary(keep) {
        keep -= 1;
    }
    answer.message.truncate(keep);
    answer.message.shrink_to_fit();
    answer.cut = (len - keep) as u64;
}

/// Runs one call of the tool or extension with the worker's context.
async fn run(served: &Served, call: &Arc<WorkerCall>, op: Op) -> Result<Outcome, WireError> {
    let ctx = call.to_ffi();
    let result = match (served, op) {
        (Served::Tool(tool), Op::Execute(args)) => tool
            .execute_ffi(ctx, args)
            .await
            .map(|answer| Outcome::Response(answer.into_ffi().into())),
        (Served::Tool(tool), Op::Before(args)) => {
            tool.before_ffi(ctx, args).await.map(|()| Outcome::Done)
        }
        (Served::Tool(tool), Op::After(response)) => tool
            .after_ffi(ctx, response.into())
            .await
            .map(|()| Outcome::Done),
        (Served::Extension(extension), Op::Extension(data)) => extension
            .execute_ffi(ctx, data.into())
            .await
            .map(|changed| Outcome::Data(changed.map(|d| d.into_string()))),
        (_, op) => {
            drop(ctx);
            Err(ToolError::internal(format!(
                "this worker cannot run {op:?}"
            )))
        }
    };
    result.map_err(WireError::from)
}
