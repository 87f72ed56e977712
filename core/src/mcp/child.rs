//! A stdio server's child process, which dies with the host: on Linux it asks the kernel for
//! `SIGKILL` when its parent dies (`PR_SET_PDEATHSIG`), so a server that ignores the end of
//! its input does not outlive a host killed with `SIGKILL`. The kernel sends that signal when
//! the *thread* that started the child ends, so every child is started from one thread that
//! lives as long as the process.
//!
//! A server is often a wrapper's child (`npx`, `uvx`, `sh -c`), which the parent-death
//! signal does not reach. So each server runs in a process group of its own, killed whole
//! when the server's connection is dropped ([`Group`]), and a keeper process forked from the
//! host at the first start ([`keeper`]) kills every group still listed when the host is gone,
//! however it ended: it learns of the end as the end of a pipe only the host writes to.

use std::future::Future;
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::runtime::Handle;

use super::stdout_check::{Broken, CheckedStdout, MAX_LINE};

/// What a start gives: the transport and the child's standard error.
type Started = std::io::Result<(ChildTransport, Option<ChildStderr>)>;

/// How long a server may take to exit once its input is closed, and again after `SIGTERM`.
const EXIT_WAIT: Duration = Duration::from_secs(3);

/// A stdio server's connection: its input (rmcp's writer), its output (read through
/// [`CheckedStdout`], a line at a time, each parsed by [`large_line::parse`](super::large_line::parse)),
/// and the child, closed as the MCP specification says (its input closed, then `SIGTERM`,
/// then `SIGKILL`) and killed if dropped.
pub(crate) struct ChildTransport {
    input: AsyncRwTransport<RoleClient, tokio::io::Empty, ChildStdin>,
    output: BufReader<CheckedStdout<ChildStdout>>,
    /// The line being read: kept between calls of `receive`, which rmcp may cancel.
    line: Vec<u8>,
    /// Set while the rest of a line over [`MAX_LINE`] is skipped.
    skipping: bool,
    child: Child,
}

impl ChildTransport {
    /// The child's process id, while it runs.
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Reads on into `line` until it ends: `Some(true)` with a whole line (its end removed),
    /// `Some(false)` when a line over [`MAX_LINE`] was skipped, `None` at the end of the
    /// output. Nothing is lost if the future is dropped between reads.
    async fn read_line(&mut self) -> Option<bool> {
        loop {
            let available = match self.output.fill_buf().await {
                Ok(available) if !available.is_empty() => available,
                Ok(_) => return None,
                Err(e) => {
                    tracing::debug!("reading an MCP server's output: {e}");
                    return None;
                }
            };
            let newline = memchr::memchr(b'\n', available);
            let take = newline.map_or(available.len(), |at| at + 1);
            let piece = &available[..newline.unwrap_or(available.len())];
            if !self.skipping && self.line.len() + piece.len() <= MAX_LINE {
                self.line.extend_from_slice(piece);
            } else {
                self.skipping = true;
                self.line = Vec::new();
            }
            self.output.consume(take);
            if newline.is_some() {
                return Some(!std::mem::replace(&mut self.skipping, false));
            }
        }
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.input.send(item)
    }

    /// The server's next message. A line that is not one (not JSON, or no message this
    /// client knows) is skipped, as rmcp skips it; [`CheckedStdout`] has said why already
    /// when it looked like a message.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if !self.read_line().await? {
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match super::large_line::parse(line) {
                Ok(message) => return Some(message),
                Err(e) => tracing::debug!("a line of an MCP server was skipped: {e}"),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Transport::<RoleClient>::close(&mut self.input).await?;
        if tokio::time::timeout(EXIT_WAIT, self.child.wait())
            .await
            .is_ok()
        {
            return Ok(());
        }
        #[cfg(unix)]
        if let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: a signal to the child this connection started and has not reaped.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
            if tokio::time::timeout(EXIT_WAIT, self.child.wait())
                .await
                .is_ok()
            {
                return Ok(());
            }
        }
        self.child.kill().await
    }
}

/// One start, run on the starting thread within the caller's runtime.
type Job = Box<dyn FnOnce() + Send>;

/// A server's process group (the id of its first process), killed with `SIGKILL` when this
/// is dropped (the server's connection closed or lost), and then forgotten by the keeper.
pub(crate) struct Group(i32);

impl Group {
    /// The group of the child `pid` (which made itself its leader), told to the keeper.
    pub(crate) fn new(pid: u32) -> Option<Self> {
        let pid = i32::try_from(pid).ok().filter(|&p| p > 0)?;
        keeper::tell(pid);
        Some(Self(pid))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        // SAFETY: kill of a process group this host started; no memory is involved.
        unsafe {
            libc::kill(-self.0, libc::SIGKILL);
        }
        keeper::tell(-self.0);
    }
}

