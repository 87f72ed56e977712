//! `toolhost watch`: development mode, with reloads reported and tools called from stdin.
//! SIGTERM or SIGINT ends it gracefully: no new line is read, the call running gets the grace
//! period to finish.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde_json::Value;
use toolhost::output::{OutputKind, Terminal};
use toolhost::{Agent, Host};

use crate::call::masked;
use crate::check_profile;
use crate::list::print_listing;
use crate::shared_args::{seconds, WatchArgs};
use crate::Global;

/// Development mode: watch the plugin folders, print each reload, and call tools typed on
/// standard input (`name[:method] [JSON arguments]` per line; `/list`, `/quit`). SIGTERM or
/// SIGINT ends it once the call running has (within --grace-seconds).
#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    watching: WatchArgs,
    /// On SIGTERM or SIGINT: how long the call running may take to finish before it is
    /// cancelled (a second signal ends at once).
    #[arg(long, value_name = "SECONDS", default_value_t = toolhost::DEFAULT_GRACE.as_secs_f64(), value_parser = seconds)]
    grace_seconds: f64,
}

impl Args {
    /// `toolhost watch`.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        let options = global
            .options
            .clone()
            .with_debounce(self.watching.debounce());
        let host = Host::with_options(&global.root, options)?;
        let WatchArgs { profile, agent, .. } = self.watching;
        crate::mcp::ask_inputs(&host, &profile)?;
        let grace = Duration::from_secs_f64(self.grace_seconds);
        watch(Arc::new(host), &profile, &agent, global.yes, grace)
    }
}

/// `toolhost watch`: reload reports and calls, until standard input ends, `/quit`, or a signal.
pub(crate) fn watch(
    host: Arc<Host>,
    profile: &str,
    agent: &str,
    yes: bool,
    grace: Duration,
) -> Result<ExitCode> {
    check_profile(&host, profile)?;
    let shutdown = crate::signals::Shutdown::listen("the call running", grace)?;
    // The listing holds the tools it lists: dropped at once, so a reload lets the first
    // generation go (an isolated tool's old worker exits).
    let names: Vec<String> = host
        .list(profile)
        .tools
        .into_iter()
        .map(|t| t.name)
        .collect();
    // The watcher runs before the header says so: a change made on seeing it is caught.
    let _watcher = crate::reloads::report(&host, crate::reloads::To::Stdout)?;
    println!(
        "watching {} for profile '{profile}': {} tool{} ({})",
        host.root().display(),
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        names.join(", ")
    );
    println!("type `name[:method] [JSON arguments]` to call a tool, `/list` or `/quit`");
    let output = Arc::new(Terminal::default().without(OutputKind::ToolResponse));
    let agent = Agent::with_output(host.clone(), agent, profile, output.clone())?;
    crate::approve::set_up(&agent, yes, None);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut lines = stdin_lines();
    loop {
        let next = runtime.block_on(async {
            tokio::select! {
                line = lines.recv() => line,
                _ = shutdown.requested() => None,
            }
        });
        let Some(line) = next else { break };
        let line = line?;
        let line = line.trim();
        let (name, args) = line.split_once(char::is_whitespace).unwrap_or((line, "{}"));
        match name {
            "" => continue,
            "/quit" | "/exit" => break,
            "/list" => {
                print_listing(&host, profile, &host.catalog(profile));
                continue;
            }
            _ => {}
        }
        let args: Value = match serde_json::from_str(args.trim()) {
            Ok(args) => args,
            Err(e) => {
                println!("error: the arguments are not valid JSON ({e}): {args}");
                continue;
            }
        };
        let started = std::time::Instant::now();
        let result = runtime.block_on(call_within_grace(&agent, &shutdown, grace, name, args));
        output.end_progress();
        let Some(result) = result else {
            println!(
                "error: {name} did not finish within the grace period ({} s): cancelled",
                grace.as_secs_f64()
            );
            break;
        };
        match masked(&agent, result) {
            Ok(response) => println!("{}", response.message),
            Err(e) => println!("error: {} ({} error)", e.message(), e.kind()),
        }
        tracing::debug!("{name} answered in {:?}", started.elapsed());
    }
    Ok(ExitCode::SUCCESS)
}

/// The lines of standard input, read on a thread of their own (a read error ends them).
fn stdin_lines() -> tokio::sync::mpsc::UnboundedReceiver<std::io::Result<String>> {
    let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let failed = line.is_err();
            if tx.send(line).is_err() || failed {
                break;
            }
        }
    });
    lines
}

/// The call of `name` typed with `args`; once a stop is asked, it has the grace period to
/// finish (`None`: it did not, and was cancelled).
async fn call_within_grace(
    agent: &Arc<Agent>,
    shutdown: &crate::signals::Shutdown,
    grace: Duration,
    name: &str,
    args: Value,
) -> Option<Result<toolhost::Response, toolhost::ToolError>> {
    let call = agent.call_tool(name, args);
    tokio::pin!(call);
    tokio::select! {
        result = &mut call => Some(result),
        _ = shutdown.requested() => tokio::time::timeout(grace, call).await.ok(),
    }
}
