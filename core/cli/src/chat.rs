//! `toolhost chat`: an interactive session with a real model (`models.toml`), or, with
//! standard input not a terminal, one user message per line and each final answer on
//! standard output.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use tokio::sync::mpsc::UnboundedReceiver;
use toolhost::output::Terminal;
use toolhost::{Agent, Host, LoopError, LoopOptions};
use toolhost_openai::{ModelsConfig, OpenAiModel};

use crate::check_profile;
use crate::shared_args::{seconds, SessionArgs};
use crate::Global;

/// What the session is doing, for Ctrl-C.
const IDLE: u8 = 0;
const BUSY: u8 = 1;
const STOPPING: u8 = 2;

/// An interactive session with a real model from models.toml: its text streams, tools
/// run with live progress, a line typed meanwhile interjects, Ctrl-C stops the turn (twice
/// quits), /quit ends; SIGTERM ends the session once the turn has (within --grace-seconds). With standard input not a terminal: one user message per line, each
/// final answer on standard output. The session is saved under usr/sessions/.
#[derive(clap::Args)]
pub(crate) struct Args {
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
}

impl Args {
    /// `toolhost chat`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        let options = self.session.loop_options();
        let host = self.session.host(global)?;
        crate::mcp::ask_inputs(&host, &self.profile)?;
        let grace = Duration::from_secs_f64(self.grace_seconds);
        let (profile, model) = (&self.profile, self.model.as_deref());
        chat(host, profile, model, &self.session.agent, &options, grace)
    }
}

