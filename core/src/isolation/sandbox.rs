//! The sandbox a worker process confines itself to before it opens its library: what it may
//! read, write, connect to and start, as the host computes it from the tool's grants
//! ([`SandboxPolicy`]). The worker receives it in the environment variable [`SANDBOX_ENV`]
//! (JSON) and applies it ([`crate::worker`], `confine.rs`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{Capability, Port, SandboxPolicy};

/// The environment variable that carries a worker's [`Confinement`] (JSON).
pub(crate) const SANDBOX_ENV: &str = "TOOLHOST_SANDBOX";

/// The environment variable naming a worker's scratch folder, where each call gets a folder
/// of its own.
pub(crate) const SCRATCH_ENV: &str = "TOOLHOST_SCRATCH";

/// What every sandboxed worker may read and map as code: the system's programs and libraries,
/// and the few files of `/etc` that the C library, name resolution, time zones and TLS read.
/// Not `/etc` itself (`/etc/shadow`), not `/home`, `/root` or `/tmp`.
pub(crate) const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/dev/urandom",
    "/dev/random",
    "/sys/devices/system/cpu",
    "/proc/self",
];

/// Device files every sandboxed worker may read and write.
pub(crate) const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// A worker's sandbox, as it crosses to the worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Confinement {
    /// Read and execute beneath these (files or folders; missing ones are skipped).
    pub read: Vec<PathBuf>,
    /// Read, write, create and remove beneath these.
    pub write: Vec<PathBuf>,
    /// TCP ports it may connect to (`Any`: every port).
    pub connect: Vec<Port>,
    /// TCP ports it may bind.
    pub bind: Vec<Port>,
    /// UDP sockets allowed.
    pub udp: bool,
    /// `fork` and `execve` allowed.
    pub exec: bool,
    /// Run even if the kernel enforces only part of it.
    pub weaker: bool,
    /// The grants as the user wrote them, for messages.
    pub grants: String,
}

impl Confinement {
    /// The sandbox of the library `source` under `policy`, with the worker's scratch folder
    /// `scratch`; an error (one line) if a write grant would open a layer folder.
    pub(crate) fn plan(
        policy: &SandboxPolicy,
        source: &Path,
        scratch: &Path,
    ) -> Result<Self, String> {
        if let Some((grant, folder)) = policy.write_over_layers() {
            return Err(format!(
                "the grant {grant} would make the layer folder {} writable, and no layer folder is ever writable to a sandboxed tool (a tool could replace a plugin through live reload): grant a folder outside it",
                folder.display()
            ));
        }
        let mut plan = Self {
            read: SYSTEM_READ.iter().map(PathBuf::from).collect(),
            write: vec![scratch.to_owned()],
            connect: Vec::new(),
            bind: Vec::new(),
            udp: false,
            exec: false,
            weaker: policy.weaker,
            grants: policy.grants_text(),
        };
        plan.read.push(source.to_owned());
        plan.read.extend(policy.reads.iter().cloned());
        for (grant, _) in &policy.grants {
            match grant {
                Capability::Read(path) => plan.read.push(path.clone()),
                Capability::Write(path) => plan.write.push(path.clone()),
                Capability::Connect(port) => plan.connect.push(*port),
                Capability::Bind(port) => plan.bind.push(*port),
                Capability::Udp => plan.udp = true,
                Capability::Exec => plan.exec = true,
                // Given by the host, not the worker's kernel confinement: secrets through
                // the call's context, variables and limits when the worker starts.
                Capability::Secret(_)
                | Capability::Env(_)
                | Capability::Memory(_)
                | Capability::Cpu(_)
                | Capability::Tasks(_)
                | Capability::Cpus(_) => {}
            }
        }
        Ok(plan)
    }
}
