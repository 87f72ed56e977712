//! The sandbox of isolated tools: the grammar of a capability (what a tool asks for in
//! `ToolInfo::capabilities` or a package manifest, and what the user grants in `toolhost.toml`),
//! and the grants a tool has once the configuration is resolved.
//!
//! A capability is one of:
//!
//! | text            | what it allows                                                     |
//! |-----------------|--------------------------------------------------------------------|
//! | `read:/path`    | read (and map as code) the files beneath `/path`                   |
//! | `write:/path`   | read, write, create and remove beneath `/path` (never a layer folder) |
//! | `net:443`       | TCP `connect` to port 443; `net:*` to any port                     |
//! | `bind:8080`     | TCP `bind` to port 8080; `bind:*` to any port                      |
//! | `net:udp`       | UDP sockets (the kernel cannot filter them by port)                |
//! | `exec`          | start processes and programs (`fork`, `execve`)                    |
//! | `secret:KEY`    | receive the secret `KEY` (`§§secret(KEY)` filled in)               |
//! | `env:NAME`      | see the host's environment variable `NAME`                         |
//! | `memory:MB`     | up to `MB` MiB of memory instead of the default                    |
//! | `cpu:SECONDS`   | up to `SECONDS` s of CPU time over a worker's life                 |
//! | `tasks:N`       | up to `N` threads and processes instead of the default             |
//! | `cpus:N`        | at most `N` CPUs' worth of time at once (no cap without it)        |
//!
//! A path is absolute, or starts with `~/` (the user's home folder). Any other tag in
//! `ToolInfo::capabilities` (`idempotent`, `network`) is free-form and means nothing to the
//! sandbox. The book's page on isolation (docs/src/reference/isolation.md) says how to grant.
//!
//! ```
//! use toolhost::config::Capability;
//!
//! let asked = Capability::parse("read:/data/maps").unwrap().unwrap();
//! let granted = Capability::parse("write:/data").unwrap().unwrap();
//! assert!(granted.covers(&asked));
//! assert!(Capability::parse("idempotent").unwrap().is_none()); // a free-form tag
//! assert!(Capability::parse("net:http").is_err());
//! assert!(Capability::parse("secret:API_KEY").unwrap().is_some());
//! assert!(Capability::parse("memory:2048").unwrap().unwrap()
//!     .covers(&Capability::parse("memory:1024").unwrap().unwrap()));
//! ```

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A TCP port, or every port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Port {
    /// `*`.
    Any,
    /// One port.
    Number(u16),
}

impl Port {
    fn covers(self, asked: Port) -> bool {
        self == Port::Any || self == asked
    }
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Any => f.write_str("*"),
            Self::Number(n) => n.fmt(f),
        }
    }
}

/// One thing a sandboxed tool may do (see the [module docs](self) for the text of each).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Capability {
    /// `read:/path`.
    Read(PathBuf),
    /// `write:/path` (reading included).
    Write(PathBuf),
    /// `net:PORT`, `net:*`: TCP connect.
    Connect(Port),
    /// `bind:PORT`, `bind:*`: TCP bind.
    Bind(Port),
    /// `net:udp`.
    Udp,
    /// `exec`.
    Exec,
    /// `secret:KEY`: the secret `KEY` may be filled into its arguments and through
    /// `Context::unmask_secrets`.
    Secret(String),
    /// `env:NAME`: the host's environment variable `NAME` reaches its worker.
    Env(String),
    /// `memory:MB`: its worker's memory limit, in MiB.
    Memory(u64),
    /// `cpu:SECONDS`: its worker's CPU time limit, in seconds.
    Cpu(u64),
    /// `tasks:N`: the most threads and processes its worker may have.
    Tasks(u64),
    /// `cpus:N`: how many CPUs' worth of time its worker may use at once.
    Cpus(u64),
}

/// What is wrong with a capability's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CapabilityErrorKind {
    /// `net:` or `bind:` without a port (1 to 65535) or `*`.
    Port,
    /// `secret:` or `env:` without a name of letters, digits and `_`.
    Name,
    /// `memory:`, `cpu:`, `tasks:` or `cpus:` without a whole number above 0.
    Amount,
    /// `read:` or `write:` without an absolute path free of `.` and `..`.
    Path,
}

/// A capability whose value is malformed: the message quotes it and says what is expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityError {
    /// What is wrong.
    pub kind: CapabilityErrorKind,
    /// One line: the capability as written, and what its value should be.
    pub message: String,
}

impl std::fmt::Display for CapabilityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CapabilityError {}

/// What the parser says a capability looks like.
pub const CAPABILITY_EXPECTED: &str = "read:/path, write:/path, net:PORT, net:*, net:udp, bind:PORT, bind:*, exec, secret:KEY, env:NAME, memory:MB, cpu:SECONDS, tasks:N or cpus:N";

