//! The host's side of one worker process: starting it (with its limits), the pipe to it, and
//! what happens when it ends (the thread that reads its messages: `worker_reader.rs`).

use std::collections::HashMap;
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use plugin_abi::FfiContext;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::cgroup::WorkerGroup;
use super::limits::{self, IsolationSettings};
use super::protocol::{write_frame, Hello, Outcome, ToWorker};
use super::sandbox::{Confinement, SANDBOX_ENV, SCRATCH_ENV};
use crate::load::loader::Staged;
use crate::sync::lock;
use plugin_api::ToolError;

use super::worker_reader::read_worker;

/// How long a new worker may take to start, beside its library's constructor and metadata
/// read (which have the host's `init_timeout`).
const START_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a readiness the worker reported (after a call, or asked) stands.
const READINESS_FRESH: Duration = Duration::from_secs(1);

/// What a call of a worker gives.
pub(crate) type CallResult = Result<Outcome, ToolError>;

/// A call the worker has not finished: the context that answers its requests, and the caller
/// waiting for its end (gone once the caller stopped waiting).
pub(crate) struct Pending {
    pub(crate) ctx: FfiContext,
    pub(crate) done: Option<oneshot::Sender<CallResult>>,
    /// The caller's runtime, where requests that wait (progress, intervention) are answered.
    pub(crate) runtime: Option<Handle>,
    /// When the host's span of the call is recorded: its `traceparent`, and the name of the
    /// span the worker times as its child.
    pub(crate) trace: Option<(String, String)>,
}

/// What the host shares with a worker's reader thread.
pub(crate) struct Link {
    pub(super) input: Mutex<Option<ChildStdin>>,
    pub(crate) calls: Mutex<HashMap<u64, Pending>>,
    pub(super) ready: Mutex<HashMap<u64, mpsc::Sender<Option<String>>>>,
    /// Why the worker ended, once it has.
    pub(crate) death: OnceLock<String>,
    /// Why the host killed it, if it did.
    pub(super) killed: OnceLock<String>,
    pub(super) next_id: AtomicU64,
    /// The tool's readiness as the worker last reported it, and when.
    pub(super) readiness: Mutex<Option<(Instant, Option<String>)>>,
    /// The worker's process id.
    pub(crate) pid: u32,
    /// Calls whose caller stopped waiting (deadline, intervention).
    pub(super) abandoned: Mutex<std::collections::HashSet<u64>>,
    /// Why the worker is to be killed once only abandoned calls run on it.
    pub(super) doomed: OnceLock<String>,
    /// Cleared (under this lock) just before the worker is reaped: its process id may name
    /// another process after that, so it is signalled only while this is set.
    pub(super) unreaped: Mutex<bool>,
}

impl Link {
    /// Sends one message; fails if the worker is gone.
    pub(crate) fn send(&self, message: &ToWorker) -> std::io::Result<()> {
        match &mut *lock(&self.input) {
            Some(input) => write_frame(input, message),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        }
    }

    /// A new call or question number.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Notes that the caller of call `id` stopped waiting for it.
    pub(crate) fn abandon(&self, id: u64) {
        lock(&self.abandoned).insert(id);
    }

    /// Kills the worker, saying why, as soon as every call still running on it is one its
    /// caller abandoned: a call that overran never takes down a call that did not. Calls
    /// that still wait keep the worker until they end.
    pub(crate) fn kill_when_only_abandoned(&self, why: String) {
        let _ = self.doomed.set(why);
        self.kill_if_doomed();
    }

    pub(super) fn kill_if_doomed(&self) {
        let Some(why) = self.doomed.get() else {
            return;
        };
        let only_abandoned = {
            let calls = lock(&self.calls);
            let abandoned = lock(&self.abandoned);
            calls.keys().all(|id| abandoned.contains(id))
        };
        if only_abandoned {
            self.kill(why.clone());
        }
    }

