//! The host's own file descriptors, out of an in-process plugin's way.
//!
//! A plugin that runs in the host's process shares its descriptors. One that closes fd 1
//! would make the next file the host opens become fd 1, so that what the host prints lands in
//! that file (the audit log, a session file); one that prints writes into the host's output.
//! So, on Unix:
//!
//! - [`host_stdout`] moves standard output to a private descriptor (close-on-exec, at
//!   [`PRIVATE_FD_FLOOR`] or above) once per process and points fd 1 at standard error: what
//!   a plugin prints goes to the log, and what the host prints through the returned file goes
//!   where standard output went. `toolhost call`, `run` and `serve-mcp` over stdio use it.
//! - [`above_floor`] moves a file the host keeps open (the audit log, the session files) to a
//!   close-on-exec descriptor at [`PRIVATE_FD_FLOOR`] or above, where no `open` of a plugin
//!   lands by accident (the lowest free descriptor is taken first).
//!
//! Elsewhere both leave things where they are.

use std::fs::File;

/// The lowest descriptor the host keeps its own files and output at: above those a plugin
/// (or a library it loads) would reuse by accident.
pub const PRIVATE_FD_FLOOR: i32 = 64;

/// `file` at a close-on-exec descriptor of [`PRIVATE_FD_FLOOR`] or above (its first
/// descriptor closed); where that fails (no descriptor left up there), `file` as it was.
pub fn above_floor(file: File) -> File {
    #[cfg(unix)]
    {
        match rustix::io::fcntl_dupfd_cloexec(&file, PRIVATE_FD_FLOOR) {
            Ok(high) => File::from(high),
            Err(_) => file,
        }
    }
    #[cfg(not(unix))]
    file
}

/// The host's standard output: on Unix, the first call moves it to a private descriptor
/// (close-on-exec, at [`PRIVATE_FD_FLOOR`] or above) and points fd 1 at standard error; every
/// call returns a handle to that private descriptor. Print the host's own output through it
/// (`println!` now goes to standard error, with whatever a plugin prints).
pub fn host_stdout() -> std::io::Result<File> {
    #[cfg(unix)]
    {
        use std::io::Write as _;
        use std::sync::OnceLock;
        static PRIVATE: OnceLock<std::os::fd::OwnedFd> = OnceLock::new();
        if PRIVATE.get().is_none() {
            // What was printed before goes out first, where it was meant to.
            std::io::stdout().flush()?;
            let private = rustix::io::fcntl_dupfd_cloexec(std::io::stdout(), PRIVATE_FD_FLOOR)?;
            if PRIVATE.set(private).is_ok() {
                rustix::stdio::dup2_stdout(std::io::stderr())?;
            }
        }
        let private = PRIVATE.get().expect("set above");
        Ok(File::from(rustix::io::fcntl_dupfd_cloexec(
            private,
            PRIVATE_FD_FLOOR,
        )?))
    }
    #[cfg(not(unix))]
    Err(std::io::Error::other(
        "a private standard output needs Unix",
    ))
}
