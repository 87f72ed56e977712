//! `toolhost prompt`: the system prompt a profile's agent starts with.

use std::process::ExitCode;

use anyhow::Result;

use crate::{check_profile, Global};

/// The system prompt for a profile: its prompt fragments, the tools section and its skills (each `skills/<name>/SKILL.md` of its layers).
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The agent profile.
    #[arg(long, short, default_value = "default")]
    profile: String,
}

impl Args {
    /// `toolhost prompt`: the fragments and the tools section, once the MCP servers settled.
    pub(crate) fn run(self, global: &Global) -> Result<ExitCode> {
        let host = global.host()?;
        check_profile(&host, &self.profile)?;
        crate::mcp::settle(&host, &self.profile)?;
        println!("{}", host.system_prompt_parts(&self.profile).join("\n\n"));
        Ok(ExitCode::SUCCESS)
    }
}
