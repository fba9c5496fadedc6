//! Label lookups that survive real scrape configs: `Hostname` or `hostname`, old
//! `pod_name`/`pod_namespace`, and `exported_*` when the ServiceMonitor does not honour the
//! exporter's labels (then plain `namespace`/`pod` name the exporter itself).

use std::collections::BTreeMap;

use super::prometheus::Series;

/// How one response names a concept: the label actually used.
#[derive(Debug, Clone)]
pub struct LabelPick {
    names: Vec<String>,
}

impl LabelPick {
    /// Chooses among `candidates` for a whole response: `exported_<c>` wins where any series
    /// carries one, since then the plain label belongs to the scrape target.
    pub fn for_response(candidates: &[String], series: &[Series]) -> LabelPick {
        let exported: Vec<String> = candidates.iter().map(|c| format!("exported_{c}")).collect();
        let renamed = series.iter().any(|s| exported.iter().any(|e| s.labels.contains_key(e)));
        LabelPick { names: if renamed { exported } else { candidates.to_vec() } }
    }

    /// Any of the candidates, without the `exported_` analysis (node names).
    pub fn plain(candidates: &[String]) -> LabelPick {
        LabelPick { names: candidates.to_vec() }
    }

    pub fn get<'a>(&self, labels: &'a BTreeMap<String, String>) -> Option<&'a str> {
        self.names.iter().find_map(|n| labels.get(n)).map(String::as_str).filter(|v| !v.is_empty())
    }
}

/// A DCGM value that stands for "no data": NaN, infinities, and DCGM's blank sentinels
/// (INT64 blanks from 0x7ffffffffffffff0, FP64 blanks from 2^47, INT32 blanks from 0x7ffffff0).
pub fn sane(v: f64) -> Option<f64> {
    if !v.is_finite() || v >= 9.223_372_036_854_775e18 || (140_737_488_355_328.0..=140_737_488_355_344.0).contains(&v) || (2_147_483_632.0..2_147_483_648.0).contains(&v) {
        None
    } else {
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(pairs: &[(&str, &str)]) -> Series {
        Series { labels: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), samples: vec![] }
    }

    #[test]
    fn exported_labels_win_for_the_whole_response() {
        let cands = vec!["namespace".to_string(), "pod_namespace".to_string()];
        let with = [series(&[("namespace", "gpu-operator"), ("exported_namespace", "team-a")]), series(&[("namespace", "gpu-operator")])];
        let pick = LabelPick::for_response(&cands, &with);
        assert_eq!(pick.get(&with[0].labels), Some("team-a"));
        assert_eq!(pick.get(&with[1].labels), None, "the exporter's own namespace is not a tenant");
        let old = [series(&[("pod_namespace", "team-b")])];
        assert_eq!(LabelPick::for_response(&cands, &old).get(&old[0].labels), Some("team-b"));
    }

    #[test]
    fn blanks_and_nan_are_not_values() {
        assert_eq!(sane(9223372036854775794.0), None);
        assert_eq!(sane(f64::NAN), None);
        assert_eq!(sane(f64::INFINITY), None);
        assert_eq!(sane(140737488355328.0), None);
        assert_eq!(sane(612.345), Some(612.345));
        assert_eq!(sane(98123456789.0), Some(98123456789.0));
    }
}
