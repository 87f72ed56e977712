//! One automaton over every form of every secret value, and the covering of overlapping
//! matches: where two values overlap (`abcd1234` and `1234wxyz` in `abcd1234wxyz`), the whole
//! stretch is hidden, so no part of either shows.

use std::collections::{HashSet, VecDeque};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use super::variants::variants;

/// Every masked form of every secret value, searched in one pass.
#[derive(Debug, Clone)]
pub(super) struct Matcher {
    automaton: AhoCorasick,
    /// The key (index into the secrets' pairs) of each pattern.
    key_of: Vec<u32>,
    /// Length in bytes of the longest pattern: a match that is not complete yet starts within
    /// the last `longest - 1` bytes of a text.
    pub(super) longest: usize,
}

/// A stretch of text to replace with the placeholder of `key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Piece {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) key: usize,
    /// Whether it continues the previous piece (`start` is that piece's `end`): the values
    /// overlap, and the whole stretch is one group.
    pub(super) joined: bool,
}

/// One match.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
    key: usize,
}

impl Matcher {
    /// An automaton over the forms of each `(key index, value)`; `None` without values.
    pub(super) fn build<'a>(values: impl Iterator<Item = (usize, &'a str)>) -> Option<Self> {
        let mut patterns = Vec::new();
        let mut key_of = Vec::new();
        let mut seen = HashSet::new();
        for (key, value) in values {
            for form in variants(value) {
                if seen.insert(form.clone()) {
                    patterns.push(form);
                    key_of.push(key as u32);
                }
            }
        }
        if patterns.is_empty() {
            return None;
        }
        // Standard semantics: an overlapping search reports every match, so overlapping values
        // can be covered whole. A contiguous NFA rather than a full DFA: with 1,000 values of
        // 8 to 40 bytes and their ~20 forms each, the DFA takes hundreds of MB and seconds to
        // build (see BENCHMARKS.md "Secret masking").
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .build(&patterns)
            .expect("secret values form a valid automaton");
        let longest = patterns.iter().map(String::len).max().unwrap_or(0);
        Some(Self {
            automaton,
            key_of,
            longest,
        })
    }

    /// How many forms are searched for.
    pub(super) fn patterns(&self) -> usize {
        self.key_of.len()
    }

    /// The automaton's heap memory in bytes.
    pub(super) fn memory(&self) -> usize {
        self.automaton.memory_usage()
    }

    /// Calls `emit` with the pieces to replace in `text`, in order, in one pass. Overlapping
    /// matches form a group, covered by a chain of pieces: the one that starts first (the
    /// longest of those), then each time the one that reaches furthest among those that start
    /// inside what is covered so far. A match inside another is part of it.
    pub(super) fn pieces(&self, text: &str, mut emit: impl FnMut(Piece)) {
        let mut cover = Cover::default();
        for m in self.automaton.find_overlapping_iter(text) {
            let span = Span {
                start: m.start(),
                end: m.end(),
                key: self.key_of[m.pattern().as_usize()] as usize,
            };
            cover.push(span);
            // Matches are found in the order of their ends, so no later one starts before
            // `end - longest`.
            cover.settle(m.end().saturating_sub(self.longest), &mut emit);
        }
        cover.settle(usize::MAX, &mut emit);
    }
}

/// The matches not settled yet, as a staircase: each starts after and ends after the one
/// before (a match inside another is dropped). It holds at most `longest` matches.
#[derive(Debug, Default)]
struct Cover {
    stairs: VecDeque<Span>,
    /// The last piece emitted while its group may still go on.
    open: Option<Span>,
}

impl Cover {
    fn push(&mut self, m: Span) {
        if self.open.is_some_and(|open| m.end <= open.end) {
            return; // inside what is already covered
        }
        if let Some(back) = self.stairs.back() {
            // Ends never decrease: `m` is inside `back` only if both end together.
            if m.end == back.end && m.start >= back.start {
                return;
            }
        }
        while self.stairs.back().is_some_and(|back| back.start >= m.start) {
            self.stairs.pop_back(); // inside `m`
        }
        self.stairs.push_back(m);
    }

    /// Emits the pieces that no match starting at `horizon` or later can change.
    fn settle(&mut self, horizon: usize, emit: &mut impl FnMut(Piece)) {
        loop {
            match self.open {
                None => {
                    let Some(&first) = self.stairs.front() else {
                        return;
                    };
                    if first.start >= horizon {
                        return; // a match that starts earlier could still come
                    }
                    self.stairs.pop_front();
                    emit(Piece {
                        start: first.start,
                        end: first.end,
                        key: first.key,
                        joined: false,
                    });
                    self.open = Some(first);
                }
                Some(open) => {
                    if horizon < open.end {
                        return; // a match that overlaps the group could still come
                    }
                    let mut next = None;
                    while let Some(&s) = self.stairs.front().filter(|s| s.start < open.end) {
                        next = Some(s);
                        self.stairs.pop_front();
                    }
                    self.open = next.map(|n| {
                        emit(Piece {
                            start: open.end,
                            end: n.end,
                            key: n.key,
                            joined: true,
                        });
                        Span {
                            start: open.end,
                            ..n
                        }
                    });
                }
            }
        }
    }
}
