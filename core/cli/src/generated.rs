//! `toolhost completions` and `toolhost man`: texts generated from the command line's own clap
//! definition, so they never drift from it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::CommandFactory as _;

use crate::{Cli, Global};

/// Print a completion script for SHELL to standard output, generated from this command's
/// own definition (bash: `toolhost completions bash > /etc/bash_completion.d/toolhost`).
#[derive(clap::Args)]
pub(crate) struct Completions {
    /// The shell to complete for.
    shell: clap_complete::Shell,
}

impl Completions {
    /// `toolhost completions SHELL`.
    pub(crate) fn run(self, _: &Global) -> Result<ExitCode> {
        let mut command = Cli::command();
        // Generated into memory and written here: clap_complete panics on a write error, and
        // a closed pipe (`toolhost completions zsh | head -1`) must end quietly.
        let mut script = Vec::new();
        clap_complete::generate(self.shell, &mut command, "toolhost", &mut script);
        std::io::Write::write_all(&mut std::io::stdout().lock(), &script)?;
        Ok(ExitCode::SUCCESS)
    }
}

/// Print the man page of `toolhost` (roff) to standard output, or with --out write one page
/// per command (toolhost.1, toolhost-list.1, ...) into a folder.
#[derive(clap::Args)]
pub(crate) struct Man {
    /// Write toolhost.1 and a page per command into this folder instead.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

impl Man {
    /// `toolhost man`: the page of `toolhost` on standard output, or every page into `--out`.
    pub(crate) fn run(self, _: &Global) -> Result<ExitCode> {
        match self.out {
            Some(dir) => {
                let dir = dir.as_path();
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
}
