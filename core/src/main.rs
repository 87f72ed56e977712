//! `toolhost`: list, call and describe the tools a profile sees.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};
use serde_json::{json, Value};
use toolhost::output::{OutputKind, Terminal};
use toolhost::{
    Agent, Host, HostOptions, Listing, LoopOptions, ReloadEvent, Script, ScriptedModel,
};

/// Native plugin host for AI-agent tools.
#[derive(Parser)]
#[command(name = "toolhost", version, about)]
struct Cli {
    /// The root folder holding core/, plugins/ and usr/.
    #[arg(long, global = true, env = "TOOLHOST_ROOT", default_value = ".")]
    root: PathBuf,
    /// Show debug logging (including abi_stable's full load-error reports).
    #[arg(short, long, global = true)]
    verbose: bool,
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
    /// The system prompt for a profile: its prompt fragments and the tools section.
    Prompt {
        /// The agent profile.
        #[arg(long, short, default_value = "default")]
        profile: String,
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

fn run(cli: Cli) -> Result<ExitCode> {
    if let Command::Watch {
        profile,
        agent,
        debounce_ms,
    } = &cli.command
    {
        let options =
            HostOptions::default().with_debounce(std::time::Duration::from_millis(*debounce_ms));
        let host = Arc::new(Host::with_options(&cli.root, options)?);
        return watch(host, profile, agent);
    }
    let host = Arc::new(Host::new(&cli.root)?);
    match cli.command {
        Command::Watch { .. } => unreachable!("handled above"),
        Command::List { profile, json } => {
            check_profile(&profile)?;
            let listing = host.list(&profile);
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&listing_json(&host, &profile, &listing))?
                );
            } else {
                print_listing(&host, &profile, &listing);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Prompt { profile } => {
            check_profile(&profile)?;
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
            if let Some(file) = secrets {
                host.set_secrets(toolhost::Secrets::load(&file).map_err(anyhow::Error::msg)?);
            }
            let options = LoopOptions::default()
                .with_max_iterations(max_iterations)
                .with_max_unusable(max_unusable);
            run_script(host, &script, &profile, &agent, &options)
        }
        Command::Call {
            name,
            args,
            profile,
            agent,
            json,
        } => {
            let args: Value = serde_json::from_str(&args)
                .with_context(|| format!("--args is not valid JSON ({args})"))?;
            // The response goes to stdout below, so the live log (stderr) leaves it out.
            let output = Arc::new(Terminal::default().without(OutputKind::ToolResponse));
            let agent = Agent::with_output(host, &agent, &profile, output)?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            match masked(&agent, runtime.block_on(agent.call_tool(&name, args))) {
                Ok(response) if json => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&json!({
                            "message": response.message,
                            "break_loop": response.break_loop,
                            "additional": response.additional,
                        }))?
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Ok(response) => {
                    println!("{}", response.message);
                    if response.break_loop {
                        eprintln!("(final answer: this ends the agent's loop)");
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    if json {
                        let err =
                            json!({"error": {"kind": e.kind().as_str(), "message": e.message()}});
                        println!("{}", serde_json::to_string_pretty(&err)?);
                    }
                    eprintln!(
                        "error: tool '{name}' failed ({} error): {}",
                        e.kind(),
                        e.message()
                    );
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}

/// `toolhost run`: each user message of the script starts a monologue; the final answers go to
/// standard output, the live log to standard error.
fn run_script(
    host: Arc<Host>,
    script: &std::path::Path,
    profile: &str,
    agent: &str,
    options: &LoopOptions,
) -> Result<ExitCode> {
    check_profile(profile)?;
    let script = Script::load(script).map_err(anyhow::Error::msg)?;
    let sessions = host.root().join("usr").join("sessions");
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
    let typed = agent.clone();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines().map_while(Result::ok) {
            if !line.trim().is_empty() {
                typed.interject(line.trim());
            }
        }
    });
    let code = runtime.block_on(async {
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
                std::process::exit(130);
            }
        });
        for message in &script.user_messages {
            match agent.monologue(&model, message, options).await {
                Ok(answer) => println!("{answer}"),
                Err(e) => {
                    // Any error text may quote a tool or an extension: masked like the rest.
                    let text = agent.host().secrets().mask(&e.to_string()).into_owned();
                    eprintln!("error: {text}");
                    return ExitCode::FAILURE;
                }
            }
        }
        ExitCode::SUCCESS
    });
    eprintln!("session saved in {}", session.display());
    Ok(code)
}

/// `toolhost watch`: reload reports and calls, until standard input ends or `/quit`.
fn watch(host: Arc<Host>, profile: &str, agent: &str) -> Result<ExitCode> {
    check_profile(profile)?;
    let listing = host.list(profile);
    let names: Vec<&str> = listing.tools.iter().map(|t| t.name.as_str()).collect();
    println!(
        "watching {} for profile '{profile}': {} tool{} ({})",
        host.root().display(),
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        names.join(", ")
    );
    println!("type `name[:method] [JSON arguments]` to call a tool, `/list` or `/quit`");
    let reloads = host.subscribe();
    let _watcher = host.watch()?;
    let printer = host.clone();
    std::thread::spawn(move || {
        for event in reloads {
            println!("{}", describe(&printer, &event));
        }
    });
    let output = Arc::new(Terminal::default().without(OutputKind::ToolResponse));
    let agent = Agent::with_output(host.clone(), agent, profile, output)?;
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
                print_listing(&host, profile, &host.list(profile));
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
        match masked(&agent, runtime.block_on(agent.call_tool(name, args))) {
            Ok(response) => println!("{}", response.message),
            Err(e) => println!("error: {} ({} error)", e.message(), e.kind()),
        }
        tracing::debug!("{name} answered in {:?}", started.elapsed());
    }
    Ok(ExitCode::SUCCESS)
}

