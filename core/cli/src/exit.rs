//! The exit codes of `toolhost`, listed once ([`CODES`], shown by `toolhost --help`), and the
//! error that makes a mistake in the command line exit with [`USAGE`].

use std::fmt;

/// Declares each exit code as a constant and writes them all, in order, into [`CODES`] and
/// [`HELP`]: the one list, which `toolhost --help` shows (and the book's generated
/// reference with it).
macro_rules! exit_codes {
    ($($(#[$doc:meta])* $name:ident: $type:ty = $code:literal, $meaning:literal;)*) => {
        $(
            $(#[$doc])*
            #[allow(dead_code)] // some are only in the list (0 and 1 are ExitCode's own)
            pub(crate) const $name: $type = $code;
        )*
        /// Every exit code and what it means, in order.
        #[allow(dead_code)]
        pub(crate) const CODES: &[(i32, &str)] = &[$(($code, $meaning)),*];
        /// The exit codes, as the end of `toolhost --help` lists them.
        pub(crate) const HELP: &str = concat!(
            "Exit codes:\n",
            $("  ", stringify!($code), "  ", $meaning, "\n",)*
        );
    };
}

exit_codes! {
    /// Success.
    SUCCESS: u8 = 0, "success (also output cut short by a closed pipe)";
    /// An error while running.
    FAILURE: u8 = 1, "an error while running: a tool that failed, a file that cannot be read, \
        a broken audit chain, a session that failed";
    /// A mistake in the command line: clap's parse errors, and the values the commands check
    /// themselves.
    USAGE: u8 = 2, "a mistake in the command line: clap's (an unknown option, a missing \
        argument), --args that is not a JSON object, a --profile no layer has, a --secrets \
        file that is not there, an invalid name for `new`";
    /// `call` of a tool that no layer has.
    UNKNOWN_TOOL: u8 = 3, "`call` of a tool that no layer has (the Unknown tool's text, what a \
        model would get, is still printed)";
    /// `call` of a tool whose audit record could not be written.
    AUDIT_FAILED: u8 = 4, "`call` of a tool whose audit record could not be written: the tool \
        ran, or with `[audit] required = true` it was refused before it ran";
    /// `call` of a tool that ended the process before its call finished.
    PLUGIN_EXITED: u8 = 5, "`call` of a tool that ended the process (called `exit`) before its \
        call finished";
    /// Ended by SIGINT: 128 + its number, as shells report it.
    INTERRUPTED: i32 = 130, "`run` or `chat` stopped by a second Ctrl-C; `serve-mcp`, `watch` or \
        `chat` ended by a second SIGINT while stopping";
    /// Ended by SIGTERM: 128 + its number.
    TERMINATED: i32 = 143, "`serve-mcp`, `watch` or `chat` ended by a second SIGTERM while \
        stopping (the first stops it gracefully, exit 0)";
}

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
