//! `toolhost`: list, call and describe the tools a profile sees, run scripted sessions, chat
//! with a real model, and watch plugin folders while developing. One file per command.

mod add;
mod approve;
mod args_error;
mod audit;
mod call;
mod chat;
mod dev;
mod exit;
mod inspect;
mod installed;
mod keygen;
mod list;
mod masked_log;
#[cfg(feature = "mcp")]
mod mcp;
#[cfg(not(feature = "mcp"))]
#[path = "without_mcp.rs"]
mod mcp;
mod new;
mod otel;
mod pack;
mod pin;
mod plugin_exit;
mod reloads;
mod remove;
mod run;
mod sampling;
#[cfg(feature = "mcp")]
mod serve_mcp;
mod signals;
mod trust;
mod watch;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use args_error::usage_error;
use clap::{CommandFactory, Parser, Subcommand};
use toolhost::{Host, HostOptions, LoopOptions};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::Layer as _;

/// The longest `--debounce-ms`: the longest duration the host takes from outside.
const MAX_DEBOUNCE_MS: u64 = toolhost::config::numbers::MAX_SECONDS * 1000;

/// Native plugin host for AI-agent tools.
#[derive(Parser)]
#[command(name = "toolhost", version, about, after_long_help = exit::HELP)]
struct Cli {
    /// The root folder holding core/, plugins/ and usr/.
    #[arg(long, global = true, env = "TOOLHOST_ROOT", default_value = ".")]
    root: PathBuf,
    /// The most bytes of a tool's answer that go on to the model and the history; the rest is
    /// cut with a note (and kept whole in the session folder of `run`). Default: `[limits]
    /// max_output` in toolhost.toml, else 65536.
    #[arg(long, global = true, value_name = "BYTES")]
    max_output: Option<usize>,
    /// Show debug logging (including abi_stable's full load-error reports).
    #[arg(short, long, global = true)]
    verbose: bool,
    /// Approve the calls of `write` tools that the policy asks about, without asking (never
    /// `exec` tools); `add` and `update`: install without asking; an MCP server's form whose
    /// required fields all have defaults: sent with them.
    #[arg(long, global = true)]
    yes: bool,
    /// With `pinning = true` in usr/toolhost.toml, load libraries that are not pinned in
    /// usr/plugins.lock (or whose bytes changed) anyway, with a warning: for development.
    #[arg(long, global = true)]
    allow_unpinned: bool,
    /// Run every tool in a worker process of its own (as `isolate = ["*"]` in toolhost.toml):
    /// a crash of plugin code fails its call, not the host. See docs/src/reference/isolation.md.
    #[arg(long, global = true)]
    isolate: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every tool a profile sees, with the layer and file that wins and what it shadows.
    List {
        /// The agent profile.
        #[arg(long, short, default_value = "default")]
        profile: String,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
        /// Load every library, as a call would, instead of trusting the metadata cache
        /// (usr/.cache/metadata.json) for libraries whose bytes it knows.
        #[arg(long)]
        load: bool,
    },
    /// Call one tool through the full lifecycle and print its response. The exit code says how
    /// the call ended (the list is at the end of `toolhost --help`).
    Call {
        /// `name` or `name:method`.
        name: String,
        /// The arguments, a JSON object.
        #[arg(long, short, default_value = "{}")]
        args: String,
        /// The agent profile.
        #[arg(long, short, default_value = "default")]
        profile: String,
        /// The agent's name.
        #[arg(long, default_value = "A0")]
        agent: String,
        /// Print the response as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Development mode: watch the plugin folders, print each reload, and call tools typed on
    /// standard input (`name[:method] [JSON arguments]` per line; `/list`, `/quit`). SIGTERM or
    /// SIGINT ends it once the call running has (within --grace-seconds).
    Watch {
        #[command(flatten)]
        watching: WatchArgs,
        /// On SIGTERM or SIGINT: how long the call running may take to finish before it is
        /// cancelled (a second signal ends at once).
        #[arg(long, value_name = "SECONDS", default_value_t = toolhost::DEFAULT_GRACE.as_secs_f64(), value_parser = seconds)]
        grace_seconds: f64,
    },
    /// The author loop: build the plugin crates (those `toolhost new` made in the profile's
    /// layers, and any named here) with cargo, rebuild a crate when one of its sources is
    /// saved (its errors shown; the last good build keeps serving), load the new library at
    /// once, and call tools typed on standard input as `watch` does.
    Dev {
        /// More plugin crates to build and watch: their folders (each with a Cargo.toml).
        #[arg(value_name = "CRATE")]
        crates: Vec<PathBuf>,
        #[command(flatten)]
        watching: WatchArgs,
    },
    /// Run a scripted conversation end to end with a live log: the model's replies come from
    /// SCRIPT (`=== user` / `=== model` blocks). Type a line to interject; Ctrl-C stops cleanly.
    /// The session is saved under usr/sessions/.
    Run {
        /// The script file.
        script: PathBuf,
        /// The agent profile.
        #[arg(long, short, default_value = "default")]
        profile: String,
        #[command(flatten)]
        session: SessionArgs,
    },
    /// The audit log (usr/audit/audit.jsonl): check its hash chain, or show its last records.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// An interactive session with a real model from models.toml: its text streams, tools
    /// run with live progress, a line typed meanwhile interjects, Ctrl-C stops the turn (twice
    /// quits), /quit ends; SIGTERM ends the session once the turn has (within --grace-seconds). With standard input not a terminal: one user message per line, each
    /// final answer on standard output. The session is saved under usr/sessions/.
    Chat {
        /// The agent profile.
        #[arg(long, short, default_value = "default")]
        profile: String,
        /// The model: a [models.NAME] table of models.toml (default: its `default`, or the
        /// only one).
        #[arg(long, short)]
        model: Option<String>,
        /// On SIGTERM (and on SIGINT when standard input is not a terminal): how long the turn
        /// running may take to finish before it is stopped; the session is then saved (a second
        /// signal ends at once).
        #[arg(long, value_name = "SECONDS", default_value_t = toolhost::DEFAULT_GRACE.as_secs_f64(), value_parser = seconds)]
        grace_seconds: f64,
        #[command(flatten)]
        session: SessionArgs,
    },
    /// Start a plugin: a crate in usr/tools/NAME/ (or usr/extensions/POINT/NAME/, or a
    /// profile's folder) whose debug build is linked into the layer, so `cargo build` in the
    /// crate is the development loop; outside a root (no usr/, core/ or plugins/), the
    /// standalone crate ./NAME/. It has typed arguments, progress, a repairable error and unit
    /// tests, and depends on the plugin-api this toolhost speaks (a copy it carries, unpacked
    /// into the user's data folder): no checkout of toolhost is needed.
    New {
        /// The tool's (or extension's) name: lower-case letters, digits and '_'.
        name: String,
        /// Make an extension run at this point (e.g. `tool_execute_after`).
        #[arg(long, value_name = "POINT")]
        extension: Option<String>,
        /// Put it in this profile's folder (usr/agents/P/), overriding the tool for P only.
        #[arg(long, short)]
        profile: Option<String>,
    },
    /// What a library file is: its plugin-abi version, kind (tool or extension), metadata
    /// (description, schema and whether it compiles, risk, timeout, retries, capabilities),
    /// size and SHA-256; or the one-line reason discovery would skip it. Runs no plugin code
    /// but its metadata.
    Inspect {
        /// The library file (`.so`, `.dylib`, `.dll`).
        file: PathBuf,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Write usr/plugins.lock with the SHA-256 of every library in the layers (tools and
    /// extensions of every profile). With `pinning = true` in usr/toolhost.toml, a library
    /// missing from the lock, or whose bytes changed, is then refused.
    Pin {
        /// Compare the layers with the lock instead of writing it: list what is not pinned,
        /// changed or gone, and exit 1 if anything is.
        #[arg(long)]
        check: bool,
    },
    /// Serve the profile's tools to MCP clients: over standard input and output (JSON-RPC
    /// only; logs go to standard error), or over streamable HTTP with --http. Tools reload
    /// live, and clients are told (`tools/list_changed`). A call whose audit record cannot be
    /// written is refused unless `[audit] required = false`. SIGTERM or SIGINT stops it
    /// gracefully (HTTP: /ready answers 503, then the drain and the grace period); a second
    /// signal ends it at once.
    #[cfg(feature = "mcp")]
    ServeMcp {
        /// The agent profile whose tools are served.
        #[arg(long, short, default_value = "default")]
        profile: String,
        /// Serve streamable HTTP at ADDR (`/mcp`) instead of stdio: `127.0.0.1:8080`; another
        /// machine may connect only with an explicit address such as `0.0.0.0:8080`.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// HTTP: require `Authorization: Bearer <value of secret NAME>` (from usr/secrets.env).
        #[arg(long, value_name = "NAME", requires = "http")]
        token_secret: Option<String>,
        /// HTTP: also accept requests from this browser origin (`https://app.example.com:443`,
        /// `:*` for any port); this machine's origins are always accepted. Repeatable.
        #[arg(long, value_name = "ORIGIN", requires = "http")]
        allow_origin: Vec<String>,
        /// The largest message a client may send, in bytes: an HTTP request body (413 beyond),
        /// or a line on standard input (refused as an invalid request).
        #[arg(long, value_name = "BYTES", default_value_t = toolhost_mcp_server::DEFAULT_MAX_BODY_BYTES)]
        max_body_bytes: usize,
        /// HTTP without --token-secret: serve `write` and `exec` tools too. Without it such a
        /// listener serves only `read` tools, since any process of this machine (or, on a
        /// public address, any machine) can call it.
        #[arg(long, requires = "http")]
        allow_writes_without_token: bool,
        /// HTTP: keep a session per client (protocol versions before 2026-07-28), for
        /// list_changed, approvals and cancellation outside a request's own stream. Without it
        /// every request stands alone (instances can share a load balancer).
        #[arg(long, requires = "http")]
        sessions: bool,
        /// The most tasks held at a time (running, or finished and kept for their result): a
        /// 2026-07-28 client that declares the Tasks extension gets a task for a call of a
        /// tool whose deadline is 60 s or more; past this many, calls run plainly. 0: none.
        #[arg(long, value_name = "N", default_value_t = toolhost_mcp_server::DEFAULT_MAX_TASKS)]
        max_tasks: usize,
        /// Do not watch the plugin folders.
        #[arg(long)]
        no_watch: bool,
        /// On SIGTERM or SIGINT: how long calls in flight and tasks running may take to finish
        /// before they are cancelled (counted from the signal; a second signal ends at once).
        #[arg(long, value_name = "SECONDS", default_value_t = toolhost::DEFAULT_GRACE.as_secs_f64(), value_parser = seconds)]
        grace_seconds: f64,
        /// HTTP, on SIGTERM or SIGINT: how long connections are still accepted (each closed
        /// after its answer) while /ready answers 503, so that a balancer takes the instance
        /// out before it stops listening. At least the balancer's time to see a failed check.
        #[arg(long, value_name = "SECONDS", default_value_t = toolhost_mcp_server::DEFAULT_DRAIN.as_secs_f64(), value_parser = seconds, requires = "http")]
        drain_seconds: f64,
        /// Before serving, check each installed package against what it carries: its
        /// manifest's signature (by the key usr/packages.lock names, a trusted one) and every
        /// file's SHA-256; refuse to start otherwise. An MCP Bundle's server starts with it.
        #[arg(long)]
        verify_packages: bool,
        /// Also take the secret NAME from the environment variable NAME, over usr/secrets.env
        /// (an MCP client's configuration sets it: an .mcpb's user_config). Repeatable.
        #[arg(long, value_name = "NAME")]
        secret_env: Vec<String>,
    },
    /// The profile's MCP servers (usr/mcp.json, usr/agents/<P>/mcp.json): each one's state
    /// (starting, ready with N tools, failed with the reason), its tools and its last error.
    #[cfg(feature = "mcp")]
    Mcp {
        /// The agent profile.
        #[arg(long, short, default_value = "default")]
        profile: String,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
        #[command(subcommand)]
        action: Option<McpAction>,
    },
    /// The system prompt for a profile: its prompt fragments, the tools section and its skills (each `skills/<name>/SKILL.md` of its layers).
    Prompt {
        /// The agent profile.
        #[arg(long, short, default_value = "default")]
        profile: String,
    },
    /// Make a minisign key pair for signing packages: DIR/NAME.pub and DIR/NAME.key (the
    /// secret key encrypted with a password, as minisign does, unless --no-password).
    Keygen {
        /// The folder to write the keys into. Default: toolhost/keys/ in the user's
        /// configuration folder (~/.config on Linux), outside any repository.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// The keys' file name.
        #[arg(long, default_value = "toolhost")]
        name: String,
        /// Leave the secret key unencrypted (for CI signing keys kept in a secret store).
        #[arg(long)]
        no_password: bool,
    },
    /// Pack a plugin folder (with toolhost-plugin.toml) into DIR/NAME-VERSION.tar.gz: its
    /// crates built with cargo for this host, its manifest with every file's SHA-256; --sign
    /// writes the minisign signature beside it (ARCHIVE.minisig).
    Pack {
        /// The plugin folder.
        #[arg(default_value = ".")]
        path: PathBuf,
        /// The folder to write the archive into.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Sign the archive with this minisign secret key (its password from
        /// TOOLHOST_KEY_PASSWORD or the terminal).
        #[arg(long, value_name = "KEYFILE")]
        sign: Option<PathBuf>,
        /// The cargo profile the crates are built with.
        #[arg(long, default_value = "release")]
        cargo_profile: String,
        /// Also write DIR/NAME-VERSION.mcpb, an MCP Bundle that MCP clients install: this
        /// toolhost binary serving the package's tools (`serve-mcp`).
        #[arg(long)]
        mcpb: bool,
        /// Build the libraries for this target triple (one the installed toolchain can build:
        /// `rustup target list --installed`) instead of only this host's. Repeatable; name
        /// this host's triple too to keep its libraries.
        #[arg(long, value_name = "TRIPLE")]
        target: Vec<String>,
    },
    /// The public keys whose signatures `add` accepts (usr/trusted-keys/).
    Trust {
        #[command(subcommand)]
        command: TrustCommand,
    },
    /// Install a package: SOURCE is an archive (its .minisig beside it), an unpacked package
    /// folder, or an http(s) URL; or a plugin folder built here (--path, --git). Verified first
    /// (signature, hashes, compat, target triple), shown, asked (or --yes), installed into
    /// usr/plugins/NAME/ in one rename and recorded in usr/packages.lock. A running host loads
    /// it live.
    Add {
        /// The package.
        #[arg(required_unless_present_any = ["path", "git"], conflicts_with_all = ["path", "git"])]
        source: Option<String>,
        /// Build the plugin folder DIR (with toolhost-plugin.toml) here and install it.
        #[arg(long, value_name = "DIR", conflicts_with = "git")]
        path: Option<PathBuf>,
        /// Clone the repository URL (a plugin folder at its top) and build it here.
        #[arg(long, value_name = "URL")]
        git: Option<String>,
        /// With --git: the commit, tag or branch to build.
        #[arg(long, value_name = "REV", requires = "git")]
        rev: Option<String>,
        /// With --path or --git: the cargo profile the crates are built with.
        #[arg(long, default_value = "release")]
        cargo_profile: String,
        /// Install only what usr/packages.lock records for this package (same version, same
        /// bytes).
        #[arg(long)]
        locked: bool,
        /// For an https:// SOURCE: also trust the certificate authorities in this PEM file
        /// (a private CA), besides the system's.
        #[arg(long, value_name = "FILE")]
        ca: Option<PathBuf>,
        /// Install a version older than, or the same as, the installed one (the refusal
        /// names both).
        #[arg(long)]
        allow_downgrade: bool,
        /// Accept a signer other than the key the installed version was signed by (pinned
        /// at its first install).
        #[arg(long)]
        new_signer: bool,
    },
    /// Install the newer version of installed packages (all, or NAME) from the sources they
    /// came from, with the same checks; the old version serves until the new one is in place.
    Update {
        /// The package (default: every installed one).
        name: Option<String>,
        /// For packages from https:// URLs: also trust the certificate authorities in this
        /// PEM file (a private CA), besides the system's.
        #[arg(long, value_name = "FILE")]
        ca: Option<PathBuf>,
        /// Install a version older than, or the same as, the installed one (the refusal
        /// names both).
        #[arg(long)]
        allow_downgrade: bool,
        /// Accept a signer other than the key the installed version was signed by (pinned
        /// at its first install).
        #[arg(long)]
        new_signer: bool,
    },
    /// Remove an installed package from usr/plugins/ and usr/packages.lock.
    Remove {
        /// The package.
        name: String,
    },
    /// The installed packages: name, version, source, signer and the libraries each provides.
    Installed {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Print a completion script for SHELL to standard output, generated from this command's
    /// own definition (bash: `toolhost completions bash > /etc/bash_completion.d/toolhost`).
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the man page of `toolhost` (roff) to standard output, or with --out write one page
    /// per command (toolhost.1, toolhost-list.1, ...) into a folder.
    Man {
        /// Write toolhost.1 and a page per command into this folder instead.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

/// The longest grace or drain period accepted: a day.
const MAX_SECONDS: f64 = 86_400.0;

/// A number of seconds (`30`, `0.5`), 0 to a day.
fn seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if (0.0..=MAX_SECONDS).contains(&s) => Ok(s),
        _ => Err(format!(
            "{text:?} is not a number of seconds from 0 to {MAX_SECONDS}"
        )),
    }
}

/// The arguments `watch` and `dev` share: whose tools are called, and how quiet a changed file
/// must be.
#[derive(clap::Args)]
struct WatchArgs {
    /// The agent profile.
    #[arg(long, short, default_value = "default")]
    profile: String,
    /// The agent's name.
    #[arg(long, default_value = "A0")]
    agent: String,
    /// How long a changed file must stay quiet before it is read (or, for `dev`, built), in
    /// milliseconds.
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(..=MAX_DEBOUNCE_MS))]
    debounce_ms: u64,
}

impl WatchArgs {
    /// The debounce as a duration.
    fn debounce(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.debounce_ms)
    }
}

/// The arguments `run` and `chat` share: the agent's name, when its loop gives up, and where
/// its secrets come from.
#[derive(clap::Args)]
struct SessionArgs {
    /// The agent's name.
    #[arg(long, default_value = "A0")]
    agent: String,
    /// Iterations per user message before the loop gives up.
    #[arg(long, default_value_t = 25)]
    max_iterations: usize,
    /// Unusable replies in a row before the loop gives up.
    #[arg(long, default_value_t = 3)]
    max_unusable: usize,
    /// Failed tool calls in a row before the loop gives up (each failure goes back to the
    /// model).
    #[arg(long, default_value_t = 5)]
    max_failed_calls: usize,
    /// Read the secrets from this file instead of usr/secrets.env.
    #[arg(long)]
    secrets: Option<PathBuf>,
}

impl SessionArgs {
    /// The message loop's limits.
    fn loop_options(&self) -> LoopOptions {
        LoopOptions::default()
            .with_max_iterations(self.max_iterations)
            .with_max_unusable(self.max_unusable)
            .with_max_failed_calls(self.max_failed_calls)
    }
}

#[cfg(feature = "mcp")]
#[derive(Subcommand)]
enum McpAction {
    /// The tools of SERVER held back: those whose definition (description, schemas,
    /// annotations) changed since it was first seen or last approved, and those it added
    /// since (usr/mcp-tools/SERVER.lock), each change shown with the digest to approve them
    /// by; exit 1 if any.
    Diff {
        /// The server's name in mcp.json.
        server: String,
    },
    /// Approve the held-back tool definitions of SERVER that `toolhost mcp diff SERVER`
    /// showed: recorded in usr/mcp-tools/SERVER.lock, its tools are offered again. Nothing is
    /// approved if the server's definitions are not those the digest names.
    Approve {
        /// The server's name in mcp.json.
        server: String,
        /// The digest `toolhost mcp diff SERVER` printed for the changes it showed.
        #[arg(long)]
        digest: String,
    },
    /// Sign in to SERVER (an HTTP server that asks for OAuth): the URL is opened in a browser
    /// and printed, a listener on 127.0.0.1 takes the redirect, and the tokens are kept in
    /// usr/mcp-tokens/SERVER.json (mode 0600, never printed). With "grant":
    /// "client_credentials" in its "oauth" settings no browser is involved.
    Login {
        /// The server's name in mcp.json.
        server: String,
        /// Print the URL only; do not open a browser.
        #[arg(long, conflicts_with = "fetch")]
        no_browser: bool,
        /// Fetch the URL with a plain GET that follows the redirects (headless use and tests,
        /// for an authorization server that approves without a person; the environment
        /// variable TOOLHOST_MCP_LOGIN_FETCH=1 does the same for every command).
        #[arg(long)]
        fetch: bool,
    },
    /// Merge the servers of a Cursor or Claude (`mcpServers`), VS Code (`servers`, with its
    /// `inputs`) or Zed (`context_servers`) file into usr/mcp.json; a name already there
    /// refuses the import.
    Import {
        /// The file (`.cursor/mcp.json`, `.vscode/mcp.json`, Zed's settings.json, ...).
        file: PathBuf,
    },
}

#[derive(Subcommand)]
enum TrustCommand {
    /// Trust a minisign public key file (NAME.pub): copied to usr/trusted-keys/ID.pub.
    Add {
        /// The public key file.
        key: PathBuf,
    },
    /// The trusted keys.
    List,
    /// Stop trusting a key (its id, as `trust list` shows it, or its .pub file): packages it
    /// signed no longer load until signed by a trusted key and added again, or removed.
    Remove {
        /// The key id or public key file.
        key: String,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Check every record's hash and link, every segment, every value stored apart and the
    /// chain's end against usr/audit/head.json: exit 0 if the chain is intact (printing its
    /// head, to keep elsewhere), 1 naming the first broken record. Also lists damaged tails
    /// kept aside and calls that started and never finished.
    Verify {
        /// A copy of the head kept elsewhere (`SEQ:HASH`, as printed): the log must reach it,
        /// with that record unchanged.
        #[arg(long, value_name = "SEQ:HASH")]
        head: Option<String>,
        /// Check the MACs with the key in this environment variable (default: `[audit]
        /// key_env` of the profile's toolhost.toml, if set).
        #[arg(long, value_name = "NAME")]
        key_env: Option<String>,
        /// The profile whose toolhost.toml names the key.
        #[arg(long, short, default_value = "default")]
        profile: String,
    },
    /// The last records, one line each: time, seq, type, tool, outcome, duration, decision.
    Tail {
        /// How many records.
        #[arg(short, default_value_t = 20)]
        n: usize,
    },
}

fn main() -> ExitCode {
    // A worker process of an isolated plugin (`toolhost __worker LIBRARY SOURCE [POINT
    // NAME]`): started by the host, never by hand, so it skips argument parsing and logging.
    let args: Vec<std::ffi::OsString> = std::env::args_os().take(6).collect();
    if args.len() >= 4 && args[1] == toolhost::isolation::WORKER_COMMAND {
        let text = |i: usize| args.get(i).and_then(|a| a.to_str()).unwrap_or_default();
        let extension = (args.len() == 6).then(|| (text(4), text(5)));
        toolhost::worker::serve_worker(Path::new(&args[2]), Path::new(&args[3]), extension);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            #[cfg(not(feature = "mcp"))]
            if let Some(why) = mcp::left_out(&e) {
                eprintln!("error: {why}");
                return ExitCode::from(exit::USAGE);
            }
            return usage_error(&e);
        }
    };
    // `list` reports skipped files in its own table; elsewhere each one is a warning line.
    let quiet = matches!(cli.command, Command::List { .. });
    let level = match (cli.verbose, quiet) {
        (true, _) => "debug",
        (false, true) => "error",
        (false, false) => "warn",
    };
    let log = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(masked_log::MaskedStderr)
        .without_time()
        .with_target(false)
        .with_filter(tracing_subscriber::EnvFilter::new(level));
    // Kept to the end of `main`: the last spans are sent when it is dropped.
    // `[telemetry]` of usr/toolhost.toml; a broken file is reported by the command itself.
    let telemetry = toolhost::config::Config::load_host(
        &toolhost::Layout::new(&cli.root),
        toolhost::DEFAULT_MAX_TEXT_BYTES,
    )
    .map(|config| config.telemetry())
    .unwrap_or_default();
    let _export = otel::from_env(&telemetry);
    let _metrics_export = otel::metrics::from_env(&telemetry);
    tracing_subscriber::registry().with(log).init();
    quiet_on_closed_pipe();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli)));
    match result {
        Ok(Ok(code)) => code,
        // The same through the host's private standard output (`call`, `run`).
        Ok(Err(e))
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            let line = format!("{e:#}").replace('\n', " ");
            eprintln!("error: {}", toolhost::mask_log_line(&line));
            match e.downcast_ref::<exit::Usage>() {
                Some(_) => ExitCode::from(exit::USAGE),
                None => ExitCode::FAILURE,
            }
        }
        // The reader of standard output went away (`toolhost list | head -1`): stop quietly,
        // as ripgrep does, after every destructor ran (child processes are ended).
        Err(payload) if closed_pipe(payload.as_ref()) => ExitCode::SUCCESS,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// Whether a panic is `println!` failing because standard output was closed.
