//! Boards replaced at one GPU slot (a node's GPU index): the rule the collector's pool and the
//! inventory report share.

/// One board seen at a slot: its UUID and when it was first and last seen (any ordered time:
/// grid cells, milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Board<'a, T> {
    pub first: T,
    pub last: T,
    pub uuid: &'a str,
}

/// The replacements among the boards seen at one slot, in time order: `(old, new)` where `new`
/// was first seen after `old` was last seen (a board swapped, a GPU fallen off the bus and back
/// under a new UUID). Each is a GPU of its own, for its own time; two boards seen at once at one
/// slot (clusters mixed under one node name) are not a replacement.
pub fn replacements<'a, T: Ord + Copy>(boards: impl IntoIterator<Item = Board<'a, T>>) -> Vec<(Board<'a, T>, Board<'a, T>)> {
    let mut by_time: Vec<Board<'a, T>> = boards.into_iter().collect();
    by_time.sort_unstable();
    by_time.windows(2).filter(|pair| pair[0].last < pair[1].first).map(|pair| (pair[0], pair[1])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_first_seen_after_the_last_one_replaced_it() {
        let b = |uuid, first, last| Board { first, last, uuid };
        let got = replacements([b("GPU-new", 30, 90), b("GPU-old", 0, 20)]);
        assert_eq!(got, vec![(b("GPU-old", 0, 20), b("GPU-new", 30, 90))]);
        // Seen at once: two GPUs at one index (mixed clusters), no replacement.
        assert!(replacements([b("GPU-a", 0, 50), b("GPU-b", 40, 90)]).is_empty());
        // Replaced twice.
        assert_eq!(replacements([b("a", 0, 9), b("b", 10, 19), b("c", 20, 29)]).len(), 2);
    }
}
