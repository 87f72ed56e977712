//! Command-line mistakes: one clear line first (`error: toolhost call: missing <NAME>`), then
//! clap's usual message with the usage and hints.

use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::CommandFactory;

use crate::Cli;

/// Prints a parse error (help and version go to stdout as usual) and returns clap's exit code.
pub(crate) fn usage_error(e: &clap::Error) -> ExitCode {
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let command = match subcommand() {
        Some(name) => format!("toolhost {name}"),
        None => "toolhost".to_owned(),
    };
    eprintln!("error: {command}: {}", summary(e));
    let _ = e.print();
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// The mistake in a few words.
fn summary(e: &clap::Error) -> String {
    let context = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => s.clone(),
        Some(ContextValue::Strings(list)) => list.join(", "),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let hint = match context(ContextKind::SuggestedArg) {
        s if s.is_empty() => String::new(),
        s => format!(" (did you mean '{s}'?)"),
    };
    match e.kind() {
        ErrorKind::MissingRequiredArgument => {
            format!("missing {}", context(ContextKind::InvalidArg))
        }
        ErrorKind::UnknownArgument => {
            format!(
                "unexpected argument '{}'{hint}",
                context(ContextKind::InvalidArg)
            )
        }
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
            let (value, arg) = (
                context(ContextKind::InvalidValue),
                context(ContextKind::InvalidArg),
            );
            match value.is_empty() {
                true => format!("{arg} needs a value"),
                false => format!("invalid value '{value}' for {arg}"),
            }
        }
        ErrorKind::InvalidSubcommand => {
            let hint = match context(ContextKind::SuggestedSubcommand) {
                s if s.is_empty() => "see `toolhost --help`".to_owned(),
                s => format!("did you mean '{s}'?"),
            };
            let given = context(ContextKind::InvalidSubcommand);
            format!("unknown command '{given}'; {hint}")
        }
        ErrorKind::MissingSubcommand | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            "a command is needed; see `toolhost --help`".to_owned()
        }
        _ => first_line(e),
    }
}

/// clap's own first line, without its `error: `.
fn first_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let line = text.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}

/// The subcommand named on the command line, if any.
fn subcommand() -> Option<String> {
    let cli = Cli::command();
    let names: Vec<String> = cli
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    std::env::args().skip(1).find(|a| names.contains(a))
}
