//! Finding every form of every secret value in one pass: a DFA over the first 4 bytes of each
//! form finds where one may start, and a hash table keyed by its first bytes confirms it.
//!
//! A full DFA over the whole forms is fast but huge: with 1,000 values of 8 to 40 bytes and
//! their ~14 forms each (1.2 MB of patterns) it took 527 MB and 2.7 s to build, and the
//! default contiguous NFA masked at only 64 MB/s (see BENCHMARKS.md "Secret masking"). The DFA
//! over 4-byte heads takes about 7 MB and 30 ms, and the table is looked at only where a head
//! matched.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use rustc_hash::{FxHashMap, FxHashSet};

use super::cover::{Cover, Piece, Span};
use super::decoded::{decode_tail, Decoded};
use super::variants::variants;
use super::MIN_MASKED_LEN;

/// The bytes of each form the automaton looks for (every form has at least this many).
const HEAD: usize = MIN_MASKED_LEN;
/// The most bytes of a form that key the table.
const KEY: usize = 16;

/// Every masked form of every secret value.
#[derive(Debug, Clone)]
pub(super) struct Matcher {
    /// Over the distinct heads; pattern `i` is `key_lens[i]`.
    automaton: AhoCorasick,
    /// For each head, the lengths of the keys of the forms that start with it.
    key_lens: Vec<Vec<u8>>,
    /// The forms (their indexes in `forms`) by key: their first `KEY` bytes, or all of them.
    by_key: FxHashMap<Box<[u8]>, Vec<u32>>,
    /// The index of each head.
    heads: FxHashMap<[u8; HEAD], u32>,
    /// The first 1 to 3 bytes of each head.
    starts: FxHashSet<Box<[u8]>>,
    /// Each form, and the index of its key among the secrets.
    forms: Vec<(Box<str>, usize)>,
    /// Length in bytes of the longest form: one that is not complete yet starts within the
    /// last `longest - 1` bytes of a text.
    pub(super) longest: usize,
    /// Length in bytes of the longest value: URL-encoded, it takes at most three times that.
    longest_value: usize,
}

