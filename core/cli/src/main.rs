//! `toolhost`: list, call and describe the tools a profile sees, run scripted sessions, chat
//! with a real model, and watch plugin folders while developing. One file per command.

mod approve;
mod audit;
mod call;
mod chat;
mod list;
mod mcp;
mod run;
mod watch;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::{Parser, Subcommand};
use toolhost::{Host, HostOptions, LoopOptions};

/// Native plugin host for AI-agent tools.
#[derive(Parser)]
#[command(name = "toolhost", version, about)]
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
    /// `exec` tools).
    #[arg(long, global = true)]
    yes: bool,
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
    },
    /// Call one tool through the full lifecycle and print its response.
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
    /// standard input (`name[:method] [JSON arguments]` per line; `/list`, `/quit`).
    Watch {
        /// The agent profile.
        #[arg(long, short, default_value = "default")]
        profile: String,
        /// The agent's name.
        #[arg(long, default_value = "A0")]
        agent: String,
        /// How long a changed file must stay quiet before it is read, in milliseconds.
        #[arg(long, default_value_t = 40)]
        debounce_ms: u64,
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
        /// The agent's name.
        #[arg(long, default_value = "A0")]
        agent: String,
        /// Iterations per user message before the loop gives up.
        #[arg(long, default_value_t = 25)]
        max_iterations: usize,
        /// Unusable replies in a row before the loop gives up.
        #[arg(long, default_value_t = 3)]
        max_unusable: usize,
        /// Read the secrets from this file instead of usr/secrets.env.
        #[arg(long)]
        secrets: Option<PathBuf>,
    },
    /// The audit log (usr/audit/audit.jsonl): check its hash chain, or show its last records.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// An interactive session with a real model from models.toml: its text streams, tools
    /// run with live progress, a line typed meanwhile interjects, Ctrl-C stops the turn (twice
    /// quits), /quit ends. With standard input not a terminal: one user message per line, each
    /// final answer on standard output. The session is saved under usr/sessions/.
    Chat {
        /// The agent profile.
        #[arg(long, short, default_value = "default")]
        profile: String,
        /// The model: a [models.NAME] table of models.toml (default: its `default`, or the
        /// only one).
        #[arg(long, short)]
        model: Option<String>,
        /// The agent's name.
        #[arg(long, default_value = "A0")]
        agent: String,
        /// Iterations per user message before the loop gives up.
        #[arg(long, default_value_t = 25)]
        max_iterations: usize,
        /// Unusable replies in a row before the loop gives up.
        #[arg(long, default_value_t = 3)]
        max_unusable: usize,
        /// Read the secrets from this file instead of usr/secrets.env.
        #[arg(long)]
        secrets: Option<PathBuf>,
    },
    /// The profile's MCP servers (usr/mcp.json, usr/agents/<P>/mcp.json): each one's state
    /// (starting, ready with N tools, failed with the reason), its tools and its last error.
    Mcp {
        /// The agent profile.
        #[arg(long, short, default_value = "default")]
        profile: String,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// The system prompt for a profile: its prompt fragments and the tools section.
    Prompt {
        /// The agent profile.
        #[arg(long, short, default_value = "default")]
        profile: String,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Check every record's hash and link: exit 0 if the chain is intact, 1 naming the first
    /// broken record.
    Verify,
    /// The last records, one line each: time, seq, type, tool, outcome, duration, decision.
    Tail {
        /// How many records.
        #[arg(short, default_value_t = 20)]
        n: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `list` reports skipped files in its own table; elsewhere each one is a warning line.
    let quiet = matches!(cli.command, Command::List { .. });
    tracing_subscriber::fmt()
        .with_env_filter(match (cli.verbose, quiet) {
            (true, _) => "debug",
            (false, true) => "error",
            (false, false) => "warn",
        })
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .without_time()
        .with_target(false)
        .init();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}

/// The host, with its secrets read from `secrets` instead of `usr/secrets.env` if given.
fn with_secrets(host: Host, secrets: Option<PathBuf>) -> Result<Arc<Host>> {
    let host = Arc::new(host);
    if let Some(file) = secrets {
        host.set_secrets(toolhost::Secrets::load(&file).map_err(anyhow::Error::msg)?);
    }
    Ok(host)
}

fn run(cli: Cli) -> Result<ExitCode> {
    let root = cli.root;
    let mut options = HostOptions::default();
    options.max_output = cli.max_output;
    let host = || Host::with_options(&root, options.clone());
    let yes = cli.yes;
    match cli.command {
        Command::Watch {
            profile,
            agent,
            debounce_ms,
        } => {
            let debounce = std::time::Duration::from_millis(debounce_ms);
            let host = Host::with_options(&root, options.clone().with_debounce(debounce))?;
            watch::watch(Arc::new(host), &profile, &agent, yes)
        }
        Command::Audit { command } => match command {
            AuditCommand::Verify => audit::verify(&root),
            AuditCommand::Tail { n } => audit::tail(&root, n),
        },
        Command::List { profile, json } => list::list(&host()?, &profile, json),
        Command::Mcp { profile, json } => mcp::mcp(&host()?, &profile, json),
        Command::Prompt { profile } => {
            check_profile(&profile)?;
            let host = host()?;
            mcp::settle(&host, &profile)?;
            println!("{}", host.system_prompt_parts(&profile).join("\n\n"));
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            script,
            profile,
            agent,
            max_iterations,
            max_unusable,
            secrets,
        } => {
            let host = with_secrets(host()?, secrets)?;
            let options = LoopOptions::default()
                .with_max_iterations(max_iterations)
                .with_max_unusable(max_unusable);
            run::run_script(host, &script, &profile, &agent, &options, yes)
        }
        Command::Chat {
            profile,
            model,
            agent,
            max_iterations,
            max_unusable,
            secrets,
        } => {
            let host = with_secrets(host()?, secrets)?;
            let options = LoopOptions::default()
                .with_max_iterations(max_iterations)
                .with_max_unusable(max_unusable);
            chat::chat(host, &profile, model.as_deref(), &agent, &options)
        }
        Command::Call {
            name,
            args,
            profile,
            agent,
            json,
        } => call::call(Arc::new(host()?), &name, &args, &profile, &agent, json, yes),
    }
}

fn check_profile(profile: &str) -> Result<()> {
    if toolhost::is_safe_name(profile) {
        Ok(())
    } else {
        Err(toolhost::HostError::InvalidProfile(profile.to_owned()).into())
    }
}

/// `path` relative to the host's root, for printing.
fn relative(host: &Host, path: &Path) -> String {
    // Control characters in a file name are escaped: one file, one line.
    toolhost::Escaped(path.strip_prefix(host.root()).unwrap_or(path)).to_string()
}
