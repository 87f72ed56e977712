//! Masking text that arrives in chunks, such as a model's streamed reply.

use super::{Masked, Secrets};

/// Masks streamed text: [`push`](Self::push) returns what is safe to show now, holding back the
/// end of the text that could still become a secret value; [`finish`](Self::finish) returns
/// the rest.
///
/// ```
/// let secrets = toolhost::Secrets::parse("TOKEN=hunter2-xyz").unwrap();
/// let mut stream = secrets.stream();
/// let mut shown = stream.push("the token is hun").into_inner();
/// shown += &stream.push("ter2-x");
/// shown += &stream.push("yz, done");
/// shown += &stream.finish();
/// assert_eq!(shown, "the token is §§secret(TOKEN), done");
/// ```
#[derive(Debug)]
pub struct MaskStream<'a> {
    secrets: &'a Secrets,
    pending: String,
}

impl<'a> MaskStream<'a> {
    pub(super) fn new(secrets: &'a Secrets) -> Self {
        Self {
            secrets,
            pending: String::new(),
        }
    }

    /// Takes the next chunk; returns the masked text that can be shown now.
    pub fn push(&mut self, chunk: &str) -> Masked {
        self.pending.push_str(chunk);
        let Some(matcher) = &self.secrets.matcher else {
            return Masked::new(std::mem::take(&mut self.pending));
        };
        // A form that is not complete yet starts within the last `longest - 1` bytes, where
        // the rest of the text begins like one.
        let mut cut = matcher.partial_start(&self.pending);
        while !self.pending.is_char_boundary(cut) {
            cut -= 1;
        }
        // Never split a group of overlapping values: one that ends before `cut` cannot grow,
        // since no value still to come starts before `cut`.
        let mut group_start = 0;
        let mut straddling = None;
        matcher.pieces(&self.pending, |piece| {
            if !piece.joined {
                group_start = piece.start;
            }
            if group_start < cut && piece.end > cut {
                straddling.get_or_insert(group_start);
            }
        });
        if let Some(start) = straddling {
            cut = start;
        }
        let rest = self.pending.split_off(cut);
        let ready = std::mem::replace(&mut self.pending, rest);
        self.secrets.mask_owned(ready)
    }

    /// The rest of the text, masked.
    pub fn finish(self) -> Masked {
        self.secrets.mask_owned(self.pending)
    }
}
