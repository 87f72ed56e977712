//! Where log lines go: standard error, each line masked first with every secret in force in
//! the process ([`toolhost::mask_log_line`]: each host's secrets and each model's API key), so
//! no WARN or ERROR line, the host's or a dependency's (rmcp's, reqwest's), carries a value.

use std::io::Write;

use tracing_subscriber::fmt::MakeWriter;

/// Makes one [`MaskedLine`] per event.
pub(crate) struct MaskedStderr;

impl<'a> MakeWriter<'a> for MaskedStderr {
    type Writer = MaskedLine;

    fn make_writer(&'a self) -> MaskedLine {
        MaskedLine(Vec::with_capacity(256))
    }
}

/// One event as it is formatted; masked and written to standard error as a whole when it is
/// dropped (a value split between two writes is still found).
pub(crate) struct MaskedLine(Vec<u8>);

impl Write for MaskedLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for MaskedLine {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let masked = toolhost::mask_log_line(&text);
        let _ = std::io::stderr().lock().write_all(masked.as_bytes());
    }
}
