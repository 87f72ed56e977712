//! A client's text echoed in an error (an unknown tool's name, a resource's URI, a method):
//! masked with every secret the process holds, escaped so it cannot draw on a terminal, and
//! cut to [`MAX_ECHO`] characters, so a client cannot make the server repeat a secret nor a
//! megabyte in its answer and its log.

use std::fmt::Write;

/// The most characters of a client's text an error repeats.
pub(crate) const MAX_ECHO: usize = 200;

/// `text` as an error repeats it (see the module).
pub(crate) fn echoed(text: &str) -> String {
    let masked = toolhost::mask_log_line(text);
    let mut shown = String::new();
    let mut chars = masked.char_indices();
    for (_, c) in chars.by_ref().take(MAX_ECHO) {
        let _ = write!(
            shown,
            "{}",
            toolhost::package::Shown(c.encode_utf8(&mut [0; 4]))
        );
    }
    if let Some((at, _)) = chars.next() {
        let _ = write!(shown, "... ({} bytes in all)", masked.len().max(at));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_and_escaped() {
        assert_eq!(echoed("greet"), "greet");
        assert_eq!(echoed("a\u{202e}b\n"), "a\\u{202e}b\\u{a}");
        let long = "x".repeat(1 << 20);
        let shown = echoed(&long);
        assert!(
            shown.ends_with("... (1048576 bytes in all)"),
            "{}",
            &shown[190..]
        );
        assert!(shown.len() < 300);
    }
}
