//! The settings of a [`Host`](crate::Host) that its owner gives in code (the command line's
//! flags), as opposed to the layers' `toolhost.toml`.

use std::path::PathBuf;
use std::time::Duration;

use crate::layout::{DEFAULT_MAX_LIBRARY_BYTES, DEFAULT_MAX_TEXT_BYTES};

/// Settings of a [`Host`](crate::Host).
///
/// ```
/// use std::time::Duration;
/// let options = toolhost::HostOptions::default()
///     .with_debounce(Duration::from_millis(20))
///     .with_warn_generations(100);
/// assert_eq!(options.debounce, Duration::from_millis(20));
///
/// let options = toolhost::HostOptions::default()
///     .with_max_library_bytes(64 << 20)
///     .with_max_text_bytes(64 << 10)
///     .with_settle(Duration::from_millis(500));
/// assert_eq!(options.max_text_bytes, 64 << 10);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostOptions {
    /// How long a changed file must stay quiet before the watcher reads it. Default 40 ms.
    pub debounce: Duration,
    /// A warning is logged each time this many more library generations have been loaded
    /// (libraries are never unmapped, so each keeps memory). Default 32.
    pub warn_generations: usize,
    /// The most bytes of a tool's answer that go on to the model and the history (cut at a
    /// character boundary, with a note saying how much was cut; the whole answer goes to the
    /// session's `outputs/` folder when a session is recorded). `None` (the default): the
    /// profile's `[limits] max_output` in `toolhost.toml`, else
    /// [`DEFAULT_MAX_OUTPUT`](crate::DEFAULT_MAX_OUTPUT) (64 KiB); a value set here wins over
    /// the config.
    pub max_output: Option<usize>,
    /// The largest library file the host reads, in bytes; a larger one is skipped
    /// ([`LoadErrorKind::TooLarge`](crate::LoadErrorKind::TooLarge)) without being read.
    /// Default 256 MiB.
    pub max_library_bytes: u64,
    /// The largest text file the host reads from the layers (a prompt fragment, the secrets
    /// file), in bytes; a larger one is skipped with a warning. Default 1 MiB.
    pub max_text_bytes: u64,
    /// With a [`Watcher`](crate::Watcher), a library that fails to load while its last
    /// modification is younger than this is not reported yet: it may still be being written in
    /// chunks. The watcher looks at it again once it has been quiet this long, and reports it
    /// then, once. A library that loads is reported at once; a lookup (a call, `list`) always
    /// gets the reason. Default 1 s.
    pub settle: Duration,
    /// With `pinning = true` in `usr/toolhost.toml`, load a library that is not pinned (or
    /// whose bytes changed) anyway, with a warning, instead of refusing it (see
    /// [`crate::load::pins`]). Default `false`.
    pub allow_unpinned: bool,
    /// Runs every tool in a worker process, whatever `isolate` in `toolhost.toml` says (the
    /// command line's `--isolate`). Default `false`.
    pub isolate_all: bool,
    /// The program that runs worker processes (`toolhost __worker`). `None` (the default):
    /// `TOOLHOST_WORKER` if set, else this program if it is `toolhost`, else a `toolhost`
    /// binary beside it or one folder up.
    pub worker_program: Option<PathBuf>,
    /// Load every library from a file copy in a private folder, never from an in-memory file
    /// (Linux's `memfd_create`; other systems always copy). Default `false`, or `true` when
    /// `TOOLHOST_LOAD_COPY=1` is set.
    pub file_copies: bool,
    /// How long a library's constructor and metadata read may take (in this process or in a
    /// worker) before the library is skipped as failing to start. `None` (the default):
    /// `[limits] init_seconds` of `usr/toolhost.toml` when the host starts, else
    /// [`DEFAULT_INIT_TIMEOUT`](crate::config::DEFAULT_INIT_TIMEOUT) (10 s).
    pub init_timeout: Option<Duration>,
    /// Whether a call whose audit record cannot be written is refused when `[audit] required`
    /// in `toolhost.toml` does not say. Default `false`; `serve-mcp` sets it.
    pub audit_required: bool,
    /// Secrets taken from the environment variables of these names, over those of
    /// `usr/secrets.env` (at start and at each reload of the file): `serve-mcp --secret-env`,
    /// for an MCP client that passes a secret in the server's environment. A variable that is
    /// unset or empty adds nothing. Default none.
    pub secrets_from_env: Vec<String>,
    /// Whether the profiles' MCP servers (`usr/mcp.json`) are used: started when a profile's
    /// tools are first asked for, their tools offered and called. Default `true`; `serve-mcp`
    /// turns it off, since it offers library tools only.
    pub mcp_client: bool,
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(40),
            warn_generations: 32,
            max_output: None,
            max_library_bytes: DEFAULT_MAX_LIBRARY_BYTES,
            max_text_bytes: DEFAULT_MAX_TEXT_BYTES,
            settle: Duration::from_secs(1),
            allow_unpinned: false,
            isolate_all: false,
            worker_program: None,
            file_copies: std::env::var_os("TOOLHOST_LOAD_COPY").is_some_and(|v| v == "1"),
            init_timeout: None,
            audit_required: false,
            secrets_from_env: Vec::new(),
            mcp_client: true,
        }
    }
}

impl HostOptions {
    /// Sets [`secrets_from_env`](Self::secrets_from_env).
    pub fn with_secrets_from_env(mut self, names: Vec<String>) -> Self {
        self.secrets_from_env = names;
        self
    }

    /// Sets [`init_timeout`](Self::init_timeout).
    pub fn with_init_timeout(mut self, limit: Duration) -> Self {
        self.init_timeout = Some(limit);
        self
    }

    /// Sets [`audit_required`](Self::audit_required).
    pub fn with_audit_required(mut self, required: bool) -> Self {
        self.audit_required = required;
        self
    }

    /// Sets [`mcp_client`](Self::mcp_client).
    pub fn with_mcp_client(mut self, used: bool) -> Self {
        self.mcp_client = used;
        self
    }

    /// Sets [`allow_unpinned`](Self::allow_unpinned).
    pub fn with_allow_unpinned(mut self, allow: bool) -> Self {
        self.allow_unpinned = allow;
        self
    }

    /// Sets [`debounce`](Self::debounce).
    pub fn with_debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce;
        self
    }

    /// Sets [`warn_generations`](Self::warn_generations).
    pub fn with_warn_generations(mut self, every: usize) -> Self {
        self.warn_generations = every;
        self
    }

    /// Sets [`max_output`](Self::max_output), over what the config says.
    pub fn with_max_output(mut self, bytes: usize) -> Self {
        self.max_output = Some(bytes);
        self
    }

    /// Sets [`max_library_bytes`](Self::max_library_bytes).
    pub fn with_max_library_bytes(mut self, bytes: u64) -> Self {
        self.max_library_bytes = bytes;
        self
    }

    /// Sets [`max_text_bytes`](Self::max_text_bytes).
    pub fn with_max_text_bytes(mut self, bytes: u64) -> Self {
        self.max_text_bytes = bytes;
        self
    }

    /// Sets [`file_copies`](Self::file_copies).
    pub fn with_file_copies(mut self, copies: bool) -> Self {
        self.file_copies = copies;
        self
    }

    /// Sets [`isolate_all`](Self::isolate_all).
    pub fn with_isolate_all(mut self, isolate: bool) -> Self {
        self.isolate_all = isolate;
        self
    }

    /// Sets [`settle`](Self::settle).
    pub fn with_settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
        self
    }
}