    /// Kills the worker (SIGKILL), saying why; its calls fail with that reason.
    pub(crate) fn kill(&self, why: String) {
        if self.death.get().is_some() || self.killed.set(why).is_err() {
            return;
        }
        let unreaped = lock(&self.unreaped);
        #[cfg(unix)]
        if *unreaped {
            // SAFETY: a plain system call; the worker is not reaped while `unreaped` is held,
            // so its process group is still its own.
            unsafe {
                libc::kill(-(self.pid as libc::pid_t), libc::SIGKILL);
            }
        }
        // The worker and what it started, as its process group on Unix. Its reader holds its
        // handle until it is reaped, so the id is still the worker's.
        #[cfg(windows)]
        if *unreaped {
            let _ = Command::new("taskkill")
                .args(["/F", "/T", "/PID"])
                .arg(self.pid.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        drop(unreaped);
    }
}

/// A running worker. Dropping it closes its standard input: it exits once its calls are
/// done (nobody holds it while a call runs).
///
/// A worker also exits when its standard input ends because the host is gone, however it
/// ended (the kernel closes the pipe). `PR_SET_PDEATHSIG` is not used: it fires when the
/// *thread* that started the child ends, and workers are started from call threads that end
/// when idle.
pub(crate) struct WorkerProcess {
    pub(crate) link: Arc<Link>,
    pub(crate) hello: Hello,
    /// What bounds the worker (a sandboxed one's limits and what enforces them), in words,
    /// and how long the host took to set them up (its control group).
    pub(crate) limits: Option<(String, Duration)>,
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        drop(lock(&self.link.input).take());
    }
}

/// Why a worker did not start.
pub(crate) enum StartError {
    /// The library could not be used: its load error's kind and reason.
    Load { kind: String, reason: String },
    /// The worker could not be started, or died before it said hello.
    Spawn(String),
    /// Its sandbox cannot be applied (a grant opens a layer folder).
    Sandbox(String),
}

/// A worker's scratch folder (mode 0700, in the system's temporary folder), where each of its
/// calls gets a folder of its own, with the worker's private home and temporary folders
/// (`home/`, `tmp/`); removed with everything in it once the worker has ended.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn home(&self) -> std::path::PathBuf {
        self.0.join("home")
    }

    fn tmp(&self) -> std::path::PathBuf {
        self.0.join("tmp")
    }

    fn new() -> Result<Self, String> {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let name = format!("toolhost-scratch-{}-{n}", std::process::id());
        let dir = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&dir);
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(&dir)
            .map_err(|e| format!("cannot create its scratch folder {}: {e}", dir.display()))?;
        let scratch = Self(dir);
        for sub in [scratch.home(), scratch.tmp()] {
            builder
                .create(&sub)
                .map_err(|e| format!("cannot create {}: {e}", sub.display()))?;
        }
        Ok(scratch)
    }
}

impl Scratch {
    /// Points the worker's home and temporary folders (`HOME`, `TMPDIR`; on Windows
    /// `USERPROFILE`, `TMP`, `TEMP` too) into the scratch folder, which it names.
    fn set_env(&self, command: &mut Command) {
        command.env(SCRATCH_ENV, &self.0);
        command.env("HOME", self.home());
        command.env("TMPDIR", self.tmp());
        // Windows' names for them (std::env::temp_dir() reads TMP, then TEMP).
        #[cfg(windows)]
        command
            .env("USERPROFILE", self.home())
            .env("TMP", self.tmp())
            .env("TEMP", self.tmp());
    }
}

