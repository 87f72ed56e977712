//! A tool whose library runs in a worker process: its worker (started again after a crash,
//! with backoff if it keeps dying), and its calls across the pipe, deadline and grace included.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use plugin_abi::{ContextField, FfiContext};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::limits::IsolationSettings;
use super::protocol::{CallInfo, Hello, Op, Outcome, ToWorker};
use super::worker_process::{CallResult, Pending, StartError, WorkerProcess};
use crate::config::SandboxPolicy;
use crate::exec::call_threads;
use crate::load::error::{LoadError, LoadErrorKind};
use crate::load::loader::Staged;
use crate::secrets::{SecretAccess, SecretGrant};
use crate::sync::lock;
use plugin_api::ToolError;

/// How long a caller polls for a worker's answer before it awaits it.
const CALLER_POLL: Duration = Duration::from_micros(60);
/// The longest wait before a worker that keeps dying is started again.
const MAX_RESTART_DELAY: Duration = Duration::from_secs(5);

/// A tool (or an extension) served by a worker process.
pub(crate) struct IsolatedTool {
    program: PathBuf,
    /// The host's private copy of the library, which every worker of this build loads.
    library: Staged,
    source: PathBuf,
    /// For an extension: its point and file name.
    extension: Option<(String, String)>,
    settings: IsolationSettings,
    /// How long a worker may take to load the library and create its tool.
    init_timeout: Duration,
    /// What the first worker said about the tool.
    pub(crate) hello: Hello,
    /// What bounds a sandboxed worker, in words, and how long the host took to set it up (as
    /// the first worker was bounded).
    limits: Option<(String, Duration)>,
    /// The secrets it may receive, and how to grant more.
    secrets: Arc<SecretGrant>,
    slot: Arc<Mutex<Slot>>,
}

#[derive(Default)]
struct Slot {
    worker: Option<Arc<WorkerProcess>>,
    /// Workers that died in a row (a call that succeeds resets it).
    deaths: u32,
    /// When the next worker may start, after a death.
    not_before: Option<Instant>,
    last_death: String,
}

/// Why the caller stopped waiting for a call.
pub(crate) enum Stopped {
    /// The deadline passed.
    Deadline,
    /// The user intervened, with this error.
    Interrupted(ToolError),
}

impl IsolatedTool {
    /// Starts the first worker of the library copy `library` (found at `source`; an extension
    /// at `(point, name)`).
    pub(crate) fn start(
        program: &Path,
        library: Staged,
        source: &Path,
        extension: Option<(String, String)>,
        settings: IsolationSettings,
        init_timeout: Duration,
    ) -> Result<Self, LoadError> {
        let ext = extension.as_ref();
        let worker = WorkerProcess::start(program, &library, source, ext, &settings, init_timeout);
        let worker = worker.map_err(|e| start_error(source, e))?;
        if let Some(policy) = &settings.sandbox {
            check_grants(source, &worker.hello, policy)?;
        }
        let secrets = Arc::new(secret_grant(source, extension.as_ref(), &settings));
        Ok(Self {
            program: program.to_owned(),
            library,
            source: source.to_owned(),
            extension,
            settings,
            init_timeout,
            hello: worker.hello.clone(),
            limits: worker.limits.clone(),
            secrets,
            slot: Arc::new(Mutex::new(Slot {
                worker: Some(Arc::new(worker)),
                ..Slot::default()
            })),
        })
    }

    /// The process id of the current worker, if one runs.
    pub(crate) fn worker_pid(&self) -> Option<u32> {
        let slot = lock(&self.slot);
        slot.worker
            .as_ref()
            .filter(|w| !w.is_dead())
            .map(|w| w.link.pid)
    }