fn closed_pipe(payload: &(dyn std::any::Any + Send)) -> bool {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    text.starts_with("failed printing to std") && text.contains("Broken pipe")
}

/// Keeps the panic hook from printing a message and backtrace for a closed pipe.
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !closed_pipe(info.payload()) {
            default(info);
        }
    }));
}

/// The host, with its secrets read from `secrets` instead of `usr/secrets.env` if given.
fn with_secrets(host: Host, secrets: Option<PathBuf>) -> Result<Arc<Host>> {
    let host = Arc::new(host);
    if let Some(file) = secrets {
        if std::fs::symlink_metadata(&file).is_err() {
            let file = toolhost::Escaped(&file);
            exit::usage!("--secrets {file}: no such file (give the path of a KEY=VALUE file)");
        }
        let secrets = toolhost::Secrets::load(&file).map_err(anyhow::Error::msg)?;
        host.set_secrets(secrets.from_file(&file));
    }
    Ok(host)
}

fn run(cli: Cli) -> Result<ExitCode> {
    let root = cli.root;
    let mut options = HostOptions::default();
    options.max_output = cli.max_output;
    options.allow_unpinned = cli.allow_unpinned;
    options.isolate_all = cli.isolate;
    let host = || Host::with_options(&root, options.clone());
    let yes = cli.yes;
    match cli.command {
        Command::Watch {
            watching,
            grace_seconds,
        } => {
            let host = Host::with_options(&root, options.with_debounce(watching.debounce()))?;
            mcp::ask_inputs(&host, &watching.profile)?;
            let grace = Duration::from_secs_f64(grace_seconds);
            watch::watch(
                Arc::new(host),
                &watching.profile,
                &watching.agent,
                yes,
                grace,
            )
        }
        Command::Dev { crates, watching } => {
            let debounce = watching.debounce();
            let host = Host::with_options(&root, options.with_debounce(debounce))?;
            let options = dev::DevOptions {
                profile: watching.profile,
                agent: watching.agent,
                crates,
                debounce,
            };
            dev::dev(Arc::new(host), options, yes)
        }
        Command::Audit { command } => match command {
            AuditCommand::Verify {
                head,
                key_env,
                profile,
            } => audit::verify(&root, head.as_deref(), key_env.as_deref(), &profile),
            AuditCommand::Tail { n } => audit::tail(&root, n),
        },
        Command::List {
            profile,
            json,
            load,
        } => list::list(&host()?, &profile, json, load),
        Command::Inspect { file, json } => inspect::inspect(&file, json, host().ok().as_ref()),
        Command::Pin { check } => pin::pin(&host()?, check),
        Command::New {
            name,
            extension,
            profile,
        } => new::new(
            &root,
            &new::NewPlugin {
                name: &name,
                extension: extension.as_deref(),
                profile: profile.as_deref(),
            },
        ),
        #[cfg(feature = "mcp")]
        Command::ServeMcp {
            profile,
            http,
            token_secret,
            allow_origin,
            max_body_bytes,
            allow_writes_without_token,
            sessions,
            max_tasks,
            no_watch,
            grace_seconds,
            drain_seconds,
            verify_packages,
            secret_env,
        } => {
            if verify_packages {
                serve_mcp::verify_packages(&root)?;
            }
            for name in &secret_env {
                if let Err(why) = toolhost::package::manifest::check_secret_name(name) {
                    exit::usage!("--secret-env {why}");
                }
            }
            // A call whose record cannot be written is refused, unless the config says not.
            // It offers library tools only, so it starts no MCP server of usr/mcp.json.
            let options = options
                .clone()
                .with_audit_required(true)
                .with_secrets_from_env(secret_env)
                .with_mcp_client(false);
            let served = Host::with_options(&root, options)?;
            let options = serve_mcp::ServeOptions {
                profile,
                http,
                token_secret,
                allow_origins: allow_origin,
                max_body_bytes,
                allow_writes_without_token,
                sessions,
                max_tasks,
                watch: !no_watch,
                yes,
                grace: Duration::from_secs_f64(grace_seconds),
                drain: Duration::from_secs_f64(drain_seconds),
            };
            serve_mcp::serve(Arc::new(served), options)
        }
        #[cfg(feature = "mcp")]
        Command::Mcp {
            profile,
            json,
            action: None,
        } => {
            let host = host()?;
            mcp::ask_inputs(&host, &profile)?;
            mcp::mcp(&host, &profile, json)
        }
        #[cfg(feature = "mcp")]
        Command::Mcp {
            profile,
            action: Some(McpAction::Diff { server }),
            ..
        } => mcp::diff(&host()?, &profile, &server),
        #[cfg(feature = "mcp")]
        Command::Mcp {
            profile,
            action: Some(McpAction::Approve { server, digest }),
            ..
        } => mcp::approve(&host()?, &profile, &server, &digest),
        #[cfg(feature = "mcp")]
        Command::Mcp {
            profile,
            action:
                Some(McpAction::Login {
                    server,
                    no_browser,
                    fetch,
                }),
            ..
        } => mcp::login(&host()?, &profile, &server, no_browser, fetch),
        #[cfg(feature = "mcp")]
        Command::Mcp {
            action: Some(McpAction::Import { file }),
            ..
        } => mcp::import(&root, &file),
        Command::Prompt { profile } => {
            let host = host()?;
            check_profile(&host, &profile)?;
            mcp::settle(&host, &profile)?;
            println!("{}", host.system_prompt_parts(&profile).join("\n\n"));
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            script,
            profile,
            session,
        } => {
            let options = session.loop_options();
            let host = with_secrets(host()?, session.secrets)?;
            run::run_script(host, &script, &profile, &session.agent, &options, yes)
        }
        Command::Chat {
            profile,
            model,
            grace_seconds,
            session,
        } => {
            let options = session.loop_options();
            let host = with_secrets(host()?, session.secrets)?;
            mcp::ask_inputs(&host, &profile)?;
            let grace = Duration::from_secs_f64(grace_seconds);
            chat::chat(
                host,
                &profile,
                model.as_deref(),
                &session.agent,
                &options,
                grace,
            )
        }
        Command::Completions { shell } => {
            let mut command = Cli::command();
            // Generated into memory and written here: clap_complete panics on a write error, and
            // a closed pipe (`toolhost completions zsh | head -1`) must end quietly.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "toolhost", &mut script);
            std::io::Write::write_all(&mut std::io::stdout().lock(), &script)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { out } => man(out.as_deref()),
        Command::Keygen {
            out,
            name,
            no_password,
        } => keygen::keygen(out, &name, no_password),
        Command::Pack {
            path,
            out,
            sign,
            cargo_profile,
            mcpb,
            target,
        } => pack::pack(&pack::PackOptions {
            folder: &path,
            out: &out,
            sign: sign.as_deref(),
            cargo_profile: &cargo_profile,
            mcpb,
            targets: &target,
        }),
        Command::Trust { command } => match command {
            TrustCommand::Add { key } => trust::add(&root, &key),
            TrustCommand::List => trust::list(&root),
            TrustCommand::Remove { key } => trust::remove(&root, &key),
        },
        Command::Add {
            source,
            path,
            git,
            rev,
            cargo_profile,
            locked,
            ca,
            allow_downgrade,
            new_signer,
        } => {
            let source = match (source, path, git) {
                (Some(source), _, _) => source,
                (None, Some(path), _) => {
                    let path = std::fs::canonicalize(&path).unwrap_or(path);
                    format!("path+{}", path.display())
                }
                (None, None, Some(url)) => match rev {
                    Some(rev) => format!("git+{url}#{rev}"),
                    None => format!("git+{url}"),
                },
                (None, None, None) => exit::usage!("add needs SOURCE, --path DIR or --git URL"),
            };
            let replace = toolhost::package::Replace {
                allow_downgrade,
                new_signer,
            };
            let options = add_options(&root, yes, locked, cargo_profile, ca, replace)?;
            add::add(&root, &source, &options)
        }
        Command::Update {
            name,
            ca,
            allow_downgrade,
            new_signer,
        } => {
            let replace = toolhost::package::Replace {
                allow_downgrade,
                new_signer,
            };
            let options = add_options(&root, yes, false, "release".to_owned(), ca, replace)?;
            add::update(&root, name.as_deref(), &options)
        }
        Command::Remove { name } => remove::remove(&root, &name),
        Command::Installed { json } => installed::installed(&root, json),
        Command::Call {
            name,
            args,
            profile,
            agent,
            json,
        } => {
            let host = host()?;
            mcp::ask_inputs(&host, &profile)?;
            call::call(Arc::new(host), &name, &args, &profile, &agent, json, yes)
        }
    }
}

/// The options of `add` and `update`, with the trust policy of usr/toolhost.toml.
fn add_options(
    root: &Path,
    yes: bool,
    locked: bool,
    cargo_profile: String,
    ca: Option<PathBuf>,
    replace: toolhost::package::Replace,
) -> Result<add::AddOptions> {
    let layout = toolhost::Layout::new(root);
    let config =
        toolhost::config::Config::load(&layout, "default", toolhost::DEFAULT_MAX_TEXT_BYTES)?;
    let policy = toolhost::package::Policy {
        require_signature: config.require_signature(),
        signers: config.package_signers(),
    };
    Ok(add::AddOptions {
        yes,
        locked,
        policy,
        cargo_profile,
        ca,
        replace,
    })
}

/// `toolhost man`: the page of `toolhost` on standard output, or every page into `out`.
fn man(out: Option<&Path>) -> Result<ExitCode> {
    match out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", toolhost::Escaped(dir)))?;
            clap_mangen::generate_to(Cli::command(), dir).with_context(|| {
                format!("cannot write the man pages into {}", toolhost::Escaped(dir))
            })?;
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut page)?;
            std::io::Write::write_all(&mut std::io::stdout(), &page)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Refuses a profile name that is not safe, or that no layer has a folder for (a misspelled
/// `--profile` would otherwise run with the default tools, silently).
fn check_profile(host: &Host, profile: &str) -> Result<()> {
    if !toolhost::is_safe_name(profile) {
        let error = toolhost::HostError::InvalidProfile(profile.to_owned());
        exit::usage!("{error}");
    }
    let known = host.layout().profiles();
    if known.iter().any(|p| p == profile) {
        return Ok(());
    }
    let name = profile.to_owned();
    let error = toolhost::HostError::UnknownProfile { name, known };
    exit::usage!("{error}")
}

/// `path` relative to the host's root, for printing.
fn relative(host: &Host, path: &Path) -> String {
    // Control characters in a file name are escaped: one file, one line.
    toolhost::Escaped(path.strip_prefix(host.root()).unwrap_or(path)).to_string()
}
