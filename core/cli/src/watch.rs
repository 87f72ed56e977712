//! `toolhost watch`: development mode, with reloads reported and tools called from stdin.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use serde_json::Value;
use toolhost::output::{OutputKind, Terminal};
use toolhost::{Agent, Host};

use crate::call::masked;
use crate::check_profile;
use crate::list::print_listing;

/// `toolhost watch`: reload reports and calls, until standard input ends or `/quit`.
pub(crate) fn watch(host: Arc<Host>, profile: &str, agent: &str, yes: bool) -> Result<ExitCode> {
    check_profile(&host, profile)?;
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
    for line in std::io::stdin().lines() {
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
        let result = runtime.block_on(agent.call_tool(name, args));
        output.end_progress();
        match masked(&agent, result) {
            Ok(response) => println!("{}", response.message),
            Err(e) => println!("error: {} ({} error)", e.message(), e.kind()),
        }
        tracing::debug!("{name} answered in {:?}", started.elapsed());
    }
    Ok(ExitCode::SUCCESS)
}
