//! `toolhost run`: a scripted session with a live log.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use toolhost::output::Terminal;
use toolhost::{Agent, Host, LoopOptions, Script, ScriptedModel};

use crate::approve::Lines;
use crate::check_profile;
use crate::shared_args::SessionArgs;
use crate::Global;
use std::path::PathBuf;

/// Run a scripted conversation end to end with a live log: the model's replies come from
/// SCRIPT (`=== user` / `=== model` blocks). Type a line to interject; Ctrl-C stops cleanly.
/// The session is saved under usr/sessions/.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The script file.
    script: PathBuf,
    /// The agent profile.
    #[arg(long, short, default_value = "default")]
    profile: String,
    #[command(flatten)]
    session: SessionArgs,
}

impl Args {
    /// `toolhost run`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        let options = self.session.loop_options();
        let host = self.session.host(global)?;
        let agent = &self.session.agent;
        run_script(
            host,
            &self.script,
            &self.profile,
            agent,
            &options,
            global.yes,
        )
    }
}

/// `toolhost run`: each user message of the script starts a monologue; the final answers go to
/// standard output, the live log to standard error.
pub(crate) fn run_script(
    host: Arc<Host>,
    script: &std::path::Path,
    profile: &str,
    agent: &str,
    options: &LoopOptions,
    yes: bool,
) -> Result<ExitCode> {
    check_profile(&host, profile)?;
    let script = Script::load(script).map_err(anyhow::Error::msg)?;
    // The script's first turn must offer the MCP servers' tools: they are waited for.
    crate::mcp::settle(&host, profile)?;
    // The final answers go to the host's own standard output; fd 1 points at standard error
    // while tools run (see toolhost::fds).
    let mut stdout = crate::call::host_stdout()?;
    let sessions = host.layout().sessions_dir();
    let agent = Agent::with_output(host, agent, profile, Arc::new(Terminal::default()))?;
    let session = agent
        .record_session(&sessions)
        .with_context(|| format!("cannot create a session folder in {}", sessions.display()))?;
    let model = ScriptedModel::new(script.replies);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // A line typed while the agent works is sent to it.
    // (or answers a pending approval).
    let typed = agent.clone();
    let lines = Arc::new(Lines::default());
    crate::approve::set_up(&agent, yes, Some(lines.clone()));
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            if !lines.answer(&line) && !line.trim().is_empty() {
                typed.interject(line.trim());
            }
        }
    });
    let code: std::io::Result<ExitCode> = runtime.block_on(async {
        let stopper = agent.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\nstopping (Ctrl-C; press it again to quit at once)...");
                stopper.stop();
            }
            // A tool that never checks for intervention cannot be stopped: a second Ctrl-C
            // ends the process (the session files hold everything up to here).
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("quitting");
                std::process::exit(crate::exit::INTERRUPTED);
            }
        });
        for message in &script.user_messages {
            match agent.monologue(&model, message, options).await {
                Ok(answer) => writeln!(stdout, "{answer}")?,
                Err(e) => {
                    // Any error text may quote a tool, an extension or the server: masked like
                    // the rest (the host's secrets and the model's key).
                    let text = toolhost::mask_log_line(&e.to_string()).into_owned();
                    eprintln!("error: {text}");
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    });
    crate::chat::print_usage(&agent);
    eprintln!("session saved in {}", session.display());
    Ok(code?)
}