    /// The running worker, or a new one (unless the last ones died too recently).
    fn worker(&self, tool: &str) -> Result<Arc<WorkerProcess>, ToolError> {
        let mut slot = lock(&self.slot);
        if let Some(worker) = &slot.worker {
            if !worker.is_dead() {
                return Ok(worker.clone());
            }
            let reason = worker.death();
            slot.worker = None;
            slot.deaths += 1;
            // The first restart is immediate; then 100 ms, doubled per death, at most 5 s.
            let delay = match slot.deaths {
                0 | 1 => Duration::ZERO,
                n => {
                    (Duration::from_millis(100) * 2u32.saturating_pow(n - 2)).min(MAX_RESTART_DELAY)
                }
            };
            slot.not_before = Some(crate::config::numbers::later(Instant::now(), delay));
            slot.last_death = reason;
        }
        if let Some(at) = slot.not_before.filter(|at| *at > Instant::now()) {
            let wait = at - Instant::now();
            return Err(ToolError::internal(format!(
                "the plugin process of tool {tool} died {} times in a row (last: {}); it is started again in {} ms",
                slot.deaths,
                slot.last_death,
                wait.as_millis()
            )));
        }
        let extension = self.extension.as_ref();
        match WorkerProcess::start(
            &self.program,
            &self.library,
            &self.source,
            extension,
            &self.settings,
            self.init_timeout,
        ) {
            Ok(worker) => {
                let worker = Arc::new(worker);
                slot.worker = Some(worker.clone());
                Ok(worker)
            }
            Err(e) => Err(ToolError::internal(format!(
                "tool {tool}: {}",
                start_error(&self.source, e).reason
            ))),
        }
    }

    /// Whether the tool is ready (`None`), asking its worker; a tool without a readiness
    /// function, or whose worker is down (the next call starts one), is ready.
    pub(crate) fn readiness(&self) -> Option<String> {
        if !self.hello.readiness {
            return None;
        }
        let worker = lock(&self.slot).worker.clone()?;
        worker.readiness(Duration::from_secs(2))
    }

    /// Runs `op` in the worker for the call `ctx`, until it ends, `deadline` passes or
    /// `interrupt` completes. A call abandoned that way is cancelled in the worker; if it is
    /// still running after the grace period, the worker is killed.
    ///
    /// An `execute` answer's message is cut to `max_output` bytes in the worker, so a long
    /// answer never crosses the pipe whole.
    pub(crate) async fn call(
        &self,
        tool: &str,
        op: Op,
        ctx: FfiContext,
        deadline: Option<Duration>,
        max_output: Option<usize>,
        interrupt: impl Future<Output = ToolError>,
    ) -> Result<Outcome, Result<ToolError, Stopped>> {
        let worker = self.worker(tool).map_err(Ok)?;
        let link = worker.link.clone();
        let id = link.next_id();
        let (tx, rx) = oneshot::channel::<CallResult>();
        let mut info = call_info(&ctx);
        info.max_output = max_output.map_or(u64::MAX, |n| n as u64);
        let trace = (!info.traceparent.is_empty()).then(|| {
            let name = format!("worker {}", op.name());
            (info.traceparent.clone(), name)
        });
        let pending = Pending {
            ctx,
            done: Some(tx),
            runtime: Handle::try_current().ok(),
            trace,
        };
        lock(&link.calls).insert(id, pending);
        if let Some(reason) = link.death.get() {
            // It died after `worker` looked: its reader may have failed its calls already.
            lock(&link.calls).remove(&id);
            return Err(Ok(ToolError::internal(reason.clone())));
        }
        // A worker that is gone fails the call through its reader, with the reason it ended.
        let info = Box::new(info);
        let _ = link.send(&ToWorker::Call { id, op, info });
        // A short call's answer comes back within tens of microseconds: waiting for it here
        // spares the wake-up of a parked caller, which costs as much again.
        let mut rx = rx;
        let quick = call_threads::poll(CALLER_POLL, || match rx.try_recv() {
            Err(oneshot::error::TryRecvError::Empty) => None,
            Ok(done) => Some(Ok(done)),
            Err(oneshot::error::TryRecvError::Closed) => Some(Err(())),
        });
        let ended = |done: Result<CallResult, ()>| match done {
            Ok(Ok(answer)) => {
                lock(&self.slot).deaths = 0;
                Ok(answer)
            }
            Ok(Err(e)) => Err(Ok(self.in_sandbox(e))),
            Err(()) => Err(Ok(
                self.in_sandbox(ToolError::internal("the plugin process is gone"))
            )),
        };
        if let Some(done) = quick {
            return ended(done);
        }
        let stopped = tokio::select! {
            done = rx => return ended(done.map_err(drop)),
            () = sleep(deadline) => Stopped::Deadline,
            e = interrupt => Stopped::Interrupted(e),
        };
        link.abandon(id);
        let _ = link.send(&ToWorker::Cancel { id });
        self.watch_grace(worker, id);
        Err(Err(stopped))
    }

