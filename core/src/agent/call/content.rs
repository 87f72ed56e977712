//! A tool's content blocks as the history keeps them: the model reads text only, so each
//! block after the message is described ([`Content::describe`]), and when the agent records a
//! session the bytes of images, audio and binary resources are saved beside it
//! (`content/<log id>-<n>.<subtype>`) and the description names the file, instead of the
//! history holding them inline. Images also stay with the tool result
//! ([`HistoryMessage::images`](crate::HistoryMessage::images)), for models that see them.

use std::path::{Path, PathBuf};

use plugin_api::{Content, Response};

use crate::agent::call::context::CallContext;
use crate::transcript::Image;

impl CallContext {
    /// The message of `response`, then each of its blocks on a line of its own, described;
    /// the bytes of binary blocks saved beside the session, if one is recorded. Also the
    /// images, each with the file it was saved to.
    pub(crate) fn describe_content(&self, response: &Response) -> (String, Vec<Image>) {
        let log_id = self.log_id;
        let mut whole = response.message.trim().to_owned();
        let mut images = Vec::new();
        let session = self.agent.transcript.session_dir();
        for (n, block) in response.content.iter().enumerate() {
            if !whole.is_empty() {
                whole.push('\n');
            }
            let mut line = block.describe();
            let saved = session
                .as_deref()
                .and_then(|dir| save_bytes(dir, log_id, n + 1, block));
            if let Some(relative) = &saved {
                // Inside the closing bracket: `[image: image/png, 68 bytes, saved as ...]`.
                line.pop();
                line.push_str(&format!(", saved as {}]", relative.display()));
            }
            if let Content::Image { data, mime_type } = block {
                images.push(Image::new(mime_type.clone(), data.as_slice().into(), saved));
            }
            whole.push_str(&line);
        }
        (whole, images)
    }
}

/// Saves the bytes of a binary block as `content/<log id>-<n>.<subtype>` in the session
/// folder `dir`; the path relative to it, or `None` for a block without bytes (or when the
/// file cannot be written: said in the log).
fn save_bytes(dir: &Path, log_id: u64, n: usize, block: &Content) -> Option<PathBuf> {
    let (bytes, mime) = match block {
        Content::Image { data, mime_type } | Content::Audio { data, mime_type } => {
            (data, mime_type.as_str())
        }
        Content::Resource { resource } => (
            resource.blob.as_ref()?,
            resource.mime_type.as_deref().unwrap_or(""),
        ),
        _ => return None,
    };
    // `image/png` is saved as `.png`, a MIME type without a plain subtype as `.bin`.
    let subtype = mime.split_once('/').map_or("", |(_, s)| s);
    let extension = match !subtype.is_empty() && subtype.chars().all(|c| c.is_ascii_alphanumeric())
    {
        true => subtype,
        false => "bin",
    };
    let relative = Path::new("content").join(format!("{log_id}-{n}.{extension}"));
    let path = dir.join(&relative);
    let written =
        std::fs::create_dir_all(dir.join("content")).and_then(|()| std::fs::write(&path, bytes));
    match written {
        Ok(()) => Some(relative),
        Err(e) => {
            tracing::warn!(
                "cannot save a tool's {mime} block to {}: {e}",
                path.display()
            );
            None
        }
    }
}