impl Matcher {
    /// The forms of each `(key index, value)`; `None` without values.
    pub(super) fn build<'a>(values: impl Iterator<Item = (usize, &'a str)>) -> Option<Self> {
        let mut forms = Vec::new();
        let mut seen = FxHashSet::default();
        let mut longest_value = 0;
        for (key, value) in values {
            longest_value = longest_value.max(value.len());
            for form in variants(value) {
                if form.len() >= HEAD && seen.insert(form.clone()) {
                    forms.push((form.into_boxed_str(), key));
                }
            }
        }
        if forms.is_empty() {
            return None;
        }
        let mut heads: FxHashMap<&[u8], usize> = FxHashMap::default();
        let mut key_lens: Vec<Vec<u8>> = Vec::new();
        let mut by_key: FxHashMap<Box<[u8]>, Vec<u32>> = FxHashMap::default();
        for (i, (form, _)) in forms.iter().enumerate() {
            let bytes = form.as_bytes();
            let head = *heads.entry(&bytes[..HEAD]).or_insert_with(|| {
                key_lens.push(Vec::new());
                key_lens.len() - 1
            });
            let key = &bytes[..bytes.len().min(KEY)];
            if !key_lens[head].contains(&(key.len() as u8)) {
                key_lens[head].push(key.len() as u8);
            }
            by_key.entry(key.into()).or_default().push(i as u32);
        }
        let starts = heads
            .keys()
            .flat_map(|h| (1..HEAD).map(|n| Box::from(&h[..n])))
            .collect();
        let mut head_list = vec![&[][..]; heads.len()];
        heads.iter().for_each(|(h, &i)| head_list[i] = h);
        // Every head has the same length, so the heads are found in the order of their starts.
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&head_list)
            .expect("secret values form a valid automaton");
        let longest = forms.iter().map(|(f, _)| f.len()).max().unwrap_or(0);
        let heads = head_list
            .iter()
            .enumerate()
            .map(|(i, h)| ((*h).try_into().expect("a head"), i as u32))
            .collect();
        Some(Self {
            automaton,
            key_lens,
            by_key,
            heads,
            starts,
            forms,
            longest,
            longest_value,
        })
    }

    /// Where a form that `text` does not hold whole yet could start: the first place in its
    /// last `longest - 1` bytes from which the rest of `text` may be the start of a longer
    /// form, or the end of `text`.
    ///
    /// URL-encoded text is looked at decoded too: the place from which it may, decoded, begin
    /// a form (an escape still arriving at its end included) is held back as well.
    pub(super) fn partial_start(&self, text: &str) -> usize {
        let bytes = text.as_bytes();
        let from = bytes.len().saturating_sub(self.longest.saturating_sub(1));
        let direct = (from..bytes.len())
            .find(|&at| self.may_begin_form(&bytes[at..]))
            .unwrap_or(bytes.len());
        let window = self.longest_value.saturating_mul(3).saturating_add(2);
        let from = bytes.len().saturating_sub(window);
        if memchr::memchr(b'%', &bytes[from..]).is_none() {
            return direct;
        }
        (from..direct)
            .find(|&at| {
                let (rest, arriving) = decode_tail(&bytes[at..]);
                (arriving && rest.is_empty()) || (!rest.is_empty() && self.may_begin_form(&rest))
            })
            .unwrap_or(direct)
    }

    /// Whether some form is longer than `rest` and starts with it (when unsure: true).
    fn may_begin_form(&self, rest: &[u8]) -> bool {
        let Some(head) = rest.get(..HEAD) else {
            return self.starts.contains(rest);
        };
        let Some(&head) = self.heads.get(head) else {
            return false;
        };
        self.key_lens[head as usize].iter().any(|&len| {
            let Some(key) = rest.get(..len as usize) else {
                return true; // `rest` is shorter than the key: it may be its start
            };
            self.by_key.get(key).into_iter().flatten().any(|&i| {
                let form = self.forms[i as usize].0.as_bytes();
                form.len() > rest.len() && form.starts_with(rest)
            })
        })
    }

    /// How many forms are searched for.
    pub(super) fn patterns(&self) -> usize {
        self.forms.len()
    }

    /// The heap memory in bytes of the automaton and the table.
    pub(super) fn memory(&self) -> usize {
        let forms: usize = self.forms.iter().map(|(f, _)| f.len() + 24).sum();
        let keys: usize = self
            .by_key
            .iter()
            .map(|(k, v)| k.len() + v.len() * 4 + 48)
            .sum();
        self.automaton.memory_usage() + forms + keys + self.key_lens.len() * 32
    }

    /// Calls `emit` with the pieces to replace in `text`, in order: overlapping matches are
    /// covered whole (see [`Cover`]). The forms are looked for in one pass over the text, and
    /// in one more over its [decoded](Decoded) view when it holds a URL escape or wrapped
    /// base64.
    pub(super) fn pieces(&self, text: &str, mut emit: impl FnMut(Piece)) {
        let bytes = text.as_bytes();
        let mut cover = Cover::default();
        let Some(decoded) = Decoded::of(bytes) else {
            self.spans(bytes, |span| cover.push(span, &mut emit));
            cover.finish(&mut emit);
            return;
        };
        let mut spans = Vec::new();
        self.spans(bytes, |span| spans.push(span));
        self.spans(&decoded.bytes, |span| {
            let (start, end) = decoded.original(span.start, span.end);
            spans.push(Span { start, end, ..span });
        });
        spans.sort_by_key(|span| span.start);
        for span in spans {
            cover.push(span, &mut emit);
        }
        cover.finish(&mut emit);
    }

    /// Calls `found` with every form found in `bytes`, in the order of their starts.
    fn spans(&self, bytes: &[u8], mut found: impl FnMut(Span)) {
        for head in self.automaton.find_overlapping_iter(bytes) {
            let start = head.start();
            let rest = &bytes[start..];
            for &len in &self.key_lens[head.pattern().as_usize()] {
                let Some(key) = rest.get(..len as usize) else {
                    continue;
                };
                for &i in self.by_key.get(key).into_iter().flatten() {
                    let (form, key) = &self.forms[i as usize];
                    if rest.starts_with(form.as_bytes()) {
                        let end = start + form.len();
                        found(Span {
                            start,
                            end,
                            key: *key,
                        });
                    }
                }
            }
        }
    }
}