    /// `error` with the sandbox the call ran in, if it ran in one: `... (the tool ran sandboxed;
    /// granted: net:443)`, so whoever reads the error (the model, the log, the audit record)
    /// knows a denied operation may be why.
    fn in_sandbox(&self, error: ToolError) -> ToolError {
        let Some(policy) = &self.settings.sandbox else {
            return error;
        };
        let enforced = self.hello.sandbox.as_deref().unwrap_or("sandboxed");
        let message = format!(
            "{} (the tool ran {enforced}; granted: {}; see `toolhost inspect` for its sandbox)",
            error.message(),
            policy.grants_text()
        );
        ToolError::new(error.kind(), message)
    }

    /// The secrets its plugin may receive: only those granted by name.
    pub(crate) fn secret_access(&self) -> SecretAccess {
        SecretAccess::Granted(self.secrets.clone())
    }

    /// A sandboxed worker's limits and what enforces them (`memory 1024 MiB, CPU 600 s, 256
    /// tasks (cgroup v1 and rlimits)`), and how long the host took to set them up.
    pub(crate) fn limits(&self) -> Option<(&str, Duration)> {
        self.limits
            .as_ref()
            .map(|(text, took)| (text.as_str(), *took))
    }

    /// Whether its worker runs sandboxed, and what the sandbox enforces.
    pub(crate) fn sandbox(&self) -> Option<(&SandboxPolicy, &str, Duration)> {
        let policy = self.settings.sandbox.as_deref()?;
        let enforced = self.hello.sandbox.as_deref().unwrap_or("sandboxed");
        Some((
            policy,
            enforced,
            Duration::from_micros(self.hello.sandbox_micros),
        ))
    }

    /// Runs `op` in the worker with no deadline (the hooks, extensions, `execute_bare`).
    pub(crate) async fn call_to_end(
        &self,
        name: &str,
        op: Op,
        ctx: FfiContext,
    ) -> Result<Outcome, ToolError> {
        let never = std::future::pending();
        match self.call(name, op, ctx, None, None, never).await {
            Ok(outcome) => Ok(outcome),
            Err(Ok(e)) => Err(e),
            Err(Err(_)) => Err(ToolError::internal("the call was stopped")),
        }
    }

    /// If call `id` is still running after the grace period (timed on a thread of its own:
    /// the caller's runtime may not run meanwhile), the worker is retired (later calls get a
    /// new one) and killed once no call but abandoned ones runs on it, so the kill fails only
    /// the call that overran.
    fn watch_grace(&self, worker: Arc<WorkerProcess>, id: u64) {
        let grace = self.settings.grace;
        let slot = self.slot.clone();
        let watcher = std::thread::Builder::new()
            .name("toolhost-grace".into())
            .spawn(move || {
                std::thread::sleep(grace);
                if !lock(&worker.link.calls).contains_key(&id) {
                    return;
                }
                {
                    let mut slot = lock(&slot);
                    if slot.worker.as_ref().is_some_and(|w| Arc::ptr_eq(w, &worker)) {
                        slot.worker = None;
                    }
                }
                worker.link.kill_when_only_abandoned(format!(
                    "a cancelled call did not stop within its grace period of {} ms ([isolation] grace_ms)",
                    grace.as_millis()
                ));
            });
        if let Err(e) = watcher {
            tracing::warn!("no thread to time a cancelled call's grace period: {e}");
        }
    }
}