impl Capability {
    /// Reads a capability; `Ok(None)` for a free-form tag (no `read:`, `write:`, `net:` or
    /// `bind:` prefix, and not `exec`); an error says what is wrong with a tag that has one.
    pub fn parse(text: &str) -> Result<Option<Self>, CapabilityError> {
        let text = text.trim();
        if text == "exec" {
            return Ok(Some(Self::Exec));
        }
        let Some((kind, value)) = text.split_once(':') else {
            return Ok(None);
        };
        let error = |kind, message| CapabilityError { kind, message };
        let port = |value: &str| match value {
            "*" => Ok(Port::Any),
            _ => match value.parse::<u16>() {
                Ok(n) if n > 0 => Ok(Port::Number(n)),
                _ => Err(error(
                    CapabilityErrorKind::Port,
                    format!("`{text}`: expected a port (1 to 65535) or * after `{kind}:`"),
                )),
            },
        };
        let name = |value: &str| {
            let plain = !value.is_empty()
                && value.len() <= 128
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_');
            match plain {
                true => Ok(value.to_owned()),
                false => Err(error(
                    CapabilityErrorKind::Name,
                    format!("`{text}`: expected a name of letters, digits and _ after `{kind}:`"),
                )),
            }
        };
        let amount = |value: &str| match value.parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(error(
                CapabilityErrorKind::Amount,
                format!("`{text}`: expected a whole number above 0 after `{kind}:`"),
            )),
        };
        let path = |text: &str, value: &str| {
            path(text, value).map_err(|message| error(CapabilityErrorKind::Path, message))
        };
        match kind {
            "secret" => name(value).map(|k| Some(Self::Secret(k))),
            "env" => name(value).map(|k| Some(Self::Env(k))),
            "memory" => amount(value).map(|n| Some(Self::Memory(n))),
            "cpu" => amount(value).map(|n| Some(Self::Cpu(n))),
            "tasks" => amount(value).map(|n| Some(Self::Tasks(n))),
            "cpus" => amount(value).map(|n| Some(Self::Cpus(n))),
            "read" => path(text, value).map(|p| Some(Self::Read(p))),
            "write" => path(text, value).map(|p| Some(Self::Write(p))),
            "net" if value == "udp" => Ok(Some(Self::Udp)),
            "net" => port(value).map(|p| Some(Self::Connect(p))),
            "bind" => port(value).map(|p| Some(Self::Bind(p))),
            _ => Ok(None),
        }
    }

    /// Whether granting `self` allows what `asked` asks for: a folder covers what is beneath
    /// it (`write` covers `read`), `*` covers every port.
    pub fn covers(&self, asked: &Capability) -> bool {
        match (self, asked) {
            (Self::Read(g) | Self::Write(g), Self::Read(a)) => a.starts_with(g),
            (Self::Write(g), Self::Write(a)) => a.starts_with(g),
            (Self::Connect(g), Self::Connect(a)) | (Self::Bind(g), Self::Bind(a)) => g.covers(*a),
            (Self::Udp, Self::Udp) | (Self::Exec, Self::Exec) => true,
            (Self::Secret(g), Self::Secret(a)) | (Self::Env(g), Self::Env(a)) => g == a,
            (Self::Memory(g), Self::Memory(a))
            | (Self::Cpu(g), Self::Cpu(a))
            | (Self::Tasks(g), Self::Tasks(a))
            | (Self::Cpus(g), Self::Cpus(a)) => g >= a,
            _ => false,
        }
    }
}

/// An absolute path without `.` or `..` (`~/` expanded), or why not.
fn path(text: &str, value: &str) -> Result<PathBuf, String> {
    let expanded = match value.strip_prefix("~/") {
        Some(rest) => match std::env::var_os("HOME") {
            Some(home) => Path::new(&home).join(rest),
            None => return Err(format!("`{text}`: HOME is not set, so ~ means nothing")),
        },
        None => PathBuf::from(value),
    };
    let plain = expanded
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !expanded.is_absolute() || !plain {
        return Err(format!(
            "`{text}`: expected an absolute path (or ~/...) without . or .."
        ));
    }
    Ok(expanded)
}

impl fmt::Display for Capability {
    /// As written: `read:/data`, `net:443`, `exec`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read(p) => write!(f, "read:{}", p.display()),
            Self::Write(p) => write!(f, "write:{}", p.display()),
            Self::Connect(p) => write!(f, "net:{p}"),
            Self::Bind(p) => write!(f, "bind:{p}"),
            Self::Udp => f.write_str("net:udp"),
            Self::Exec => f.write_str("exec"),
            Self::Secret(key) => write!(f, "secret:{key}"),
            Self::Env(name) => write!(f, "env:{name}"),
            Self::Memory(mb) => write!(f, "memory:{mb}"),
            Self::Cpu(seconds) => write!(f, "cpu:{seconds}"),
            Self::Tasks(n) => write!(f, "tasks:{n}"),
            Self::Cpus(n) => write!(f, "cpus:{n}"),
        }
    }
}

