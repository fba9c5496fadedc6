//! Percentiles as the reports and the simulator's ledger state them.

/// The `p` percentile of `sorted` by the rank `round(p x (n - 1))` (0-based): one of the values,
/// never an interpolation; `None` for no values.
pub fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * (sorted.len() - 1) as f64).round() as usize;
    Some(sorted[rank.min(sorted.len() - 1)])
}

#[cfg(test)]
mod tests {
    use super::nearest_rank;

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(nearest_rank::<i64>(&[], 0.5), None);
        assert_eq!(nearest_rank(&[7], 0.95), Some(7));
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 0.5), Some(3)); // round(1.5) = 2
        assert_eq!(nearest_rank(&[1, 2, 3, 4, 5], 0.95), Some(5));
        assert_eq!(nearest_rank(&[1, 2, 3, 4, 5], 1.0), Some(5));
        assert_eq!(nearest_rank(&[0.5, 1.5], 0.0), Some(0.5));
    }
}
