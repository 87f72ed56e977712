//! The thread that reads one worker process (see `worker_process.rs`): its frames (answers,
//! context requests, spans), its standard error, and its end, reaped.

use std::io::{BufReader, Read};
use std::process::Child;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::cgroup::WorkerGroup;
use super::limits::{self, IsolationSettings};
use super::protocol::{read_frame, FromWorker, Hello, WorkerSpan};
use super::worker_process::{Link, Pending, StartError};
use crate::sync::lock;
use plugin_api::ToolError;

/// The longest line of a worker's standard error logged as one.
const STDERR_LINE: usize = 4096;

pub(super) type HelloSender = mpsc::Sender<Result<Hello, StartError>>;

/// How long the worker's end waits for the frames it wrote before it ended to be read (they
/// are in the pipe already; only a descendant that escaped its process group and holds the
/// pipe keeps the reader from its end).
const LAST_FRAMES: Duration = Duration::from_millis(500);

/// The worker's watch: a reader thread takes the hello and every message; this thread waits
/// for the worker process itself to end (not for its pipes to close: a forked child may hold
/// them), kills what is left of its process group, reaps it, and fails every call still
/// waiting with the reason it ended, read from its wait status and limits only.
pub(super) fn read_worker(
    mut child: Child,
    link: &Arc<Link>,
    settings: &IsolationSettings,
    hello: HelloSender,
    group: Option<&WorkerGroup>,
) {
    if let Some(err) = child.stderr.take() {
        let spawned = std::thread::Builder::new()
            .name(format!("toolhost-worker-{}-err", child.id()))
            .spawn(move || log_stderr(err));
        if let Err(e) = spawned {
            tracing::debug!("no thread to log a worker's standard error: {e}");
        }
    }
    let hello = Arc::new(Mutex::new(Some(hello)));
    let (read_tx, read_rx) = mpsc::channel::<()>();
    if let Some(out) = child.stdout.take() {
        let (reader_link, hello) = (link.clone(), hello.clone());
        let reader = std::thread::Builder::new()
            .name(format!("toolhost-worker-{}-out", child.id()))
            .spawn(move || {
                read_frames(out, &reader_link, &hello);
                drop(read_tx);
            });
        if let Err(e) = reader {
            tracing::warn!("no thread to read a worker: {e}");
            link.kill(format!("no thread to read it: {e}"));
        }
    }
    let ending = reap(&mut child, link, group);
    // Frames it wrote before it ended are read before its calls are failed.
    let _ = read_rx.recv_timeout(LAST_FRAMES);
    drop(lock(&link.input).take());
    let reason = limits::death_reason(&ending, settings, link.killed.get().map(|s| s.as_str()));
    let _ = link.death.set(reason.clone());
    send_hello(&mut lock(&hello), Err(StartError::Spawn(reason.clone())));
    let pending: Vec<Pending> = lock(&link.calls).drain().map(|(_, p)| p).collect();
    for call in pending {
        if let Some(done) = call.done {
            let _ = done.send(Err(ToolError::internal(reason.clone())));
        }
    }
    lock(&link.ready).clear();
}

/// Reads the worker's frames until its output ends.
fn read_frames(out: impl Read, link: &Arc<Link>, hello: &Mutex<Option<HelloSender>>) {
    let mut out = BufReader::with_capacity(64 << 10, out);
    let mut buf = Vec::new();
    while let Ok(Some(message)) = read_frame::<FromWorker>(&mut out, &mut buf) {
        match message {
            FromWorker::Hello(h) => send_hello(&mut lock(hello), Ok(h)),
            FromWorker::LoadFailed { kind, reason } => {
                send_hello(&mut lock(hello), Err(StartError::Load { kind, reason }))
            }
            other => handle(link, other),
        }
    }
}