async fn sleep(deadline: Option<Duration>) {
    match deadline {
        Some(d) if Handle::try_current().is_ok() => tokio::time::sleep(d).await,
        _ => std::future::pending().await,
    }
}

/// The text fields of `ctx`, for the worker's context: what the plugin would read from it.
fn call_info(ctx: &FfiContext) -> CallInfo {
    let field = |field| ctx.field(field).into_string();
    CallInfo {
        agent_name: field(ContextField::AgentName),
        profile: field(ContextField::Profile),
        tool_name: field(ContextField::ToolName),
        method: field(ContextField::Method),
        extension_point: field(ContextField::ExtensionPoint),
        extension_name: field(ContextField::ExtensionName),
        log_id: field(ContextField::LogId).parse().unwrap_or_default(),
        max_output: u64::MAX,
        traceparent: crate::telemetry::traceparent().unwrap_or_default(),
    }
}

/// A worker that did not start, as a load error of `source`.
fn start_error(source: &Path, error: StartError) -> LoadError {
    match error {
        StartError::Load { kind, reason } => {
            LoadError::new(source, LoadErrorKind::from_name(&kind), reason)
        }
        StartError::Spawn(reason) => LoadError::new(
            source,
            LoadErrorKind::InitFailed,
            format!("its worker process did not start: {reason}"),
        ),
        StartError::Sandbox(reason) => LoadError::new(source, LoadErrorKind::Sandbox, reason),
    }
}

/// The capabilities the tool of `hello` (found at `source`) asks for that `policy` does not
/// grant, as a load error that says how to grant them.
/// The secrets the library `source` (an extension at `(point, name)`) may receive under
/// `settings`, named as messages name it.
fn secret_grant(
    source: &Path,
    extension: Option<&(String, String)>,
    settings: &IsolationSettings,
) -> SecretGrant {
    let (holder, table) = match extension {
        Some((_, name)) => (
            format!("extension '{name}'"),
            "[sandbox] (every isolated tool and extension) or [sandbox.plugins.<its plugin folder>]"
                .to_owned(),
        ),
        None => {
            let name = source.file_stem().unwrap_or_default().to_string_lossy();
            (format!("tool '{name}'"), format!("[tools.{name}]"))
        }
    };
    SecretGrant {
        keys: settings.secrets.clone(),
        holder,
        table,
    }
}

fn check_grants(source: &Path, hello: &Hello, policy: &SandboxPolicy) -> Result<(), LoadError> {
    let info: plugin_api::ToolInfo = match serde_json::from_str(&hello.info) {
        Ok(info) => info,
        // An extension's metadata: it declares no capabilities.
        Err(_) => return Ok(()),
    };
    let missing = policy.missing(&info.capabilities);
    if missing.is_empty() {
        return Ok(());
    }
    let name = source
        .file_stem()
        .map(|s| s.to_string_lossy())
        .unwrap_or_default();
    let quoted: Vec<String> = missing.iter().map(|m| format!("\"{m}\"")).collect();
    Err(LoadError::new(
        source,
        LoadErrorKind::NotGranted,
        format!(
            "tool {name} runs sandboxed and asks for {}, which the user has not granted (granted: {}): to grant it, add grant = [{}] to [tools.{name}] in usr/toolhost.toml, or run it without a sandbox with sandbox = \"off\" there",
            missing.join(", "),
            policy.grants_text(),
            quoted.join(", ")
        ),
    ))
}