/// Starts `cmd` (its standard streams piped) from the process-long starting thread; a line
/// of its output that cannot be read is told on `broken`.
pub(crate) async fn spawn(mut cmd: tokio::process::Command, broken: Broken) -> Started {
    dies_with_host(&mut cmd);
    let runtime = Handle::current();
    let (done, started) = tokio::sync::oneshot::channel::<Started>();
    let job: Job = Box::new(move || {
        let _entered = runtime.enter(); // the child's pipes register with the caller's runtime
        use std::process::Stdio;
        let result = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .and_then(|mut child| {
                let missing = || std::io::Error::other("the child's pipes were not made");
                let stdin = child.stdin.take().ok_or_else(missing)?;
                let stdout = child.stdout.take().ok_or_else(missing)?;
                let stderr = child.stderr.take();
                let transport = ChildTransport {
                    input: AsyncRwTransport::new(tokio::io::empty(), stdin),
                    output: BufReader::new(CheckedStdout::new(stdout, broken)),
                    line: Vec::new(),
                    skipping: false,
                    child,
                };
                Ok((transport, stderr))
            });
        let _ = done.send(result);
    });
    if starter().send(job).is_err() {
        return Err(std::io::Error::other(
            "the thread that starts MCP servers is gone",
        ));
    }
    started.await.unwrap_or_else(|_| {
        Err(std::io::Error::other(
            "the start of the MCP server was lost",
        ))
    })
}

/// The channel to the starting thread, started at first use.
fn starter() -> mpsc::Sender<Job> {
    static STARTER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    STARTER
        .get_or_init(|| {
            let (to_thread, jobs) = mpsc::channel::<Job>();
            let spawned = std::thread::Builder::new()
                .name("toolhost-mcp-start".into())
                .spawn(move || {
                    for job in jobs {
                        job();
                    }
                });
            if let Err(e) = spawned {
                tracing::error!("no thread to start MCP servers from: {e}");
            }
            to_thread
        })
        .clone()
}

/// On Linux: the child gets `SIGKILL` when the host dies (and ends at once if the host died
/// before it could ask).
#[cfg(target_os = "linux")]
fn dies_with_host(cmd: &mut tokio::process::Command) {
    let host = std::process::id();
    // SAFETY: the hook runs in the child between fork and exec, and only makes system calls
    // that are async-signal-safe (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() as u32 != host {
                libc::_exit(1); // the host is already gone
            }
            Ok(())
        });
    }
}

/// Elsewhere the child ends when its input does, or when the host drops it.
#[cfg(not(target_os = "linux"))]
fn dies_with_host(_cmd: &mut tokio::process::Command) {}

/// The keeper: a process forked from the host that holds the list of the servers' process
/// groups and kills them all when the host is gone.
#[cfg(target_os = "linux")]
mod keeper {
    use std::sync::{Mutex, OnceLock};

    /// The most groups the keeper holds at once (more servers than that are not kept).
    const MOST: usize = 1024;

    /// Tells the keeper (started now if it is not yet) of a new group (`pgid > 0`) or of a
    /// group that is gone (`-pgid`). Each message is one write of 4 bytes: atomic on a pipe.
    pub(super) fn tell(message: i32) {
        static TO_KEEPER: OnceLock<Option<Mutex<i32>>> = OnceLock::new();
        let Some(to) = TO_KEEPER.get_or_init(start) else {
            return;
        };
        let fd = crate::sync::lock(to);
        let bytes = message.to_ne_bytes();
        // SAFETY: a write of a local buffer to the pipe this module owns.
        unsafe {
            libc::write(*fd, bytes.as_ptr().cast(), bytes.len());
        }
    }

    /// Forks the keeper; the write end of its pipe, or `None` (logged) if it cannot start.
    fn start() -> Option<Mutex<i32>> {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 fills the array; fork's child runs only `keep`, which makes system
        // calls that are async-signal-safe and never returns.
        unsafe {
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                tracing::warn!(
                    "no keeper for the MCP servers' process groups: {}",
                    std::io::Error::last_os_error()
                );
                return None;
            }
            match libc::fork() {
                -1 => {
                    tracing::warn!(
                        "no keeper for the MCP servers' process groups: {}",
                        std::io::Error::last_os_error()
                    );
                    libc::close(fds[0]);
                    libc::close(fds[1]);
                    None
                }
                0 => keep(fds[0]),
                _ => {
                    libc::close(fds[0]);
                    Some(Mutex::new(fds[1]))
                }
            }
        }
    }

    /// The keeper's life: every other descriptor closed, the terminal's signals ignored; the
    /// groups read from `from` until its end (the host is gone), then each killed.
    ///
    /// # Safety
    ///
    /// Only in the child of a fork: it uses no memory but its stack and ends the process.
    unsafe fn keep(from: i32) -> ! {
        // SAFETY: system calls on descriptors and groups of this process, buffers on the
        // stack; the caller is the child of a fork.
        unsafe {
            for fd in 0..4096 {
                if fd != from {
                    libc::close(fd);
                }
            }
            for signal in [
                libc::SIGINT,
                libc::SIGHUP,
                libc::SIGTERM,
                libc::SIGQUIT,
                libc::SIGPIPE,
            ] {
                libc::signal(signal, libc::SIG_IGN);
            }
            let mut groups = [0i32; MOST];
            let mut held = 0usize;
            let mut message = [0u8; 4];
            loop {
                let read = libc::read(from, message.as_mut_ptr().cast(), message.len());
                if read < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                if read != 4 {
                    break; // the host is gone (or the pipe broke): end
                }
                let group = i32::from_ne_bytes(message);
                if group > 0 && held < MOST {
                    groups[held] = group;
                    held += 1;
                } else if group < 0 {
                    if let Some(i) = groups[..held].iter().position(|&g| g == -group) {
                        held -= 1;
                        groups[i] = groups[held];
                    }
                }
            }
            for &group in &groups[..held] {
                libc::kill(-group, libc::SIGKILL);
            }
            libc::_exit(0)
        }
    }
}

/// Elsewhere there is no keeper.
#[cfg(not(target_os = "linux"))]
mod keeper {
    pub(super) fn tell(_message: i32) {}
}
