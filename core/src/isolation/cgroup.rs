//! A sandboxed worker's control group: the kernel counts its memory, its tasks (threads and
//! processes together) and its CPU time against the limits the host set, and ends every
//! process in it at once when the worker ends, whatever session or process group a
//! descendant is in.
//!
//! The host makes one group per worker beneath its own, in the hierarchy the machine has:
//!
//! - cgroup v2 (`cgroup2` mounted, the host's group with the `memory` or `pids` controller,
//!   as a systemd unit with `Delegate=yes` has): `memory.max`, `memory.swap.max = 0`,
//!   `pids.max`, `cpu.max`, each where its controller is delegated; ended with
//!   `cgroup.kill`. If the host's group has processes of its own, it cannot hand controllers
//!   to groups beneath it ("no internal processes"): the host then moves itself into a leaf
//!   `toolhost-host` beside its workers' groups, as systemd asks of a delegated service.
//! - cgroup v1 (`memory`, `pids` and `cpu` hierarchies, writable, as for root on most
//!   machines with v1): `memory.limit_in_bytes`, `pids.max`, `cpu.cfs_quota_us`; ended by
//!   killing every process it lists until none is left (a process it forks meanwhile joins
//!   the group, so it is found next round).
//!
//! Groups that a host killed before it could remove them are removed by the next host that
//! finds the same hierarchy. With neither hierarchy (no cgroup file system, or not writable
//! by the host's user), workers run without a group: [`WorkerGroup::create`] says why, the
//! worker's memory and CPU time are still bounded by `RLIMIT_AS` and `RLIMIT_CPU` (the first
//! bounds its threads too, each having a stack), and without the `exec` grant it cannot make
//! a process at all.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use super::limits::IsolationSettings;

/// The CPU controller's period, in microseconds: a worker allowed `n` CPUs may run `n` times
/// this much in each.
const CPU_PERIOD_US: u64 = 100_000;

/// The prefix of a worker group's name, `toolhost-worker-<host pid>-<n>`.
const GROUP_PREFIX: &str = "toolhost-worker-";

/// Where the host makes its workers' groups, found once per process.
#[derive(Debug)]
enum Hierarchy {
    /// cgroup v2: the folder the workers' groups are made in, and the controllers enabled
    /// for them there.
    V2 {
        dir: PathBuf,
        controllers: Vec<String>,
    },
    /// cgroup v1: the host's folder in the memory, pids and cpu hierarchies (two of them may
    /// be one, where they are mounted together).
    V1 {
        memory: Option<PathBuf>,
        pids: Option<PathBuf>,
        cpu: Option<PathBuf>,
    },
}

/// The control group of one worker: removed (after every process in it is killed) when
/// dropped.
#[derive(Debug)]
pub(crate) struct WorkerGroup {
    /// Its folders: one in v2, one per hierarchy in v1.
    dirs: Vec<PathBuf>,
    /// The file of each that a process joins by writing `0` to it, open for writing: the
    /// worker joins between `fork` and `exec`, while it is one thread. In v1 that is `tasks`
    /// (one thread moves itself without the kernel's lock on every thread group, which
    /// waits for an RCU grace period: 5 to 12 ms a move measured with `cgroup.procs`, against
    /// a worker start of 37 ms); in v2, `cgroup.procs`.
    procs: Vec<File>,
    v2: bool,
    /// Which hierarchy and limits, in words (`cgroup v1: memory 1024 MiB, 256 tasks`).
    pub(crate) described: String,
}

