//! Plugin code runs on call threads, so the caller gets control back at a call's deadline (or
//! at an intervention) even when the plugin never awaits or blocks its thread.
//!
//! A call's future is handed to an idle call thread, which drives it with the caller's tokio
//! runtime handle (timers and host services work as on the caller's thread). The caller waits
//! for the result, the deadline or the intervention, whichever comes first. At the deadline the
//! call is *abandoned*: the caller gets a `timeout` error at once, the plugin sees
//! [`Context::cancelled`](plugin_api::Context::cancelled), and the thread stays with the call
//! until the plugin returns; it is counted meanwhile ([`overdue`]), and the tool's build stays
//! loaded because the future holds its handle.
//!
//! On a runtime built with [`run_calls_on_workers`], a call made by one of its tasks usually
//! runs as a task of the same runtime instead ([`Inline`]): spawned from a worker it is polled
//! next on that worker, with no other thread woken, and its result wakes the caller on the
//! same worker. The deadline still holds for a plugin that never awaits, because at most all
//! but one of the runtime's workers run plugin code at once: the free worker drives the timers
//! and polls the caller at its deadline. A call that would take the last free worker goes to a
//! call thread. The price is at shutdown: a call abandoned at its deadline holds its worker
//! until the plugin returns, and dropping the runtime waits for it, so such a runtime is shut
//! down with `Runtime::shutdown_background` (or `shutdown_timeout`). Other runtimes (the
//! CLI's and `serve-mcp`'s among them) always hand calls to call threads.
//!
//! Handing a call to a call thread costs a channel send and, when the thread is parked, a
//! wake-up. Both sides poll for a few microseconds first (a thread after a call, waiting for
//! the next; a caller, waiting for a quick result), so back-to-back short calls rarely park:
//! waking a parked thread on an idle core costs tens of microseconds. They spin for the first few
//! microseconds only, then yield the processor between polls: on a busy machine (or one core)
//! a caller that kept spinning would hold the very core its call thread needs. But when every
//! core is busy a yield can lose the core for a whole scheduler slice (milliseconds): a yield
//! that took longer than [`LOST_SLICE`] marks the machine busy, and for [`BUSY_FOR`] nobody
//! polls (the served calls with busy threads beside them, before and after this rule, are in
//! BENCHMARKS.md, `lifecycle`). Threads left idle for [`IDLE_EXIT`] end; new ones start when
//! none is idle.

use std::cell::RefCell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::oneshot;

use crate::sync::lock;

/// How long an idle call thread waits for work before it ends.
pub(crate) const IDLE_EXIT: Duration = Duration::from_secs(10);
/// How long a call thread polls for the next call before it parks.
const THREAD_POLL: Duration = Duration::from_micros(50);
/// How long a caller polls for a quick result before it awaits.
const CALLER_POLL: Duration = Duration::from_micros(20);
/// For how much of its polling a side spins on the processor before it yields between polls:
/// long enough to cover a short call, or the caller's work between two calls, without a
/// system call; short enough that on one busy core a spinning side delays the other by
/// no more than this.
const SPIN: Duration = Duration::from_micros(4);
/// A yield that took longer than this gave the core away for a scheduler slice: the cores
/// are busy.
const LOST_SLICE: Duration = Duration::from_micros(200);
/// How long nobody polls once a yield lost its core.
const BUSY_FOR: Duration = Duration::from_millis(100);

type Job = Box<dyn FnOnce() + Send>;

/// An idle call thread: its number and where to send it a job.
type Idle = (u64, Sender<Job>);

/// Idle call threads, by the sender that hands them a job.
static IDLE: LazyLock<Mutex<Vec<Idle>>> = LazyLock::new(Mutex::default);
/// Calls abandoned at their deadline or at an intervention whose plugin code still runs.
static OVERDUE: AtomicUsize = AtomicUsize::new(0);

