//! The exit codes of `toolhost`, as the book's command-line page lists them, and the error
//! that makes a mistake in the command line exit with [`USAGE`].

use std::fmt;

/// A mistake in the command line: clap's parse errors, and the values the commands check
/// themselves (`--args` that is not a JSON object, an unknown `--profile`, a `--secrets` file
/// that is not there, an invalid name for `new`).
pub(crate) const USAGE: u8 = 2;

/// `call` of a tool that no layer has (1 is a tool's failure, 2 a usage mistake).
pub(crate) const UNKNOWN_TOOL: u8 = 3;

/// `call` of a tool that ran but whose audit record could not be written (with `[audit]
/// required` off; on, the call is refused and exits 1).
pub(crate) const AUDIT_FAILED: u8 = 4;

/// `call` of a tool that ended the process (called `exit`) before its call finished.
pub(crate) const PLUGIN_EXITED: u8 = 5;

/// `run` or `chat` stopped by Ctrl-C (128 + SIGINT, as shells report it).
pub(crate) const INTERRUPTED: i32 = 130;

/// A mistake in the command line, in one line: main exits with [`USAGE`].
#[derive(Debug)]
pub(crate) struct Usage(pub(crate) String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Returns early with a [`Usage`] error: `usage!("--args is not valid JSON ({e})")`.
macro_rules! usage {
    ($($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::exit::Usage(format!($($arg)*))))
    };
}
pub(crate) use usage;