/// The sandbox of one isolated tool (or extension), as the configuration resolves it: what
/// the user granted it, where each grant was written, and whether a kernel that cannot enforce
/// all of it may run it anyway. The host adds what only it knows (the package folder the tool
/// reads, the layer folders no grant may open for writing) before its worker starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxPolicy {
    /// What was granted, each with where (`usr/toolhost.toml:4 [tools.fetch] grant`).
    pub grants: Vec<(Capability, String)>,
    /// `[sandbox] weaker = true`: run even where the kernel enforces only part of the sandbox.
    pub weaker: bool,
    /// Folders the tool reads besides its own library: its package or plugin folder.
    pub reads: Vec<PathBuf>,
    /// Folders no grant may make writable (the layer folders `usr/`, `plugins/`, `core/`).
    pub protected: Vec<PathBuf>,
}

impl SandboxPolicy {
    /// The capabilities of `asked` (free-form tags skipped) that no grant covers, as written;
    /// a malformed one is listed with what is wrong with it.
    pub fn missing(&self, asked: &[String]) -> Vec<String> {
        asked
            .iter()
            .filter_map(|tag| match Capability::parse(tag) {
                Ok(None) => None,
                Ok(Some(cap)) => {
                    (!self.grants.iter().any(|(g, _)| g.covers(&cap))).then(|| cap.to_string())
                }
                Err(e) => Some(e.to_string()),
            })
            .collect()
    }

    /// The grants as text, `read:/data, net:443`, or `nothing`.
    pub fn grants_text(&self) -> String {
        match self.grants.is_empty() {
            true => "nothing".to_owned(),
            false => {
                let mut text: Vec<String> =
                    self.grants.iter().map(|(g, _)| g.to_string()).collect();
                text.dedup();
                text.join(", ")
            }
        }
    }

    /// The first write grant that would make a protected folder writable (it is one of them,
    /// holds one, or is inside one), with that folder.
    pub fn write_over_layers(&self) -> Option<(&Capability, &Path)> {
        self.grants.iter().find_map(|(grant, _)| {
            let Capability::Write(path) = grant else {
                return None;
            };
            let path = canonical(path);
            self.protected
                .iter()
                .find(|p| {
                    let p = canonical(p);
                    p.starts_with(&path) || path.starts_with(&p)
                })
                .map(|p| (grant, p.as_path()))
        })
    }
}

/// `path` with its links resolved, as far as it exists (the rest kept as written).
fn canonical(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return rest.iter().rev().fold(real, |p: PathBuf, c| p.join(c));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_reads_and_prints_back() {
        for text in [
            "read:/data",
            "write:/tmp/x",
            "net:443",
            "net:*",
            "net:udp",
            "bind:8080",
            "bind:*",
            "exec",
            "secret:API_KEY",
            "env:LANG",
            "memory:2048",
            "cpu:600",
            "tasks:512",
            "cpus:2",
        ] {
            let cap = Capability::parse(text).unwrap().unwrap();
            assert_eq!(cap.to_string(), text);
        }
        for bad in [
            "net:0",
            "net:70000",
            "net:http",
            "read:data",
            "write:/a/../b",
            "read:",
            "secret:",
            "secret:A-B",
            "env:$X",
            "memory:0",
            "tasks:many",
        ] {
            assert!(Capability::parse(bad).is_err(), "{bad}");
        }
        for free in ["idempotent", "network", "filesystem", "cap:x:y"] {
            assert_eq!(Capability::parse(free).unwrap(), None, "{free}");
        }
    }

    #[test]
    fn grants_cover_what_is_beneath_them_and_no_more() {
        let grant = |t: &str| Capability::parse(t).unwrap().unwrap();
        assert!(grant("write:/data").covers(&grant("read:/data/x")));
        assert!(!grant("read:/data").covers(&grant("write:/data")));
        assert!(!grant("read:/data").covers(&grant("read:/database")));
        assert!(grant("net:*").covers(&grant("net:443")));
        assert!(!grant("net:443").covers(&grant("net:*")));
        assert!(!grant("net:443").covers(&grant("bind:443")));
        let policy = SandboxPolicy {
            grants: vec![(grant("net:443"), String::new())],
            ..SandboxPolicy::default()
        };
        let asked = [
            "idempotent".into(),
            "net:443".into(),
            "exec".into(),
            "net:x".into(),
        ];
        let missing = policy.missing(&asked);
        assert_eq!(missing[0], "exec");
        assert!(missing[1].contains("expected a port"), "{missing:?}");
    }

    #[test]
    fn no_write_grant_opens_a_layer_folder() {
        let grant = |t: &str| (Capability::parse(t).unwrap().unwrap(), String::new());
        let policy = |g: &str| SandboxPolicy {
            grants: vec![grant(g)],
            protected: vec![PathBuf::from("/srv/th/usr"), PathBuf::from("/srv/th/core")],
            ..SandboxPolicy::default()
        };
        assert!(policy("write:/srv").write_over_layers().is_some());
        assert!(policy("write:/srv/th/usr/tools")
            .write_over_layers()
            .is_some());
        assert!(policy("write:/srv/th/data").write_over_layers().is_none());
        assert!(policy("read:/srv").write_over_layers().is_none());
    }
}