/// How many abandoned calls still run in plugin code (for `list`).
pub fn overdue() -> usize {
    OVERDUE.load(Ordering::SeqCst)
}

const RUNNING: u8 = 0;
const DONE: u8 = 1;
const ABANDONED: u8 = 2;

/// Why a call ended without its result.
pub(crate) enum Ended<E> {
    /// The deadline passed.
    Deadline,
    /// The intervention future finished first, with this value.
    Interrupted(E),
}

/// Runs `fut` as a task of the caller's runtime ([`Inline`]) or on a call thread; returns its
/// output, or why the caller stopped waiting. Without a tokio runtime on the calling thread,
/// `fut` runs here, with no deadline.
pub(crate) async fn run<T, E>(
    fut: impl Future<Output = T> + Send + 'static,
    deadline: Duration,
    interrupt: impl Future<Output = E>,
) -> Result<T, Ended<E>>
where
    T: Send + 'static,
{
    let Ok(handle) = Handle::try_current() else {
        return Ok(fut.await);
    };
    let state = Arc::new(AtomicU8::new(RUNNING));
    let (tx, mut rx) = oneshot::channel();
    let worker_state = state.clone();
    let hand_over = move |out: T| match worker_state.compare_exchange(
        RUNNING,
        DONE,
        Ordering::SeqCst,
        Ordering::SeqCst,
    ) {
        Ok(_) => drop(tx.send(out)),
        Err(_) => {
            OVERDUE.fetch_sub(1, Ordering::SeqCst);
        }
    };
    if let Some(inline) = Inline::take(&handle) {
        handle.spawn(async move {
            let out = fut.await;
            drop(inline);
            hand_over(out);
        });
    } else {
        // Without a thread, the job and its sender are dropped: the wait below ends.
        let _ = dispatch(Box::new(move || {
            let out = handle.block_on(fut);
            // Idle again before the caller has the result: its next call finds this thread
            // instead of starting another one (which would then poll beside this one).
            offer_this_thread();
            hand_over(out);
        }));
        let quick = poll(CALLER_POLL, || match rx.try_recv() {
            Ok(out) => Some(Some(out)),
            Err(oneshot::error::TryRecvError::Empty) => None,
            Err(oneshot::error::TryRecvError::Closed) => Some(None),
        });
        if let Some(Some(out)) = quick {
            return Ok(out);
        }
    }
    let ended = tokio::select! {
        out = &mut rx => match out {
            Ok(out) => return Ok(out),
            // The sender was dropped without a result: the job panicked outside the
            // plugin's guard. Treated as the deadline: nothing more will come.
            Err(_) => Ended::Deadline,
        },
        () = tokio::time::sleep(deadline) => Ended::Deadline,
        e = interrupt => Ended::Interrupted(e),
    };
    match state.compare_exchange(RUNNING, ABANDONED, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => {
            OVERDUE.fetch_add(1, Ordering::SeqCst);
            Err(ended)
        }
        // The result arrived meanwhile: it wins over the deadline.
        Err(_) => match rx.await {
            Ok(out) => Ok(out),
            Err(_) => Err(ended),
        },
    }
}

/// Calls running plugin code as tasks of a runtime's workers, over all runtimes.
static INLINE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// On a thread of a runtime built with [`run_calls_on_workers`].
    static CALLS_ON_WORKERS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Lets the calls made by the tasks of the multi-threaded runtime `builder` builds run as tasks
/// of that runtime, with the same deadline for plugin code that never awaits. It sets the
/// builder's `on_thread_start`.
///
/// For a machine whose cores are busy: there a call thread waits a scheduler slice to be run,
/// and a call on the caller's own worker does not. On an idle machine it is slower than a call
/// thread, because tokio then wakes another worker, which steals the work; `serve-mcp` does
/// not use it for that reason. BENCHMARKS.md has both (`lifecycle`, served calls;
/// `mcp_server`).
///
/// Shut such a runtime down with `Runtime::shutdown_background` (or `shutdown_timeout`): a
/// call abandoned at its deadline whose plugin never returns holds one of its workers, and
/// dropping the runtime would wait for it.
pub fn run_calls_on_workers(builder: &mut tokio::runtime::Builder) -> &mut tokio::runtime::Builder {
    builder.on_thread_start(|| CALLS_ON_WORKERS.set(true))
}

