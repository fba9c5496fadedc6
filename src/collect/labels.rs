//! Label lookups that survive real scrape configs: `Hostname` or `hostname`, old
//! `pod_name`/`pod_namespace`, and `exported_*` when the ServiceMonitor does not honour the
//! exporter's labels (then plain `namespace`/`pod` name the scrape target itself). Every series
//! is read by its own labels: one window may mix conventions (`honorLabels` changed mid-month,
//! two ServiceMonitors, two clusters federated).

use std::collections::BTreeMap;

use super::prometheus::Series;

/// How a series names a concept: the `exported_` forms of the candidates where the series
/// carries one, else the candidates themselves.
#[derive(Debug, Clone)]
pub struct LabelPick {
    names: Vec<String>,
    exported: Vec<String>,
}

impl LabelPick {
    /// A workload label (namespace, pod, container): `exported_<c>` wins on every series that
    /// carries it, since there the plain label belongs to the scrape target.
    pub fn workload(candidates: &[String]) -> LabelPick {
        LabelPick { names: candidates.to_vec(), exported: candidates.iter().map(|c| format!("exported_{c}")).collect() }
    }

    /// Any of the candidates, without the `exported_` analysis (node names).
    pub fn plain(candidates: &[String]) -> LabelPick {
        LabelPick { names: candidates.to_vec(), exported: Vec::new() }
    }

    pub fn get<'a>(&self, labels: &'a BTreeMap<String, String>) -> Option<&'a str> {
        let find = |names: &[String]| names.iter().find_map(|n| labels.get(n)).map(String::as_str).filter(|v| !v.is_empty());
        find(&self.exported).or_else(|| find(&self.names))
    }

    /// Whether this series carries the `exported_` form of the concept.
    pub fn is_exported(&self, labels: &BTreeMap<String, String>) -> bool {
        self.exported.iter().any(|n| labels.contains_key(n))
    }
}

/// The workload a DCGM series is labelled with: `(namespace, pod, container)`, read per series.
/// A series without `exported_*` whose plain pod starts with one of `exporter_pods` is the
/// exporter's own (a ServiceMonitor without `honorLabels`, on a GPU no pod holds): no workload.
#[derive(Debug, Clone)]
pub struct WorkloadLabels {
    namespace: LabelPick,
    pod: LabelPick,
    container: LabelPick,
    exporter_pods: Vec<String>,
}

pub type Holder = (String, String, Option<String>);

impl WorkloadLabels {
    pub fn new(names: &crate::config::LabelNames) -> WorkloadLabels {
        WorkloadLabels {
            namespace: LabelPick::workload(&names.namespace),
            pod: LabelPick::workload(&names.pod),
            container: LabelPick::workload(&names.container),
            exporter_pods: names.exporter_pods.clone(),
        }
    }

    /// The convention a series with workload labels follows; None without any.
    pub fn convention(&self, labels: &BTreeMap<String, String>) -> Option<Convention> {
        self.pod.get(labels)?;
        if self.namespace.is_exported(labels) || self.pod.is_exported(labels) {
            Some(Convention::Exported)
        } else if self.holder(labels).is_some() {
            Some(Convention::Plain)
        } else {
            Some(Convention::ExporterOwn)
        }
    }

    pub fn holder(&self, labels: &BTreeMap<String, String>) -> Option<Holder> {
        let (ns, pod) = (self.namespace.get(labels)?, self.pod.get(labels)?);
        let exported = self.namespace.is_exported(labels) || self.pod.is_exported(labels);
        if !exported && self.exporter_pods.iter().any(|p| !p.is_empty() && pod.starts_with(p.as_str())) {
            return None;
        }
        Some((ns.to_string(), pod.to_string(), self.container.get(labels).map(str::to_string)))
    }
}

