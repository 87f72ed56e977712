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
mod generated;
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
mod memory;
mod new;
mod otel;
mod pack;
mod pin;
mod plugin_exit;
mod prompt;
mod reloads;
mod remove;
mod run;
mod sampling;
#[cfg(feature = "mcp")]
mod serve_mcp;
mod shared_args;
mod signals;
mod trust;
mod update;
mod watch;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use args_error::usage_error;
use clap::{Parser, Subcommand};
use toolhost::{Host, HostOptions};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::Layer as _;

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

/// The commands, in the order `toolhost --help` lists them; each one's arguments and `run` are
/// in its own file.
#[derive(Subcommand)]
enum Command {
    List(list::Args),
    Call(call::Args),
    Watch(watch::Args),
    Dev(dev::Args),
    Run(run::Args),
    Audit(audit::Args),
    Chat(chat::Args),
    New(new::Args),
    Inspect(inspect::Args),
    Pin(pin::Args),
    #[cfg(feature = "mcp")]
    ServeMcp(serve_mcp::Args),
    #[cfg(feature = "mcp")]
    Mcp(mcp::Args),
    Prompt(prompt::Args),
    Keygen(keygen::Args),
    Pack(pack::Args),
    Trust(trust::Args),
    Add(add::Args),
    Update(update::Args),
    Remove(remove::Args),
    Installed(installed::Args),
    Completions(generated::Completions),
    Man(generated::Man),
}

/// What every command gets besides its own arguments: the global options.
pub(crate) struct Global {
    /// `--root`.
    pub(crate) root: PathBuf,
    /// The host's options from `--max-output`, `--allow-unpinned` and `--isolate`.
    pub(crate) options: HostOptions,
    /// `--yes`.
    pub(crate) yes: bool,
}

impl Global {
    /// A host of the root, with the global options.
    pub(crate) fn host(&self) -> Result<Host> {
        Ok(Host::with_options(&self.root, self.options.clone())?)
    }
}

fn main() -> ExitCode {
    memory::tune();
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
    let quiet = matches!(cli.command, Command::List(_));
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

fn run(cli: Cli) -> Result<ExitCode> {
    let mut options = HostOptions::default();
    options.max_output = cli.max_output;
    options.allow_unpinned = cli.allow_unpinned;
    options.isolate_all = cli.isolate;
    let global = Global {
        root: cli.root,
        options,
        yes: cli.yes,
    };
    match cli.command {
        Command::List(args) => args.run(&global),
        Command::Call(args) => args.run(&global),
        Command::Watch(args) => args.run(&global),
        Command::Dev(args) => args.run(&global),
        Command::Run(args) => args.run(&global),
        Command::Audit(args) => args.run(&global),
        Command::Chat(args) => args.run(&global),
        Command::New(args) => args.run(&global),
        Command::Inspect(args) => args.run(&global),
        Command::Pin(args) => args.run(&global),
        #[cfg(feature = "mcp")]
        Command::ServeMcp(args) => args.run(&global),
        #[cfg(feature = "mcp")]
        Command::Mcp(args) => args.run(&global),
        Command::Prompt(args) => args.run(&global),
        Command::Keygen(args) => args.run(&global),
        Command::Pack(args) => args.run(&global),
        Command::Trust(args) => args.run(&global),
        Command::Add(args) => args.run(&global),
        Command::Update(args) => args.run(&global),
        Command::Remove(args) => args.run(&global),
        Command::Installed(args) => args.run(&global),
        Command::Completions(args) => args.run(&global),
        Command::Man(args) => args.run(&global),
    }
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