impl Link {
    /// The link to the worker `child` just started, holding its standard input.
    fn new(child: &mut std::process::Child) -> Arc<Self> {
        Arc::new(Link {
            input: Mutex::new(child.stdin.take()),
            calls: Mutex::default(),
            ready: Mutex::default(),
            death: OnceLock::new(),
            killed: OnceLock::new(),
            next_id: AtomicU64::new(0),
            readiness: Mutex::default(),
            pid: child.id(),
            unreaped: Mutex::new(true),
            abandoned: Mutex::default(),
            doomed: OnceLock::new(),
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl WorkerProcess {
    /// Starts `program __worker` for the library copy `library` (found at `source`; an
    /// extension at `(point, name)`), with `settings`' limits, and waits for its hello.
    pub(crate) fn start(
        program: &Path,
        library: &Staged,
        source: &Path,
        extension: Option<&(String, String)>,
        settings: &IsolationSettings,
        init_timeout: Duration,
    ) -> Result<Self, StartError> {
        #[cfg(not(unix))]
        if let Some(why) = limits::unenforceable(settings) {
            return Err(StartError::Sandbox(why));
        }
        let scratch = Scratch::new().map_err(StartError::Spawn)?;
        let (group, limits) = sandbox_group(settings);
        let mut command = command(
            program,
            library,
            source,
            extension,
            settings,
            group.as_ref(),
        );
        scratch.set_env(&mut command);
        // Only what this host asks for: never a sandbox inherited from its own environment.
        command.env_remove(SANDBOX_ENV);
        if let Some(policy) = &settings.sandbox {
            let plan =
                Confinement::plan(policy, source, &scratch.0).map_err(StartError::Sandbox)?;
            let json = serde_json::to_string(&plan)
                .map_err(|e| StartError::Spawn(format!("cannot write its sandbox: {e}")))?;
            command.env(SANDBOX_ENV, json);
        }
        let mut child = command.spawn().map_err(|e| {
            StartError::Spawn(format!(
                "cannot start the worker program {}: {e}",
                program.display()
            ))
        })?;
        let link = Link::new(&mut child);
        let (hello_tx, hello_rx) = mpsc::channel();
        let reader = {
            let link = link.clone();
            let settings = settings.clone();
            std::thread::Builder::new()
                .name(format!("toolhost-worker-{}", child.id()))
                .spawn(move || {
                    read_worker(child, &link, &settings, hello_tx, group.as_ref());
                    drop(group);
                    drop(scratch);
                })
        };
        if let Err(e) = reader {
            link.kill(format!("no thread to read it: {e}"));
            return Err(StartError::Spawn(format!("cannot start a thread: {e}")));
        }
        let hello = wait_for_hello(&link, &hello_rx, init_timeout)?;
        Ok(Self {
            link,
            hello,
            limits,
        })
    }

    /// Whether it has ended, or is ending because the host killed it (its reader may not
    /// have seen the end yet).
    pub(crate) fn is_dead(&self) -> bool {
        self.link.death.get().is_some() || self.link.killed.get().is_some()
    }

    /// Why it ended (or why the host killed it).
    pub(crate) fn death(&self) -> String {
        match (self.link.death.get(), self.link.killed.get()) {
            (Some(reason), _) => reason.clone(),
            (None, Some(killed)) => format!("the plugin process was killed: {killed}"),
            (None, None) => String::new(),
        }
    }

    /// Asks the tool whether it is ready; `None` if ready (or if it does not answer within
    /// `wait`: the call that follows finds out).
    pub(crate) fn readiness(&self, wait: Duration) -> Option<String> {
        if let Some((at, ready)) = &*lock(&self.link.readiness) {
            if at.elapsed() < READINESS_FRESH {
                return ready.clone();
            }
        }
        let id = self.link.next_id();
        let (tx, rx) = mpsc::channel();
        lock(&self.link.ready).insert(id, tx);
        if self.link.send(&ToWorker::Readiness { id }).is_err() {
            lock(&self.link.ready).remove(&id);
            return None;
        }
        let answer = rx.recv_timeout(wait);
        lock(&self.link.ready).remove(&id);
        let answer = answer.ok()?;
        *lock(&self.link.readiness) = Some((Instant::now(), answer.clone()));
        answer
    }
}

/// The host's environment variables every worker sees, if set: what programs need to find
/// programs and speak the user's language. Nothing else of the host's environment reaches a
/// worker (its secrets, keys and tokens live there) but what `env:NAME` grants; `HOME` and
/// `TMPDIR` are the worker's own folders.
#[cfg(not(windows))]
const WORKER_ENV: &[&str] = &["PATH", "LANG", "LANGUAGE", "TZ", "TERM", "RUST_BACKTRACE"];
/// On Windows also where the system is (`SystemRoot`, `windir`: system libraries and
/// services are found through them).
#[cfg(windows)]
const WORKER_ENV: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "RUST_BACKTRACE",
    "SystemRoot",
    "SYSTEMROOT",
    "windir",
];

/// Whether the host's variable `name` reaches a worker with `settings`.
fn passed(name: &std::ffi::OsStr, settings: &IsolationSettings) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    WORKER_ENV.contains(&name)
        || (name.starts_with("LC_") && name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
        || settings.env.iter().any(|granted| granted == name)
}

/// A sandboxed worker's control group, where the machine lets the host make one, and the
/// limits it runs with as `inspect` describes them, with the time the group took to make.
fn sandbox_group(
    settings: &IsolationSettings,
) -> (Option<WorkerGroup>, Option<(String, Duration)>) {
    if settings.sandbox.is_none() {
        return (None, None);
    }
    let started = Instant::now();
    let group = WorkerGroup::create(settings);
    let took = started.elapsed();
    let limits = limits::describe(settings, group.as_ref().map(|g| g.described.as_str()));
    (group.ok(), Some((limits, took)))
}

/// The worker's hello (its library loaded and its tool created), within `init_timeout` and
/// the time to start; past it, the worker is killed.
fn wait_for_hello(
    link: &Link,
    hello_rx: &mpsc::Receiver<Result<Hello, StartError>>,
    init_timeout: Duration,
) -> Result<Hello, StartError> {
    let limit = init_timeout.saturating_add(START_TIMEOUT);
    match hello_rx.recv_timeout(limit) {
        Ok(hello) => hello,
        Err(_) => {
            let why = format!(
                "it did not load its library and create its tool within {} s ([limits] init_seconds, and {} s to start)",
                crate::config::numbers::Shown(init_timeout.as_secs_f64()),
                START_TIMEOUT.as_secs()
            );
            link.kill(why.clone());
            Err(StartError::Spawn(why))
        }
    }
}

/// The command that starts a worker, with `settings`' limits set in the child (and joining
/// `group`, if it has one).
fn command(
    program: &Path,
    library: &Staged,
    source: &Path,
    extension: Option<&(String, String)>,
    settings: &IsolationSettings,
    group: Option<&WorkerGroup>,
) -> Command {
    let mut command = Command::new(program);
    command.env_clear();
    for (name, value) in std::env::vars_os() {
        if passed(&name, settings) {
            command.env(name, value);
        }
    }
    command
        .arg(super::WORKER_COMMAND)
        .arg(library.path())
        .arg(source)
        .args(extension.iter().flat_map(|(point, name)| [point, name]))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if settings.memory_mb.is_some() {
        // glibc reserves 64 MiB of address space per malloc arena: keep them few.
        command.env("MALLOC_ARENA_MAX", "2");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let settings = settings.clone();
        let inherited = library.inherited_fd();
        let join = group.map(WorkerGroup::join_fds).unwrap_or_default();
        // SAFETY: only system calls, as required between fork and exec. The worker leads a
        // process group of its own, so that whatever it forks is killed when it ends; it
        // joins its control group (writing 0 moves the writer); it keeps the library's
        // descriptor open across exec.
        unsafe {
            command.pre_exec(move || {
                libc::setpgid(0, 0);
                for fd in &join {
                    if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if let Some(fd) = inherited {
                    if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                limits::apply(&settings)
            })
        };
    }
    #[cfg(not(unix))]
    let _ = group;
    command
}