/// Leave for one call to run as a task of the caller's runtime: held while its plugin code
/// runs, so that at most all but one worker run plugin code at once. Counted over all the
/// process's runtimes, which can only make it stricter for each.
struct Inline;

impl Inline {
    /// Leave when the caller runs on a thread of a runtime built with [`run_calls_on_workers`]
    /// (`handle`'s) that has a worker to spare.
    fn take(handle: &Handle) -> Option<Self> {
        if !CALLS_ON_WORKERS.get() || handle.runtime_flavor() != RuntimeFlavor::MultiThread {
            return None;
        }
        let spare = handle.metrics().num_workers().saturating_sub(1);
        INLINE
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < spare).then_some(n + 1)
            })
            .ok()
            .map(|_| Self)
    }
}

impl Drop for Inline {
    fn drop(&mut self) {
        INLINE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Calls `ready` until it returns a value or `limit` has passed: spinning for the first
/// [`SPIN`], then yielding the processor between polls.
///
/// While the machine is marked busy (a yield lost its core within the last [`BUSY_FOR`]),
/// `ready` is called once and nobody polls.
pub(crate) fn poll<T>(limit: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    if busy(start) {
        return ready();
    }
    loop {
        if let Some(v) = ready() {
            return Some(v);
        }
        let waited = start.elapsed();
        if waited >= limit {
            return None;
        }
        if waited < SPIN {
            std::hint::spin_loop();
            continue;
        }
        let yielded = Instant::now();
        std::thread::yield_now();
        if yielded.elapsed() > LOST_SLICE {
            mark_busy();
            return ready();
        }
    }
}

/// Until when (in nanoseconds since [`EPOCH`]) the machine counts as busy.
static BUSY_UNTIL: AtomicU64 = AtomicU64::new(0);
/// What [`BUSY_UNTIL`] counts from.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn busy(now: Instant) -> bool {
    let until = BUSY_UNTIL.load(Ordering::Relaxed);
    until != 0 && nanos_since_epoch(now) < until
}

fn mark_busy() {
    let until = nanos_since_epoch(Instant::now()).saturating_add(BUSY_FOR.as_nanos() as u64);
    BUSY_UNTIL.store(until, Ordering::Relaxed);
}

fn nanos_since_epoch(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(*EPOCH).as_nanos()).unwrap_or(u64::MAX)
}

/// Hands a job to an idle call thread, or to a new one.
///
/// Fails if no thread can be started for it (a worker at its tasks limit): the job is then
/// dropped, and whoever waits for it learns so from what the job held.
pub(crate) fn dispatch(job: Job) -> std::io::Result<()> {
    let idle = lock(&IDLE).pop();
    let job = match idle {
        Some((_, sender)) => match sender.send(job) {
            Ok(()) => return Ok(()),
            Err(mpsc::SendError(job)) => job,
        },
        None => job,
    };
    spawn(job)
}

fn spawn(job: Job) -> std::io::Result<()> {
    static NEXT_ID: AtomicUsize = AtomicUsize::new(1);
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed) as u64;
    let (sender, receiver) = mpsc::channel::<Job>();
    sender.send(job).expect("the receiver is here");
    let started = std::thread::Builder::new()
        .name(format!("toolhost-call-{id}"))
        .spawn(move || serve(id, &sender, &receiver));
    if let Err(e) = &started {
        tracing::error!("could not start a call thread: {e}");
    }
    started.map(drop)
}