impl WorkerGroup {
    /// A new group with `settings`' memory and task limits, or why none can be made (one
    /// line; the same for every worker of this process).
    pub(crate) fn create(settings: &IsolationSettings) -> Result<Self, String> {
        static HIERARCHY: OnceLock<Result<Hierarchy, String>> = OnceLock::new();
        static N: AtomicU64 = AtomicU64::new(0);
        let hierarchy = HIERARCHY.get_or_init(find).as_ref().map_err(Clone::clone)?;
        let name = format!(
            "{GROUP_PREFIX}{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let memory = settings.memory_mb.map(|mb| mb.saturating_mul(1 << 20));
        let tasks = settings.tasks;
        // The kernel's scheduling period (100 ms) and the time a worker may use in each.
        let quota = settings.cpus.map(|n| n.saturating_mul(CPU_PERIOD_US));
        let mut group = Self {
            dirs: Vec::new(),
            procs: Vec::new(),
            v2: matches!(hierarchy, Hierarchy::V2 { .. }),
            described: String::new(),
        };
        match hierarchy {
            Hierarchy::V2 { dir, controllers } => {
                let has = |c: &str| controllers.iter().any(|have| have == c);
                let dir = group.make(dir, &name)?;
                if let (Some(bytes), true) = (memory, has("memory")) {
                    write(&dir.join("memory.max"), &bytes.to_string())?;
                    // Swap would let it hold more than its limit; not every kernel has it.
                    let _ = write(&dir.join("memory.swap.max"), "0");
                }
                if let (Some(tasks), true) = (tasks, has("pids")) {
                    write(&dir.join("pids.max"), &tasks.to_string())?;
                }
                if let (Some(quota), true) = (quota, has("cpu")) {
                    write(&dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
                }
                group.described = "cgroup v2".to_owned();
            }
            Hierarchy::V1 {
                memory: memory_parent,
                pids: pids_parent,
                cpu: cpu_parent,
            } => {
                if let (Some(parent), Some(bytes)) = (memory_parent, memory) {
                    let dir = group.make(parent, &name)?;
                    write(&dir.join("memory.limit_in_bytes"), &bytes.to_string())?;
                }
                if let (Some(parent), Some(tasks)) = (pids_parent, tasks) {
                    let dir = group.make(parent, &name)?;
                    write(&dir.join("pids.max"), &tasks.to_string())?;
                }
                if let (Some(parent), Some(quota)) = (cpu_parent, quota) {
                    let dir = group.make(parent, &name)?;
                    write(&dir.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
                    write(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
                }
                group.described = "cgroup v1".to_owned();
            }
        }
        Ok(group)
    }

    /// Makes the group's folder `name` beneath `parent` and opens its `cgroup.procs`.
    fn make(&mut self, parent: &Path, name: &str) -> Result<PathBuf, String> {
        let dir = parent.join(name);
        if self.dirs.contains(&dir) {
            // Two controllers mounted together: one folder has both.
            return Ok(dir);
        }
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cannot make the control group {}: {e}", dir.display()))?;
        self.dirs.push(dir.clone());
        let join = match self.v2 {
            true => "cgroup.procs",
            false => "tasks",
        };
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join(join))
            .map_err(|e| format!("cannot open {}/{join}: {e}", dir.display()))?;
        self.procs.push(procs);
        Ok(dir)
    }

    /// The descriptors the worker writes `0` to, between `fork` and `exec`, to join.
    #[cfg(unix)]
    pub(crate) fn join_fds(&self) -> Vec<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.procs.iter().map(|f| f.as_raw_fd()).collect()
    }

    /// Kills every process in the group, until none is left.
    pub(crate) fn kill_all(&self) {
        if self.v2 {
            if let Some(dir) = self.dirs.first() {
                if write(&dir.join("cgroup.kill"), "1").is_ok() {
                    return;
                }
            }
        }
        for _ in 0..1000 {
            let mut found = false;
            for dir in &self.dirs {
                let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
                    continue;
                };
                for pid in text.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                    found = true;
                    // SAFETY: a plain system call; the process is in the worker's group, so
                    // it is one of the worker's (a pid is reused only once reaped, and
                    // a reaped process has left the group).
                    #[cfg(target_os = "linux")]
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
            if !found {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Whether the kernel's out-of-memory killer ended a process of the group at its limit.
    pub(crate) fn oom_killed(&self) -> bool {
        let count = |file: &str, key: &str| {
            self.dirs.iter().any(|dir| {
                std::fs::read_to_string(dir.join(file)).is_ok_and(|text| {
                    text.lines().any(|line| {
                        line.strip_prefix(key)
                            .and_then(|n| n.trim().parse::<u64>().ok())
                            .is_some_and(|n| n > 0)
                    })
                })
            })
        };
        match self.v2 {
            true => count("memory.events", "oom_kill "),
            false => count("memory.oom_control", "oom_kill "),
        }
    }
}

impl Drop for WorkerGroup {
    fn drop(&mut self) {
        self.kill_all();
        self.procs.clear();
        // A killed process leaves its group once the kernel has ended it: a moment.
        for dir in self.dirs.iter().rev() {
            for _ in 0..200 {
                match std::fs::remove_dir(dir) {
                    Err(e) if e.kind() == std::io::ErrorKind::ResourceBusy => {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    _ => break,
                }
            }
        }
    }
}

/// Writes `text` to the control file `path`.
fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| format!("cannot write {text} to {}: {e}", path.display()))
}

/// One line of `/proc/self/mountinfo` of a cgroup file system.
struct Mount {
    /// The folder of the file system that is mounted (`/` unless a part of it is).
    root: String,
    /// Where.
    point: PathBuf,
    /// `cgroup2`, or `cgroup` (v1).
    v2: bool,
    /// Its super options (v1: the controllers it has, `rw,memory`).
    options: Vec<String>,
}

fn mounts() -> Vec<Mount> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let fields: Vec<&str> = before.split(' ').collect();
            let mut after = after.split(' ');
            let kind = after.next()?;
            let options = after.nth(1).unwrap_or_default();
            let v2 = match kind {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            Some(Mount {
                root: unescape(fields.get(3)?),
                point: PathBuf::from(unescape(fields.get(4)?)),
                v2,
                options: options.split(',').map(str::to_owned).collect(),
            })
        })
        .collect()
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            let text = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(text, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The folder of the host's group within `mount`, from its `/proc/self/cgroup` path.
fn folder(mount: &Mount, path: &str) -> Option<PathBuf> {
    let relative = match mount.root.as_str() {
        "/" => path,
        root => path
            .strip_prefix(root)
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))?,
    };
    Some(mount.point.join(relative.trim_start_matches('/')))
}

/// Finds where to make workers' groups: v2 where it has the controllers, else v1's memory and
/// pids hierarchies where writable.
fn find() -> Result<Hierarchy, String> {
    if cfg!(not(target_os = "linux")) {
        return Err("control groups are Linux's".to_owned());
    }
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("no control groups: /proc/self/cgroup: {e}"))?;
    let mounts = mounts();
    let mut why = Vec::new();
    if let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) {
        match mounts.iter().find(|m| m.v2).and_then(|m| folder(m, path)) {
            Some(dir) => match v2(&dir) {
                Ok(controllers) => {
                    sweep(&dir);
                    return Ok(Hierarchy::V2 { dir, controllers });
                }
                Err(e) => why.push(e),
            },
            None => why.push("cgroup v2 is not mounted".to_owned()),
        }
    }
    let v1 = |controller: &str| -> Result<PathBuf, String> {
        let path = own
            .lines()
            .find_map(|line| {
                let mut parts = line.splitn(3, ':');
                let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
                list.split(',').any(|c| c == controller).then_some(path)
            })
            .ok_or_else(|| format!("no v1 {controller} controller"))?;
        let mount = mounts
            .iter()
            .find(|m| !m.v2 && m.options.iter().any(|o| o == controller))
            .ok_or_else(|| format!("the v1 {controller} controller is not mounted"))?;
        let dir = folder(mount, path)
            .ok_or_else(|| format!("the v1 {controller} hierarchy does not hold this process"))?;
        writable(&dir)?;
        Ok(dir)
    };
    match (v1("memory"), v1("pids")) {
        (Err(memory), Err(pids)) => {
            why.push(memory);
            why.push(pids);
            Err(format!("no control group can be made ({})", why.join("; ")))
        }
        (memory, pids) => {
            let (memory, pids, cpu) = (memory.ok(), pids.ok(), v1("cpu").ok());
            for dir in [&memory, &pids, &cpu].into_iter().flatten() {
                sweep(dir);
            }
            Ok(Hierarchy::V1 { memory, pids, cpu })
        }
    }
}