/// Waits for the worker to end, kills the rest of its process group (a forked child), and
/// reaps it: its status and the CPU time it used.
#[cfg(unix)]
fn reap(child: &mut Child, link: &Link, group: Option<&WorkerGroup>) -> limits::Ending {
    let pid = child.id() as libc::pid_t;
    // SAFETY: plain system calls on our own child; `WNOWAIT` leaves it a zombie, so its
    // process id (its group's id) cannot be reused before the group is killed.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        while libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        ) == -1
            && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {}
        libc::kill(-pid, libc::SIGKILL);
        // Its control group's processes too, whatever group or session they are in.
        let oom_killed = group.is_some_and(|group| {
            group.kill_all();
            group.oom_killed()
        });
        *lock(&link.unreaped) = false;
        let mut status = 0;
        let mut usage: libc::rusage = std::mem::zeroed();
        loop {
            match libc::wait4(pid, &mut status, 0, &mut usage) {
                -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
                }
                -1 => return limits::Ending::default(),
                _ => break,
            }
        }
        let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        limits::Ending {
            status: Some(std::os::unix::process::ExitStatusExt::from_raw(status)),
            cpu: Some(time(usage.ru_utime) + time(usage.ru_stime)),
            oom_killed,
        }
    }
}

#[cfg(not(unix))]
fn reap(child: &mut Child, link: &Link, _: Option<&WorkerGroup>) -> limits::Ending {
    *lock(&link.unreaped) = false;
    limits::Ending {
        status: child.wait().ok(),
        ..Default::default()
    }
}

fn send_hello(hello: &mut Option<HelloSender>, message: Result<Hello, StartError>) {
    if let Some(tx) = hello.take() {
        let _ = tx.send(message);
    }
}

/// One message of a running worker.
fn handle(link: &Arc<Link>, message: FromWorker) {
    match message {
        FromWorker::Done {
            id,
            result,
            ready,
            span,
        } => {
            if let Some(ready) = ready {
                *lock(&link.readiness) = Some((Instant::now(), ready));
            }
            let mut pending = lock(&link.calls).remove(&id);
            lock(&link.abandoned).remove(&id);
            let trace = pending.as_mut().and_then(|p| p.trace.take());
            if let (Some((parent, name)), Some(span)) = (trace, span) {
                let error = result.as_ref().err();
                let error = error.map(|e| ToolError::from(e.clone()).kind().as_str());
                export_worker_span(link.pid, &parent, &name, &span, error);
            }
            if let Some(done) = pending.and_then(|p| p.done) {
                let _ = done.send(result.map_err(ToolError::from));
            }
            link.kill_if_doomed();
        }
        FromWorker::Ready { id, reason } => {
            if let Some(tx) = lock(&link.ready).remove(&id) {
                let _ = tx.send(reason);
            }
        }
        FromWorker::Request { id, req, request } => {
            let found = lock(&link.calls)
                .get(&id)
                .map(|p| (p.ctx.clone(), p.runtime.clone()));
            super::host_requests::answer(link, found, req, request);
        }
        FromWorker::Hello(_) | FromWorker::LoadFailed { .. } => {}
    }
}

/// Exports the span a worker timed for a call whose host span (`parent`) is recorded: only a
/// span of the parent's trace (the worker process runs plugin code, so what it sends is
/// checked), named by the host, with the worker's process id.
fn export_worker_span(
    pid: u32,
    parent: &str,
    name: &str,
    span: &WorkerSpan,
    error: Option<&'static str>,
) {
    use crate::telemetry::names::{ERROR_TYPE, WORKER_PID};
    use crate::telemetry::propagation::{self, parse_traceparent, RemoteSpan};
    let (Some((trace, ..)), Some((own_trace, ..))) = (
        parse_traceparent(parent),
        parse_traceparent(&span.traceparent),
    ) else {
        return;
    };
    if trace != own_trace || span.end_unix_nanos < span.start_unix_nanos {
        return;
    }
    let at = |nanos| std::time::UNIX_EPOCH + Duration::from_nanos(nanos);
    let mut attributes = vec![(WORKER_PID, pid.to_string())];
    if let Some(kind) = error {
        attributes.push((ERROR_TYPE, kind.to_owned()));
    }
    propagation::export(RemoteSpan {
        name,
        traceparent: &span.traceparent,
        parent,
        start: at(span.start_unix_nanos),
        end: at(span.end_unix_nanos),
        attributes: &attributes,
        error,
    });
}

/// Logs the worker's standard error line by line until it ends. It is never read to explain
/// the worker's end: the plugin writes there, and could write anything.
fn log_stderr(err: impl Read) {
    use std::io::BufRead;
    let mut err = BufReader::new(err);
    let mut line = Vec::new();
    loop {
        line.clear();
        // At most STDERR_LINE bytes of a line are kept; the rest is read and dropped.
        match (&mut err)
            .take(STDERR_LINE as u64)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                tracing::info!("worker: {}", text.trim_end());
            }
        }
    }
}