/// A call's result with every secret value masked, for printing.
fn masked(
    agent: &Agent,
    result: Result<toolhost::Response, toolhost::ToolError>,
) -> Result<toolhost::Response, toolhost::ToolError> {
    let secrets = agent.host().secrets();
    match result {
        Ok(mut response) => {
            secrets.mask_in_place(&mut response.message);
            if let Some(additional) = &mut response.additional {
                secrets.mask_map(additional);
            }
            Ok(response)
        }
        Err(e) => Err(toolhost::ToolError::new(
            e.kind(),
            secrets.mask(e.message()).into_owned(),
        )),
    }
}

/// One reload report line, with paths relative to the root and the layer named.
fn describe(host: &Host, event: &ReloadEvent) -> String {
    let place = |path: &std::path::Path| {
        let rel = relative(host, path);
        // `<layer>/tools/<file>` or `<layer>/extensions/<point>/<file>`
        let parts: Vec<&str> = rel.split('/').collect();
        let layer = match parts
            .iter()
            .rposition(|p| *p == "tools" || *p == "extensions")
        {
            Some(0) | None => ".".to_owned(),
            Some(i) => parts[..i].join("/"),
        };
        format!("{rel} [layer {layer}]")
    };
    let ms = |d: &std::time::Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
    match event {
        ReloadEvent::Loaded {
            path,
            old: Some(old),
            new,
            took,
        } => format!("reloaded {}: {old} -> {new} in {}", place(path), ms(took)),
        ReloadEvent::Loaded {
            path, new, took, ..
        } => format!("loaded {}: {new} in {}", place(path), ms(took)),
        ReloadEvent::Failed {
            error,
            kept: Some(kept),
        } => format!(
            "reload of {} failed, still serving {kept}: {}",
            place(&error.path),
            error.reason
        ),
        ReloadEvent::Failed { error, kept: None } => {
            format!("cannot load {}: {}", place(&error.path), error.reason)
        }
        ReloadEvent::Removed { path } => format!("removed {}", place(path)),
        ReloadEvent::Changed { path } => format!("changed {}", relative(host, path)),
        other => other.to_string(),
    }
}

fn check_profile(profile: &str) -> Result<()> {
    if toolhost::is_safe_name(profile) {
        Ok(())
    } else {
        Err(toolhost::HostError::InvalidProfile(profile.to_owned()).into())
    }
}

fn relative(host: &Host, path: &std::path::Path) -> String {
    path.strip_prefix(host.root())
        .unwrap_or(path)
        .display()
        .to_string()
}

fn print_listing(host: &Host, profile: &str, listing: &Listing) {
    println!(
        "Tools for profile '{profile}' (root {}):",
        host.root().display()
    );
    if listing.tools.is_empty() {
        println!("  (none: run `cargo xtask install` to build the built-in plugins)");
    }
    for tool in &listing.tools {
        let info = tool.found.handle.info();
        println!(
            "  {:<12} {:<5} [{} layer] {}",
            tool.name,
            info.risk_level.as_str(),
            tool.found.layer.kind.as_str(),
            relative(host, &tool.found.path)
        );
        if !info.description.is_empty() {
            println!("               {}", info.description);
        }
        for shadow in &tool.shadows {
            println!("               shadows {}", relative(host, shadow));
        }
    }
    let points = host.extension_points(profile);
    if !points.is_empty() {
        println!("Extensions, in the order they run:");
    }
    for point in points {
        println!("  {point}:");
        for ext in host.extensions(profile, &point).iter() {
            println!("    {:<24} {}", ext.name(), relative(host, ext.source()));
        }
    }
    if !listing.skipped.is_empty() {
        println!("Skipped:");
        for e in &listing.skipped {
            println!("  {}: {}", relative(host, &e.path), e.reason);
        }
    }
}

fn listing_json(host: &Host, profile: &str, listing: &Listing) -> Value {
    let extensions: serde_json::Map<String, Value> = host
        .extension_points(profile)
        .into_iter()
        .map(|point| {
            let list = host
                .extensions(profile, &point)
                .iter()
                .map(|e| {
                    json!({
                        "name": e.name(),
                        "file": relative(host, e.source()),
                        "description": e.info().description,
                    })
                })
                .collect::<Vec<_>>();
            (point, Value::Array(list))
        })
        .collect();
    json!({
        "extensions": extensions,
        "tools": listing.tools.iter().map(|t| {
            let info = t.found.handle.info();
            json!({
                "name": t.name,
                "layer": t.found.layer.kind.as_str(),
                "layer_dir": t.found.layer.label,
                "file": relative(host, &t.found.path),
                "shadows": t.shadows.iter().map(|p| relative(host, p)).collect::<Vec<_>>(),
                "description": info.description,
                "risk_level": info.risk_level.as_str(),
                "version": info.version,
                "package": t.found.handle.package(),
                "parameters": info.parameters,
            })
        }).collect::<Vec<_>>(),
        "skipped": listing.skipped.iter().map(|e| json!({
            "file": relative(host, &e.path),
            "kind": e.kind.as_str(),
            "reason": e.reason,
        })).collect::<Vec<_>>(),
    })
}