/// Removes the groups that hosts which are gone left in `dir` (a host killed before it could
/// remove its workers' groups), killing what is still in them.
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten().take(10_000) {
        let name = entry.file_name();
        let Some(host) = name
            .to_str()
            .and_then(|n| n.strip_prefix(GROUP_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if host == std::process::id() || Path::new(&format!("/proc/{host}")).exists() {
            continue;
        }
        let left = WorkerGroup {
            dirs: vec![entry.path()],
            procs: Vec::new(),
            v2: dir.join("cgroup.controllers").exists(),
            described: String::new(),
        };
        drop(left);
    }
}

/// Whether this process may make groups in `dir`.
#[cfg(not(target_os = "linux"))]
fn writable(_: &Path) -> Result<(), String> {
    Err("control groups are Linux's".to_owned())
}

/// Whether this process may make groups in `dir`.
#[cfg(target_os = "linux")]
fn writable(dir: &Path) -> Result<(), String> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: not a path", dir.display()))?;
    // SAFETY: a valid C string.
    match unsafe { libc::access(c.as_ptr(), libc::W_OK) } {
        0 => Ok(()),
        _ => Err(format!(
            "{} is not writable: {}",
            dir.display(),
            std::io::Error::last_os_error()
        )),
    }
}

/// Makes the cgroup v2 folder `dir` of the host ready for workers' groups beneath it: its
/// memory, pids and cpu controllers (those it has) enabled for them, moving the host into a
/// leaf of its own if its group has processes. Answers the controllers enabled.
fn v2(dir: &Path) -> Result<Vec<String>, String> {
    let controllers = std::fs::read_to_string(dir.join("cgroup.controllers"))
        .map_err(|e| format!("cgroup v2 at {}: {e}", dir.display()))?;
    let wanted: Vec<&str> = ["memory", "pids", "cpu"]
        .into_iter()
        .filter(|c| controllers.split_whitespace().any(|have| have == *c))
        .collect();
    if !wanted.iter().any(|c| *c == "memory" || *c == "pids") {
        return Err(format!(
            "cgroup v2 at {} has neither the memory nor the pids controller (not delegated to this process)",
            dir.display()
        ));
    }
    writable(dir)?;
    let enable: String = wanted.iter().map(|c| format!("+{c} ")).collect();
    let subtree = dir.join("cgroup.subtree_control");
    let enabled = wanted.iter().map(|c| c.to_string()).collect();
    if write(&subtree, enable.trim_end()).is_ok() {
        return Ok(enabled);
    }
    // "No internal processes": a group whose controllers reach its children holds no
    // process itself. Move the host into a leaf beside its workers' groups.
    let leaf = dir.join("toolhost-host");
    let _ = std::fs::create_dir(&leaf);
    write(&leaf.join("cgroup.procs"), &std::process::id().to_string())?;
    write(&subtree, enable.trim_end())?;
    Ok(enabled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_fields_are_unescaped_and_groups_found_beneath_a_mounts_root() {
        assert_eq!(unescape(r"/a\040b/c"), "/a b/c");
        assert_eq!(unescape(r"/plain\"), r"/plain\");
        let mount = Mount {
            root: "/user.slice".to_owned(),
            point: PathBuf::from("/sys/fs/cgroup"),
            v2: true,
            options: Vec::new(),
        };
        assert_eq!(
            folder(&mount, "/user.slice/run-1.service"),
            Some(PathBuf::from("/sys/fs/cgroup/run-1.service"))
        );
        assert_eq!(folder(&mount, "/system.slice/x"), None);
        assert_eq!(folder(&mount, "/user.slicex/y"), None);
    }
}