/// One series per label set once the `replica_labels` are dropped: an HA pair's copies of a
/// series (Thanos Query without deduplication, a Mimir tenant fed by both replicas) become one,
/// as Thanos' deduplication makes it: the copy with the most samples, its missed scrapes filled
/// from the others (a sample of another copy is taken where none of the result lies within
/// three quarters of the first copy's scrape interval). Both scraped the same target, so the
/// result keeps one sample per scrape and its scrape interval. Returns the series and how many
/// copies were folded into others.
pub fn collapse_replicas(series: Vec<Series>, replica_labels: &[String]) -> (Vec<Series>, usize) {
    if replica_labels.is_empty() || !series.iter().any(|s| replica_labels.iter().any(|l| s.labels.contains_key(l))) {
        return (series, 0);
    }
    let mut groups: BTreeMap<BTreeMap<String, String>, Vec<Vec<(i64, f64)>>> = BTreeMap::new();
    let mut copies = 0;
    for mut s in series {
        for l in replica_labels {
            s.labels.remove(l);
        }
        let g = groups.entry(s.labels).or_default();
        copies += usize::from(!g.is_empty());
        g.push(s.samples);
    }
    let out = groups.into_iter().map(|(labels, copies)| Series { labels, samples: dedup_copies(copies) }).collect();
    (out, copies)
}

fn dedup_copies(mut copies: Vec<Vec<(i64, f64)>>) -> Vec<(i64, f64)> {
    if copies.len() == 1 {
        return copies.pop().expect("one copy");
    }
    copies.sort_by_key(|c| std::cmp::Reverse(c.len()));
    let mut out: BTreeMap<i64, f64> = copies[0].iter().copied().collect();
    let near = super::prometheus::median_gap(&copies[0]).map_or(0, |g| g * 3 / 4);
    for other in &copies[1..] {
        for &(t, v) in other {
            let before = out.range(..=t).next_back().is_some_and(|(&p, _)| t - p < near.max(1));
            let after = out.range(t..).next().is_some_and(|(&n, _)| n - t < near.max(1));
            if !before && !after {
                out.insert(t, v);
            }
        }
    }
    out.into_iter().collect()
}

/// How a DCGM series names its workload, for the run's log of conventions per node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Convention {
    /// `exported_namespace`/`exported_pod`: a ServiceMonitor without `honorLabels`.
    Exported,
    /// Plain `namespace`/`pod` naming the workload (`honorLabels: true`).
    Plain,
    /// Plain labels naming the exporter's own pod (no `honorLabels`, on a GPU no pod holds).
    ExporterOwn,
}

impl Convention {
    pub fn label(self) -> &'static str {
        match self {
            Convention::Exported => "exported_namespace/exported_pod",
            Convention::Plain => "namespace/pod (honorLabels)",
            Convention::ExporterOwn => "the exporter's own pod (prometheus.labels.exporter_pods)",
        }
    }
}

/// A DCGM value that stands for "no data": NaN, infinities, and DCGM's blank sentinels
/// (INT64 blanks from 0x7ffffffffffffff0, FP64 blanks from 2^47, INT32 blanks from 0x7ffffff0).
pub fn sane(v: f64) -> Option<f64> {
    if !v.is_finite()
        || v >= 9.223_372_036_854_775e18
        || (140_737_488_355_328.0..=140_737_488_355_344.0).contains(&v)
        || (2_147_483_632.0..2_147_483_648.0).contains(&v)
    {
        None
    } else {
        Some(v)
    }
}

/// Labels a Thanos, Mimir or federated Prometheus commonly tags each cluster's series with (an
/// external label). Where `prometheus.cluster_label` is unset and one of these has several
/// values, the clusters would be read as one pool: `collect` warns and `check` says which label
/// to set.
pub const CLUSTER_LABEL_CANDIDATES: [&str; 4] = ["cluster", "k8s_cluster", "cluster_name", "kubernetes_cluster"];