thread_local! {
    /// On a call thread running a job: its entry for the idle list, until it is put there.
    static THIS_THREAD: RefCell<Option<Idle>> = const { RefCell::new(None) };
}

/// Puts the current call thread on the idle list, once per job: as soon as the job's own work
/// is done (before its result is handed over), or else when the job returns.
fn offer_this_thread() {
    if let Some(entry) = THIS_THREAD.with(|this| this.borrow_mut().take()) {
        lock(&IDLE).push(entry);
    }
}

/// A call thread: runs jobs, then waits (spinning, then parked) for the next one.
fn serve(id: u64, sender: &Sender<Job>, receiver: &Receiver<Job>) {
    while let Some(job) = next_job(id, receiver) {
        THIS_THREAD.with(|this| *this.borrow_mut() = Some((id, sender.clone())));
        // The plugin's own panics are caught by its glue; this catches the host's.
        let _ = catch_unwind(AssertUnwindSafe(job));
        offer_this_thread();
    }
}

/// The next job; `None` when this thread should end (idle too long, and nobody holds it).
fn next_job(id: u64, receiver: &Receiver<Job>) -> Option<Job> {
    let polled = poll(THREAD_POLL, || match receiver.try_recv() {
        Ok(job) => Some(Some(job)),
        Err(TryRecvError::Disconnected) => Some(None),
        Err(TryRecvError::Empty) => None,
    });
    if let Some(job) = polled {
        return job;
    }
    match receiver.recv_timeout(IDLE_EXIT) {
        Ok(job) => return Some(job),
        Err(RecvTimeoutError::Disconnected) => return None,
        Err(RecvTimeoutError::Timeout) => {}
    }
    let mut idle = lock(&IDLE);
    match idle.iter().position(|(i, _)| *i == id) {
        Some(at) => {
            idle.swap_remove(at);
            None
        }
        // A caller took this thread from the idle list: its job is on the way.
        None => {
            drop(idle);
            receiver.recv().ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    /// Once a yield lost its core, nobody polls: `ready` is asked once, and the window ends.
    #[test]
    fn a_busy_machine_is_not_polled() {
        mark_busy();
        let mut asked = 0;
        let got = poll(Duration::from_millis(50), || {
            asked += 1;
            None::<()>
        });
        assert!(got.is_none() && asked == 1, "asked {asked} times");
        assert!(busy(Instant::now()));
        assert!(!busy(Instant::now() + BUSY_FOR + Duration::from_millis(1)));
        BUSY_UNTIL.store(0, Ordering::Relaxed);
    }

    /// A future that holds its thread for `ms` without awaiting.
    async fn spin(ms: u64) -> u64 {
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(ms) {
            std::hint::spin_loop();
        }
        ms
    }

    /// Two calls at once on a runtime of two workers that runs calls on them: one runs as a
    /// task of a worker, the other on a call thread (the last worker is kept free); the
    /// spinning one is abandoned at its deadline wherever it runs.
    #[test]
    fn the_deadline_holds_for_a_call_that_never_awaits_whatever_runs_it() {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        let runtime = run_calls_on_workers(&mut builder)
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let took = runtime.block_on(async {
            let started = Instant::now();
            let mut calls = tokio::task::JoinSet::new();
            calls.spawn(run(
                spin(3000),
                Duration::from_millis(300),
                std::future::pending::<()>(),
            ));
            calls.spawn(run(
                spin(1),
                Duration::from_secs(10),
                std::future::pending::<()>(),
            ));
            let mut ended = Vec::new();
            while let Some(done) = calls.join_next().await {
                ended.push(done.unwrap().is_ok());
            }
            ended.sort();
            assert_eq!(ended, [false, true]);
            started.elapsed()
        });
        assert!(
            took < Duration::from_millis(2000),
            "came back after {took:?}"
        );
        // The spinning call holds a worker still: dropping the runtime would wait for it.
        runtime.shutdown_background();
    }
}