/// `toolhost chat`.
pub(crate) fn chat(
    host: Arc<Host>,
    profile: &str,
    model: Option<&str>,
    agent: &str,
    options: &LoopOptions,
    grace: Duration,
) -> Result<ExitCode> {
    check_profile(&host, profile)?;
    let interactive = std::io::stdin().is_terminal();
    // On a terminal, Ctrl-C keeps its meaning (stop the turn; twice, or idle, quit): SIGTERM
    // alone stops the session gracefully. Otherwise both do.
    let shutdown = crate::signals::Shutdown::listen_to("the turn running", grace, !interactive)?;
    // Messages piped in go at once: the first prompt must offer the MCP servers' tools, so
    // they are waited for (a person typing gives them that time).
    if !std::io::stdin().is_terminal() {
        crate::mcp::settle(&host, profile)?;
    }
    let named = model;
    let model = load_model(&host, profile, model)?;
    // A plugin rebuilt during the chat serves its next call; each reload is one line. A chat
    // goes on without it if the folders cannot be watched.
    let _watcher = crate::reloads::report(&host, crate::reloads::To::Stderr)
        .inspect_err(|e| tracing::warn!("{e:#}; plugins are not reloaded during this chat"))
        .ok();
    // The profile's layers in use from the start, so that a library installed before the
    // first message is loaded and announced as it appears, not at that message.
    host.layers(profile);
    let sessions = host.layout().sessions_dir();
    let agent = Agent::with_output(host, agent, profile, Arc::new(Terminal::default()))?;
    let session = agent
        .record_session(&sessions)
        .with_context(|| format!("cannot create a session folder in {}", sessions.display()))?;
    // On a terminal, approvals and forms take the next line typed (`approve.rs`); a completion
    // a plugin or an MCP server asks for goes to the chat's model.
    let answers = Arc::new(crate::approve::Lines::default());
    crate::approve::set_up(&agent, false, Some(answers.clone()));
    crate::sampling::set_up(agent.host(), named);
    if interactive {
        announce(&model);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let lines = messages(answers);
    let state = Arc::new(AtomicU8::new(IDLE));
    let failed = runtime.block_on(async {
        if interactive {
            tokio::spawn(ctrl_c(agent.clone(), state.clone(), session.clone()));
        }
        let chat = Chat {
            agent: &agent,
            model: &model,
            options,
            state: &state,
            interactive,
            shutdown: &shutdown,
            grace,
        };
        chat.run(lines).await
    });
    print_usage(&agent);
    eprintln!("session saved in {}", session.display());
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The model `named` (or the default) of the profile's models.toml, with the host's secrets.
fn load_model(host: &Host, profile: &str, named: Option<&str>) -> Result<OpenAiModel> {
    let models = ModelsConfig::load(host.layout(), profile)?;
    let config = models.get(named)?.clone();
    Ok(OpenAiModel::new(config, &host.secrets())?)
}

/// The chat's first line on a terminal: which model, where, how to end.
fn announce(model: &OpenAiModel) {
    let c = model.config();
    eprintln!(
        "chatting with '{}' ({} at {}, {} tool protocol); type a message, /quit to end",
        c.name,
        c.model,
        c.base_url,
        c.tool_protocol.as_str()
    );
}

/// The user's messages: the lines of standard input, read on a thread of their own, but those
/// that answer a question asked meanwhile (an approval, a form).
fn messages(answers: Arc<crate::approve::Lines>) -> UnboundedReceiver<String> {
    let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            if answers.answer(&line) {
                continue;
            }
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// The total of the session's token usage, if the model reported any.
pub(crate) fn print_usage(agent: &Agent) {
    let usage = agent.usage();
    if usage.total_tokens > 0 {
        eprintln!("usage: {usage}");
    }
}

/// Ctrl-C stops the turn that is running; a second one, or one while idle, quits.
async fn ctrl_c(agent: Arc<Agent>, state: Arc<AtomicU8>, session: std::path::PathBuf) {
    while tokio::signal::ctrl_c().await.is_ok() {
        if state
            .compare_exchange(BUSY, STOPPING, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            eprintln!("\nstopping this turn (Ctrl-C again quits)...");
            agent.stop();
            continue;
        }
        eprintln!("\nquitting");
        print_usage(&agent);
        eprintln!("session saved in {}", session.display());
        std::process::exit(crate::exit::INTERRUPTED);
    }
}

struct Chat<'a> {
    agent: &'a Arc<Agent>,
    model: &'a OpenAiModel,
    options: &'a LoopOptions,
    state: &'a AtomicU8,
    interactive: bool,
    /// SIGTERM (and SIGINT off a terminal): no new message, the turn running gets `grace`.
    shutdown: &'a crate::signals::Shutdown,
    grace: Duration,
}

impl Chat<'_> {
    /// Each line starts a turn; returns whether any turn failed.
    async fn run(&self, mut lines: UnboundedReceiver<String>) -> bool {
        let mut failed = false;
        let mut quit = false;
        while !quit {
            if self.interactive {
                eprint!("> ");
            }
            let line = tokio::select! {
                line = lines.recv() => line,
                _ = self.shutdown.requested() => None,
            };
            let Some(line) = line else {
                break;
            };
            let message = line.trim();
            if message == "/quit" {
                break;
            }
            if message.is_empty() {
                continue;
            }
            self.state.store(BUSY, Ordering::SeqCst);
            let result = self.turn(message, &mut lines, &mut quit).await;
            self.state.store(IDLE, Ordering::SeqCst);
            self.agent.clear_stop();
            match result {
                Ok(answer) => println!("{answer}"),
                Err(LoopError::Stopped) => eprintln!("(turn stopped)"),
                Err(e) => {
                    // Any error text may quote a tool or the server: masked like the rest (the
                    // host's secrets and the model's key).
                    let text = toolhost::mask_log_line(&e.to_string()).into_owned();
                    eprintln!("error: {text}");
                    failed = true;
                }
            }
        }
        failed
    }

    /// One monologue. Interactively, a line typed meanwhile interjects (`/quit` stops the
    /// turn and ends the session); otherwise lines wait their turn.
    async fn turn(
        &self,
        message: &str,
        lines: &mut UnboundedReceiver<String>,
        quit: &mut bool,
    ) -> Result<String, LoopError> {
        let turn = self.agent.monologue(self.model, message, self.options);
        tokio::pin!(turn);
        let mut open = self.interactive;
        loop {
            tokio::select! {
                result = &mut turn => return result,
                _ = self.shutdown.requested() => {
                    *quit = true;
                    return match tokio::time::timeout(self.grace, &mut turn).await {
                        Ok(result) => result,
                        Err(_) => {
                            eprintln!("the turn did not end within the grace period: stopping it");
                            self.agent.stop();
                            turn.await
                        }
                    };
                }
                line = lines.recv(), if open => match line {
                    None => open = false,
                    Some(line) if line.trim() == "/quit" => {
                        *quit = true;
                        self.agent.stop();
                    }
                    Some(line) if !line.trim().is_empty() => self.agent.interject(line.trim()),
                    Some(_) => {}
                },
            }
        }
    }
}