/// The first of [`CLUSTER_LABEL_CANDIDATES`] with more than one value over `series`, with its
/// values (sorted, at most 10 of them).
pub fn mixed_clusters<'a>(series: impl Iterator<Item = &'a Series> + Clone) -> Option<(&'static str, Vec<String>)> {
    CLUSTER_LABEL_CANDIDATES.iter().find_map(|label| {
        let mut values = std::collections::BTreeSet::new();
        for s in series.clone() {
            if let Some(v) = s.labels.get(*label).filter(|v| !v.is_empty()) {
                values.insert(v.as_str());
            }
        }
        (values.len() > 1).then(|| (*label, values.into_iter().take(10).map(String::from).collect()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(pairs: &[(&str, &str)]) -> Series {
        Series { labels: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), samples: vec![] }
    }

    #[test]
    fn exported_labels_win_on_the_series_that_carry_them() {
        let cands = vec!["namespace".to_string(), "pod_namespace".to_string()];
        let pick = LabelPick::workload(&cands);
        let with = series(&[("namespace", "gpu-operator"), ("exported_namespace", "team-a")]);
        assert_eq!(pick.get(&with.labels), Some("team-a"));
        let plain = series(&[("namespace", "team-c")]);
        assert_eq!(pick.get(&plain.labels), Some("team-c"), "a series without exported_* keeps its own namespace");
        let old = series(&[("pod_namespace", "team-b")]);
        assert_eq!(pick.get(&old.labels), Some("team-b"));
    }

    /// One window, three conventions: honorLabels off (exported_* on a held GPU, the exporter's
    /// own labels on an idle one), honorLabels on (plain labels are the workload's).
    #[test]
    fn each_series_names_its_own_holder() {
        let w = WorkloadLabels::new(&crate::config::LabelNames::default());
        let renamed = series(&[
            ("namespace", "gpu-operator"),
            ("pod", "nvidia-dcgm-exporter-7xk2p"),
            ("container", "nvidia-dcgm-exporter"),
            ("exported_namespace", "team-a"),
            ("exported_pod", "train-0"),
            ("exported_container", "main"),
        ]);
        assert_eq!(w.holder(&renamed.labels), Some(("team-a".into(), "train-0".into(), Some("main".into()))));
        let idle = series(&[("namespace", "gpu-operator"), ("pod", "nvidia-dcgm-exporter-7xk2p"), ("container", "nvidia-dcgm-exporter")]);
        assert_eq!(w.holder(&idle.labels), None, "the exporter itself holds no GPU");
        let honoured = series(&[("namespace", "team-b"), ("pod", "infer-1"), ("container", "srv")]);
        assert_eq!(w.holder(&honoured.labels), Some(("team-b".into(), "infer-1".into(), Some("srv".into()))));
    }

    /// An HA pair's copies of one series, scraped 7 s apart every 60 s, each missing scrapes:
    /// one series, one sample per scrape, the fuller copy's gap filled from the other; a series
    /// without the replica label is left alone.
    #[test]
    fn replica_copies_are_one_series() {
        let replicas = vec!["prometheus_replica".to_string(), "replica".to_string()];
        let copy = |r: &str, samples: Vec<(i64, f64)>| Series {
            labels: [("UUID", "GPU-1"), ("pod", "p"), ("prometheus_replica", r)].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            samples,
        };
        let a: Vec<(i64, f64)> = (0..=10).map(|k| k * 60).filter(|t| *t != 240 && *t != 300).map(|t| (t, 1.0)).collect();
        let b: Vec<(i64, f64)> = (0..=10).map(|k| k * 60 + 7).filter(|t| *t != 427).map(|t| (t, 2.0)).collect();
        let other = series(&[("UUID", "GPU-2")]);
        let (out, copies) = collapse_replicas(vec![copy("a", a), copy("b", b.clone()), other.clone()], &replicas);
        assert_eq!(copies, 1);
        assert_eq!(out.len(), 2);
        let merged = out.iter().find(|s| s.labels.get("UUID").map(String::as_str) == Some("GPU-1")).unwrap();
        assert!(!merged.labels.contains_key("prometheus_replica"));
        let mut want = b;
        want.push((420, 1.0));
        want.sort_by_key(|s| s.0);
        assert_eq!(merged.samples, want, "b's samples (the fuller copy), its missed scrape at 427 s taken from a");
        assert!(out.contains(&other));
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
