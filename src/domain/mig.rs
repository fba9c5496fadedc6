//! MIG instances: how much of a GPU a profile holds.

/// The compute slices of a MIG profile name ("3g.40gb" -> 3, "1g.10gb+me" -> 1).
pub fn parse_mig_slices(profile: &str) -> Option<u32> {
    let (n, rest) = profile.trim().split_once('g')?;
    let n: u32 = n.parse().ok()?;
    ((1..=8).contains(&n) && rest.starts_with('.')).then_some(n)
}

/// The fraction of a GPU a MIG profile holds: `3g.40gb` -> 3/7 (4 slices on an A30).
pub fn mig_share(profile: &str, model: &str) -> f64 {
    let slices: f64 = profile.split('g').next().and_then(|n| n.parse().ok()).unwrap_or(7.0);
    let total = if model.contains("A30") { 4.0 } else { 7.0 };
    (slices / total).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_shares() {
        assert!((mig_share("3g.40gb", "NVIDIA A100-SXM4-80GB") - 3.0 / 7.0).abs() < 1e-12);
        assert!((mig_share("1g.10gb", "NVIDIA H100 80GB HBM3") - 1.0 / 7.0).abs() < 1e-12);
        assert!((mig_share("2g.12gb", "NVIDIA A30") - 0.5).abs() < 1e-12);
        assert_eq!(parse_mig_slices("1g.10gb+me"), Some(1));
        assert_eq!(parse_mig_slices("10g.1gb"), None);
    }
}
