//! Covering overlapping matches: where two values overlap (`abcd1234` and `1234wxyz` in
//! `abcd1234wxyz`), the whole stretch is hidden, so no part of either shows.

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
pub(super) struct Span {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) key: usize,
}

/// Turns matches, given in the order of their starts, into pieces. Overlapping matches form a
/// group, covered by a chain: the longest of those that start first, then each time the one
/// that reaches furthest among those that start inside what is covered so far. A match inside
/// what is covered adds nothing.
#[derive(Debug, Default)]
pub(super) struct Cover {
    /// Where the group's last emitted piece ends, while the group may go on.
    reach: Option<usize>,
    /// The best next link of the chain so far (the group's first, if `reach` is `None`).
    next: Option<Span>,
}

impl Cover {
    /// Takes the next match (none starts before the previous one).
    pub(super) fn push(&mut self, m: Span, emit: &mut impl FnMut(Piece)) {
        loop {
            let Some(next) = self.next else {
                match self.reach {
                    Some(reach) if m.start < reach => {
                        if m.end > reach {
                            self.next = Some(m);
                        }
                    }
                    _ => {
                        self.reach = None; // the group ended: `m` starts a new one
                        self.next = Some(m);
                    }
                }
                return;
            };
            let competes = match self.reach {
                Some(reach) => m.start < reach,
                None => m.start == next.start,
            };
            if competes {
                if m.end > next.end {
                    self.next = Some(m);
                }
                return;
            }
            self.link(emit); // `next` is final: no later match competes with it
        }
    }

    /// Emits `next` as the chain's next piece.
    fn link(&mut self, emit: &mut impl FnMut(Piece)) {
        if let Some(next) = self.next.take() {
            emit(Piece {
                start: self.reach.unwrap_or(next.start),
                end: next.end,
                key: next.key,
                joined: self.reach.is_some(),
            });
            self.reach = Some(next.end);
        }
    }

    /// Emits what is left.
    pub(super) fn finish(mut self, emit: &mut impl FnMut(Piece)) {
        self.link(emit);
    }
}
