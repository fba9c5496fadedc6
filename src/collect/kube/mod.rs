//! kube-state-metrics series -> `pods` (one row per uid), `pending_samples` and `quotas`.
//! Keyed by uid, so a pod name reused by a new pod is a new row; requests are read from
//! finished pods too; timestamps arrive as floats (`1.5e+09`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Builder, RecordBatch, StringDictionaryBuilder, TimestampMillisecondBuilder};
use arrow::datatypes::Int32Type;
use chrono::NaiveDate;

use super::labels::{sane, LabelPick};
use super::prometheus::Series;
use crate::config::PrometheusConfig;
use crate::domain::gpu_resource::GpuResource;
use crate::domain::workload::OwnerSeries;
use crate::lake::rows::{
    PendingBuilder, PendingRow, PodLabelRow, PodLabelsBuilder, PodOwnerRow, PodOwnersBuilder, PodRow, PodsBuilder, QueueQuotaRow, QueueQuotasBuilder, QuotaRow,
    QuotasBuilder,
};
use crate::lake::Table;

mod batches;
pub mod dra;
mod queues;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KubeMetric {
    Info,
    Created,
    Scheduled,
    Started,
    Completed,
    Phase,
    Requests,
    StatusReason,
    LastTerminated,
    Labels,
    Quota,
    NodeCapacity,
    KueuePending,
    NamespaceLabels,
    ResourceClaims,
    Owner,
    ReplicaSetOwner,
    JobOwner,
    DeploymentOwner,
    Annotations,
    RayClusterInfo,
    // The schedulers' queues (`queues`): absent where the scheduler does not run.
    KueueInfo,
    KueueNominal,
    KueueBorrowingLimit,
    KueueUsage,
    KueuePendingResources,
    VolcanoDeserved,
    VolcanoCapacity,
    VolcanoAllocated,
    VolcanoRequest,
    KaiDeserved,
    KaiAllocated,
}

impl KubeMetric {
    pub const ALL: [KubeMetric; 32] = [
        KubeMetric::Info,
        KubeMetric::Created,
        KubeMetric::Scheduled,
        KubeMetric::Started,
        KubeMetric::Completed,
        KubeMetric::Phase,
        KubeMetric::Requests,
        KubeMetric::StatusReason,
        KubeMetric::LastTerminated,
        KubeMetric::Labels,
        KubeMetric::Quota,
        KubeMetric::NodeCapacity,
        KubeMetric::KueuePending,
        KubeMetric::NamespaceLabels,
        KubeMetric::ResourceClaims,
        KubeMetric::Owner,
        KubeMetric::ReplicaSetOwner,
        KubeMetric::JobOwner,
        KubeMetric::DeploymentOwner,
        KubeMetric::Annotations,
        KubeMetric::RayClusterInfo,
        KubeMetric::KueueInfo,
        KubeMetric::KueueNominal,
        KubeMetric::KueueBorrowingLimit,
        KubeMetric::KueueUsage,
        KubeMetric::KueuePendingResources,
        KubeMetric::VolcanoDeserved,
        KubeMetric::VolcanoCapacity,
        KubeMetric::VolcanoAllocated,
        KubeMetric::VolcanoRequest,
        KubeMetric::KaiDeserved,
        KubeMetric::KaiAllocated,
    ];

    /// One of the schedulers' queue series (`queues`).
    pub fn is_queue(self) -> bool {
        self == KubeMetric::KueueInfo || queues::gauge_of(self).is_some()
    }

    /// The selector queried for this metric.
    pub fn selector(self, cfg: &PrometheusConfig) -> String {
        let m = &cfg.metrics;
        match self {
            KubeMetric::Info => m.pod_info.clone(),
            KubeMetric::Created => m.pod_created.clone(),
            KubeMetric::Scheduled => m.pod_scheduled_time.clone(),
            KubeMetric::Started => m.pod_start_time.clone(),
            KubeMetric::Completed => m.pod_completion_time.clone(),
            // range selectors take no comparison: the `== 1` filter is applied on receipt
            KubeMetric::Phase => m.pod_phase.clone(),
            KubeMetric::Requests => format!("{}{{resource=~\"nvidia_com_.*|cpu|memory\"}}", m.pod_requests),
            KubeMetric::StatusReason => m.pod_status_reason.clone(),
            KubeMetric::LastTerminated => m.pod_last_terminated_reason.clone(),
            KubeMetric::Labels => m.pod_labels.clone(),
            KubeMetric::Quota => format!("{}{{resource=~\".*nvidia.*\"}}", m.resourcequota),
            KubeMetric::NodeCapacity => format!("{}{{resource=~\"nvidia_com_.*\"}}", m.node_capacity),
            // absent where Kueue does not run: an empty answer is not a gap
            KubeMetric::KueuePending => m.kueue_pending.clone(),
            // absent where kube-state-metrics exports no namespace labels: not a gap either
            KubeMetric::NamespaceLabels => m.namespace_labels.clone(),
            // absent before kube-state-metrics 2.20 or without DRA: not a gap
            KubeMetric::ResourceClaims => m.pod_resourceclaim_info.clone(),
            KubeMetric::Owner => m.pod_owner.clone(),
            KubeMetric::ReplicaSetOwner => m.replicaset_owner.clone(),
            KubeMetric::JobOwner => m.job_owner.clone(),
            // absent before kube-state-metrics 2.18, without an allowlist, or without KubeRay's
            // metrics: not gaps
            KubeMetric::DeploymentOwner => m.deployment_owner.clone(),
            KubeMetric::Annotations => m.pod_annotations.clone(),
            KubeMetric::RayClusterInfo => m.kuberay_cluster_info.clone(),
            KubeMetric::KueueInfo => m.kueue_cluster_queue_info.clone(),
            KubeMetric::KueueNominal => format!("{}{{resource=~\"nvidia.com/.*\"}}", m.kueue_nominal_quota),
            KubeMetric::KueueBorrowingLimit => format!("{}{{resource=~\"nvidia.com/.*\"}}", m.kueue_borrowing_limit),
            KubeMetric::KueueUsage => format!("{}{{resource=~\"nvidia.com/.*\"}}", m.kueue_resource_usage),
            KubeMetric::KueuePendingResources => format!("{}{{resource=~\"nvidia.com/.*\"}}", m.kueue_resource_pending),
            KubeMetric::VolcanoDeserved => format!("{}{{resource=~\"nvidia.com/.*\"}}", m.volcano_deserved),
            KubeMetric::VolcanoCapacity => format!("{}{{resource=~\"nvidia.com/.*\"}}", m.volcano_capacity),
            KubeMetric::VolcanoAllocated => format!("{}{{resource=~\"nvidia.com/.*\"}}", m.volcano_allocated),
            KubeMetric::VolcanoRequest => format!("{}{{resource=~\"nvidia.com/.*\"}}", m.volcano_request),
            KubeMetric::KaiDeserved => m.kai_deserved_gpus.clone(),
            KubeMetric::KaiAllocated => m.kai_allocated_gpus.clone(),
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Pod {
    namespace: String,
    pod: String,
    node: Option<String>,
    priority_class: Option<String>,
    first_seen: Option<i64>,
    created: Option<i64>,
    scheduled: Option<i64>,
    started: Option<i64>,
    finished: Option<i64>,
    /// (container, resource) -> last value
    requests: BTreeMap<(String, String), f64>,
    phase: Option<(i64, String)>,
    reason: Option<String>,
    team: Option<String>,
    /// Cells in which the pod was Pending.
    pending: Vec<i64>,
    /// DRA ResourceClaims the pod references: (claim, the template it came from).
    claims: BTreeSet<(String, Option<String>)>,
    /// Its devices through those claims, as the device plugin's resource and count
    /// ([`KubeState::set_dra`]).
    dra: Option<(String, i32)>,
    /// Its controller ownerReference (`kube_pod_owner`), and whether it was the controller
    /// (a pod with only other references takes the first of them).
    owner: Option<(String, String, bool)>,
    /// Its `kube_pod_labels` and `kube_pod_annotations` (kube-state-metrics' names, without
    /// the `label_` / `annotation_` prefix), the latest value of each.
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

/// `nvidia_com_mig_3g_40gb` -> `nvidia.com/mig-3g.40gb`, `nvidia_com_gpu` -> `nvidia.com/gpu`.
pub fn resource_name(sanitised: &str) -> String {
    let rest = sanitised.strip_prefix("nvidia_com_").unwrap_or(sanitised);
    if let Some(profile) = rest.strip_prefix("mig_") {
        let mut parts: Vec<&str> = profile.split('_').collect();
        let mem = parts.pop().unwrap_or("");
        return format!("nvidia.com/mig-{}.{mem}", parts.join("_"));
    }
    // The device plugin's renamed time-slicing resource, `nvidia.com/gpu.shared`.
    if let Some(suffix) = rest.strip_prefix("gpu_") {
        return format!("nvidia.com/gpu.{suffix}");
    }
    format!("nvidia.com/{rest}")
}

/// A capacity series' own scrape interval in cells: the median gap between the cells its
/// samples fall in, at least one; one for a series of one sample.
fn capacity_interval_cells(cells: &[(usize, f64)]) -> usize {
    let mut gaps: Vec<usize> = cells.windows(2).map(|w| w[1].0 - w[0].0).filter(|g| *g > 0).collect();
    if gaps.is_empty() {
        return 1;
    }
    let mid = gaps.len() / 2;
    (*gaps.select_nth_unstable(mid).1).max(1)
}

/// Pods and quota history of a window `[from, to)`.
pub struct KubeState {
    from: i64,
    to: i64,
    step: i64,
    pods: BTreeMap<String, Pod>,
    /// (ts, namespace, resource) -> (hard, used)
    quotas: BTreeMap<(i64, String, String), (Option<f64>, Option<f64>)>,
    /// (ts, node, resource) -> capacity
    capacity: BTreeMap<(i64, String, String), f64>,
    /// (ts, cluster_queue, status) -> pending workloads
    kueue: BTreeMap<(i64, String, String), f64>,
    /// (hour, namespace) -> (team, cost centre)
    namespace_labels: BTreeMap<(i64, String), (Option<String>, Option<String>)>,
    /// The owner series above the pods (ReplicaSets', Jobs', Deployments', RayClusters').
    owner_series: OwnerSeries,
    /// The schedulers' queues per step (`queues`), and each Kueue ClusterQueue's cohort.
    queues: BTreeMap<queues::QueueKey, queues::QueueCell>,
    queue_cohorts: BTreeMap<String, String>,
}

fn secs_to_ms(v: f64) -> Option<i64> {
    sane(v).filter(|v| *v > 0.0).map(|v| (v * 1000.0).round() as i64)
}

impl KubeState {
    pub fn new(from: i64, to: i64, step_s: u32) -> KubeState {
        KubeState {
            from,
            to,
            step: step_s as i64 * 1000,
            pods: BTreeMap::new(),
            quotas: BTreeMap::new(),
            capacity: BTreeMap::new(),
            kueue: BTreeMap::new(),
            namespace_labels: BTreeMap::new(),
            owner_series: OwnerSeries::default(),
            queues: BTreeMap::new(),
            queue_cohorts: BTreeMap::new(),
        }
    }

    pub fn pods_seen(&self) -> usize {
        self.pods.len()
    }

    fn cell(&self, t: i64) -> i64 {
        self.from + (t - self.from).div_euclid(self.step) * self.step
    }

    pub fn add(&mut self, metric: KubeMetric, series: &[Series], cfg: &PrometheusConfig) {
        if metric == KubeMetric::NamespaceLabels {
            let ns_pick = LabelPick::workload(&["namespace".to_string()]);
            let pick = |names: &[String], s: &Series| names.iter().find_map(|l| s.labels.get(l)).filter(|v| !v.is_empty()).cloned();
            for s in series {
                let Some(ns) = ns_pick.get(&s.labels) else { continue };
                let (team, cc) = (pick(&cfg.labels.namespace_team, s), pick(&cfg.labels.namespace_cost_centre, s));
                if team.is_none() && cc.is_none() {
                    continue;
                }
                for &(t, _) in &s.samples {
                    let hour = t.div_euclid(3_600_000) * 3_600_000;
                    if hour >= self.from && hour < self.to {
                        self.namespace_labels.insert((hour, ns.to_string()), (team.clone(), cc.clone()));
                    }
                }
            }
            return;
        }
        if let Some((id, map)) = match metric {
            KubeMetric::ReplicaSetOwner => Some(("replicaset", &mut self.owner_series.replicaset)),
            KubeMetric::JobOwner => Some(("job_name", &mut self.owner_series.job)),
            KubeMetric::DeploymentOwner => Some(("deployment", &mut self.owner_series.deployment)),
            _ => None,
        } {
            let ns_pick = LabelPick::workload(&["namespace".to_string()]);
            for s in series {
                let (Some(ns), Some(name)) = (ns_pick.get(&s.labels), s.labels.get(id)) else { continue };
                let get = |k: &str| s.labels.get(k).map_or("", String::as_str);
                // kube_deployment_owner has no owner_is_controller: its one reference is taken.
                let controller = get("owner_is_controller") == "true" || metric == KubeMetric::DeploymentOwner;
                OwnerSeries::add(map, (ns.to_string(), name.clone()), get("owner_kind"), get("owner_name"), controller);
            }
            return;
        }
        if metric.is_queue() {
            self.add_queue(metric, series);
            return;
        }
        if metric == KubeMetric::RayClusterInfo {
            let ns_pick = LabelPick::workload(&["namespace".to_string()]);
            for s in series {
                let (Some(ns), Some(name), Some(kind)) = (ns_pick.get(&s.labels), s.labels.get("name"), s.labels.get("owner_kind")) else { continue };
                self.owner_series.ray_cluster.insert((ns.to_string(), name.clone()), kind.clone());
            }
            return;
        }
        if matches!(metric, KubeMetric::NodeCapacity | KubeMetric::KueuePending) {
            let (k1, k2) = if metric == KubeMetric::NodeCapacity { ("node", "resource") } else { ("cluster_queue", "status") };
            for s in series {
                let (Some(a), Some(b)) = (s.labels.get(k1), s.labels.get(k2)) else { continue };
                for &(t, v) in &s.samples {
                    let key = (self.cell(t), a.clone(), b.clone());
                    if let Some(v) = sane(v) {
                        let map = if metric == KubeMetric::NodeCapacity { &mut self.capacity } else { &mut self.kueue };
                        map.entry(key).or_insert(v);
                    }
                }
            }
            return;
        }
        if metric == KubeMetric::Quota {
            for s in series {
                let (Some(ns), Some(res), Some(kind)) = (s.labels.get("namespace"), s.labels.get("resource"), s.labels.get("type")) else { continue };
                for &(t, v) in &s.samples {
                    let cell = self.from + (t - self.from).div_euclid(self.step) * self.step;
                    let e = self.quotas.entry((cell, ns.clone(), res.clone())).or_default();
                    match kind.as_str() {
                        "hard" => e.0 = e.0.or(sane(v)),
                        "used" => e.1 = e.1.or(sane(v)),
                        _ => {}
                    }
                }
            }
            return;
        }
        // kube-state-metrics' own namespace/pod labels; exported_* when renamed on scrape.
        let ns_pick = LabelPick::workload(&["namespace".to_string()]);
        let pod_pick = LabelPick::workload(&["pod".to_string()]);
        let one_hot = matches!(metric, KubeMetric::Phase | KubeMetric::StatusReason | KubeMetric::LastTerminated);
        for s in series {
            // For 0/1 state series only the samples where the state holds count.
            let filtered;
            let s = if one_hot {
                filtered = Series { labels: s.labels.clone(), samples: s.samples.iter().copied().filter(|(_, v)| *v == 1.0).collect() };
                if filtered.samples.is_empty() {
                    continue;
                }
                &filtered
            } else {
                s
            };
            let Some(uid) = s.labels.get("uid").filter(|u| !u.is_empty()) else { continue };
            let (Some(ns), Some(name)) = (ns_pick.get(&s.labels), pod_pick.get(&s.labels)) else { continue };
            let Some(&(last_t, last_v)) = s.samples.last() else { continue };
            let pod = self.pods.entry(uid.clone()).or_default();
            pod.namespace = ns.to_string();
            pod.pod = name.to_string();
            let first = s.samples[0].0;
            pod.first_seen = Some(pod.first_seen.map_or(first, |f| f.min(first)));
            match metric {
                KubeMetric::Info => {
                    if let Some(n) = s.labels.get("node").filter(|n| !n.is_empty()) {
                        pod.node = Some(n.clone());
                    }
                    if let Some(p) = s.labels.get("priority_class").filter(|p| !p.is_empty()) {
                        pod.priority_class = Some(p.clone());
                    }
                }
                KubeMetric::Created => pod.created = secs_to_ms(last_v).or(pod.created),
                KubeMetric::Scheduled => pod.scheduled = secs_to_ms(last_v).or(pod.scheduled),
                KubeMetric::Started => pod.started = secs_to_ms(last_v).or(pod.started),
                KubeMetric::Completed => pod.finished = secs_to_ms(last_v).or(pod.finished),
                KubeMetric::Phase => {
                    let Some(phase) = s.labels.get("phase") else { continue };
                    if pod.phase.as_ref().is_none_or(|(t, _)| last_t >= *t) {
                        pod.phase = Some((last_t, phase.clone()));
                    }
                    if phase == "Pending" {
                        for &(t, _) in &s.samples {
                            let cell = self.from + (t - self.from).div_euclid(self.step) * self.step;
                            if cell >= self.from && cell < self.to && pod.pending.last() != Some(&cell) {
                                pod.pending.push(cell);
                            }
                        }
                    }
                }
                KubeMetric::Requests => {
                    if let (Some(c), Some(r)) = (s.labels.get("container"), s.labels.get("resource")) {
                        if let Some(v) = sane(last_v) {
                            pod.requests.insert((c.clone(), r.clone()), v);
                        }
                    }
                }
                KubeMetric::StatusReason => {
                    if let Some(r) = s.labels.get("reason") {
                        pod.reason.get_or_insert_with(|| r.clone());
                    }
                }
                KubeMetric::LastTerminated => {
                    if let Some(r) = s.labels.get("reason") {
                        pod.reason = Some(r.clone());
                    }
                }
                KubeMetric::Labels => {
                    if let Some(team) = cfg.labels.team.iter().find_map(|l| s.labels.get(l)).filter(|t| !t.is_empty()) {
                        pod.team = Some(team.clone());
                    }
                    prefixed(&s.labels, "label_", &mut pod.labels);
                }
                KubeMetric::Annotations => prefixed(&s.labels, "annotation_", &mut pod.annotations),
                KubeMetric::Owner => {
                    let get = |k: &str| s.labels.get(k).map_or("", String::as_str);
                    let (kind, name, controller) = (get("owner_kind"), get("owner_name"), get("owner_is_controller") == "true");
                    if !kind.is_empty() && kind != "<none>" && (controller || pod.owner.is_none()) {
                        pod.owner = Some((kind.to_string(), name.to_string(), controller));
                    }
                }
                KubeMetric::ResourceClaims => {
                    if let Some(claim) = s.labels.get("resourceclaim_name").or_else(|| s.labels.get("claim_name")).filter(|c| !c.is_empty()) {
                        let template = s.labels.get("resourceclaim_template_name").filter(|t| !t.is_empty()).cloned();
                        pod.claims.insert((claim.clone(), template));
                    }
                }
                KubeMetric::Quota
                | KubeMetric::NodeCapacity
                | KubeMetric::KueuePending
                | KubeMetric::NamespaceLabels
                | KubeMetric::ReplicaSetOwner
                | KubeMetric::JobOwner
                | KubeMetric::DeploymentOwner
                | KubeMetric::RayClusterInfo => {}
                _ => {}
            }
        }
    }

    /// The pod's GPU request: the device-counting resources only (`GpuResource`), never
    /// HAMi's sizes and percentages; a pod that requests none but holds GPUs through DRA
    /// claims, those ([`set_dra`](Self::set_dra)).
    fn gpu_request(pod: &Pod) -> (Option<String>, i32) {
        let mut resource = None;
        let mut total = 0.0;
        for ((_, r), v) in &pod.requests {
            if GpuResource::of(r).is_some_and(GpuResource::counts_devices) {
                resource.get_or_insert_with(|| resource_name(r));
                total += v;
            }
        }
        match (&pod.dra, total.round() as i32) {
            (Some((r, n)), 0) => (Some(r.clone()), *n),
            (_, n) => (resource, n),
        }
    }

    /// A HAMi vGPU's share of its GPU in percent: the pod's `nvidia.com/gpucores` (per vGPU),
    /// else its `gpumem-percentage`; None for a pod that asks for neither (not HAMi's, or HAMi
    /// with the cores unlimited: then its vGPUs are scaled to the node's time).
    fn hami_share_pct(pod: &Pod) -> Option<f64> {
        let most = |r: &str| pod.requests.iter().filter(|((_, k), _)| k == r).map(|(_, v)| *v).fold(0.0f64, f64::max);
        [most("nvidia_com_gpucores"), most("nvidia_com_gpumem_percentage")].into_iter().find(|v| *v > 0.0).map(|v| v.min(100.0))
    }

    /// Nodes a sharing layer splits, by evidence: pods bound there request HAMi's share of a GPU
    /// (`nvidia.com/gpucores`, `gpumem`, `gpumem-percentage`). There `nvidia.com/gpu` counts
    /// vGPUs, not GPUs. Per node, the number of such pods.
    pub fn hami_nodes(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for p in self.pods.values() {
            let Some(node) = &p.node else { continue };
            if p.requests.keys().any(|(_, r)| GpuResource::of(r) == Some(GpuResource::HamiShare)) {
                *out.entry(node.clone()).or_insert(0) += 1;
            }
        }
        out
    }

    /// The `nvidia_com_*` resources pods requested that are not device counts (HAMi's shares, a
    /// vendor's own), never read as GPUs: named once in the run's log.
    pub fn uncounted_resources(&self) -> std::collections::BTreeSet<&str> {
        self.pods
            .values()
            .flat_map(|p| p.requests.keys())
            .map(|(_, r)| r.as_str())
            .filter(|r| GpuResource::of(r).is_some_and(|k| !k.counts_devices()))
            .collect()
    }
}

impl KubeState {
    /// Per node, per cell of the window: the whole GPUs (`nvidia.com/gpu`) kube-state-metrics
    /// reports and whether it reports any GPU resource (MIG, time-sliced too). A sample stands
    /// until its series' next, for at most `lookback_ms`, as in Prometheus; a series' last
    /// sample stands for its own scrape interval only (the median gap between its samples,
    /// else one step), never the lookback: a node the autoscaler removed stops reporting, and
    /// a live Prometheus marks its series stale at the next scrape, so its GPUs do not linger
    /// in the pool for minutes after it is gone.
    ///
    /// On a node in `shared` (a sharing layer's, [`hami_nodes`](Self::hami_nodes)) the
    /// `nvidia.com/gpu` capacity counts vGPUs: it says the node is there, never how many GPUs.
    pub fn gpu_capacity(&self, lookback_ms: i64, shared: &BTreeMap<String, usize>) -> BTreeMap<String, Vec<(u32, bool)>> {
        let cells = ((self.to - self.from) / self.step).max(0) as usize;
        let reach = (lookback_ms / self.step).max(1) as usize;
        // (node, resource) -> the cells with a sample and its value, in time order.
        let mut samples: BTreeMap<(&str, &str), Vec<(usize, f64)>> = BTreeMap::new();
        for ((t, node, resource), v) in &self.capacity {
            let c = ((t - self.from) / self.step) as usize;
            if c < cells {
                samples.entry((node.as_str(), resource.as_str())).or_default().push((c, *v));
            }
        }
        let mut series: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
        for (key, cells_of) in samples {
            let values = series.entry(key).or_insert_with(|| vec![0.0; cells]);
            let own = capacity_interval_cells(&cells_of).min(reach);
            for (i, &(c, v)) in cells_of.iter().enumerate() {
                let end = match cells_of.get(i + 1) {
                    Some(&(next, _)) => next.min(c + reach),
                    None => c + own,
                };
                for slot in &mut values[c..end.min(cells)] {
                    *slot = v;
                }
            }
        }
        let mut out: BTreeMap<String, Vec<(u32, bool)>> = BTreeMap::new();
        for ((node, resource), values) in series {
            let cells_out = out.entry(node.to_string()).or_insert_with(|| vec![(0, false); cells]);
            for (o, v) in cells_out.iter_mut().zip(values) {
                if v > 0.0 {
                    o.1 = true;
                    if resource == "nvidia_com_gpu" && !shared.contains_key(node) {
                        o.0 += v.round() as u32;
                    }
                }
            }
        }
        out
    }
}

/// The labels of `series` that begin with `prefix` (kube-state-metrics' `label_` or
/// `annotation_`), without it, into `into` (empty values are no value).
fn prefixed(series: &BTreeMap<String, String>, prefix: &str, into: &mut BTreeMap<String, String>) {
    for (k, v) in series {
        if let Some(key) = k.strip_prefix(prefix).filter(|_| !v.is_empty()) {
            into.insert(key.to_string(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_names_are_restored() {
        assert_eq!(resource_name("nvidia_com_gpu_shared"), "nvidia.com/gpu.shared");
        assert_eq!(resource_name("nvidia_com_gpu"), "nvidia.com/gpu");
        assert_eq!(resource_name("nvidia_com_mig_3g_40gb"), "nvidia.com/mig-3g.40gb");
        assert_eq!(resource_name("nvidia_com_mig_1g_10gb"), "nvidia.com/mig-1g.10gb");
    }

    pub(super) fn s(labels: &[(&str, &str)], samples: &[(i64, f64)]) -> Series {
        Series { labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), samples: samples.to_vec() }
    }

    /// An autoscaled node reports 8 GPUs every 30 s from 06:00 to its last scrape at 17:59:30,
    /// then is gone: it stands for its own interval after that (to 18:00), not the 5-minute
    /// lookback. A 2-minute hole in the middle of a series (kube-state-metrics restarting) is
    /// still bridged, within the lookback.
    #[test]
    fn a_removed_node_stops_at_its_last_scrape_not_the_lookback() {
        let cfg = PrometheusConfig::default();
        let hour = 3_600_000;
        let mut k = KubeState::new(0, 24 * hour, 30);
        let l = [("node", "gpu-as-1"), ("resource", "nvidia_com_gpu")];
        let alive: Vec<(i64, f64)> = (0..)
            .map(|k| 6 * hour + k * 30_000)
            .take_while(|&t| t < 18 * hour)
            .filter(|&t| !(12 * hour..12 * hour + 120_000).contains(&t))
            .map(|t| (t, 8.0))
            .collect();
        k.add(KubeMetric::NodeCapacity, &[s(&l, &alive)], &cfg);
        let cap = k.gpu_capacity(300_000, &BTreeMap::new());
        let cells = &cap["gpu-as-1"];
        let gpu_cells: u32 = cells.iter().map(|c| c.0).sum();
        assert_eq!(gpu_cells as i64, 8 * 12 * 120, "8 GPUs x 12 h of 30 s steps, nothing after 18:00");
        assert_eq!(cells[(18 * hour / 30_000) as usize], (0, false));
        assert_eq!(cells[(18 * hour / 30_000) as usize - 1], (8, true));
        assert_eq!(cells[(6 * hour / 30_000) as usize - 1], (0, false), "nothing before its first scrape");
    }

    #[test]
    fn reused_pod_name_with_a_new_uid_is_a_new_pod() {
        let cfg = PrometheusConfig::default();
        let mut k = KubeState::new(0, 600_000, 30);
        let a = [("namespace", "ns"), ("pod", "job-0"), ("uid", "u1")];
        let b = [("namespace", "ns"), ("pod", "job-0"), ("uid", "u2")];
        k.add(KubeMetric::Created, &[s(&a, &[(0, 1.5e9)]), s(&b, &[(300_000, 1.5e9 + 300.0)])], &cfg);
        let req = |l: &[(&str, &str)]| {
            let mut v = l.to_vec();
            v.extend([("container", "c"), ("resource", "nvidia_com_gpu")]);
            s(&v, &[(0, 2.0)])
        };
        let (ra, rb) = (req(&a), req(&b));
        k.add(KubeMetric::Requests, &[ra, rb], &cfg);
        let days = k.pods_by_day();
        let rows: usize = days.values().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 2);
    }

    /// A HAMi pod requests one vGPU, 25% of the cores and 20 GiB: its GPU request is 1, never
    /// 20,481 (the MiB and the percentage summed in), and its node is named as HAMi's, whose
    /// `nvidia.com/gpu: 40` then says the node is there, not that it has 40 GPUs.
    #[test]
    fn hami_shares_are_not_gpus_and_mark_their_node() {
        let cfg = PrometheusConfig::default();
        let mut k = KubeState::new(0, 600_000, 30);
        let pod = [("namespace", "ns"), ("pod", "infer-0"), ("uid", "u1")];
        k.add(KubeMetric::Created, &[s(&pod, &[(0, 1.0)])], &cfg);
        let mut info = pod.to_vec();
        info.push(("node", "hami-1"));
        k.add(KubeMetric::Info, &[s(&info, &[(0, 1.0)])], &cfg);
        let req = |resource: &'static str, v: f64| {
            let mut l = pod.to_vec();
            l.extend([("container", "c"), ("resource", resource)]);
            s(&l, &[(0, v)])
        };
        k.add(KubeMetric::Requests, &[req("nvidia_com_gpu", 1.0), req("nvidia_com_gpucores", 25.0), req("nvidia_com_gpumem", 20_480.0), req("cpu", 4.0)], &cfg);
        let pods = k.pods_by_day();
        let b = pods.values().next().expect("the pod's day");
        let gpus = b.column_by_name("gpu_request").unwrap().as_any().downcast_ref::<arrow::array::Int32Array>().unwrap();
        assert_eq!(gpus.value(0), 1);
        assert_eq!(k.hami_nodes().get("hami-1"), Some(&1));
        assert_eq!(k.uncounted_resources().into_iter().collect::<Vec<_>>(), ["nvidia_com_gpucores", "nvidia_com_gpumem"]);
        let cap = [("node", "hami-1"), ("resource", "nvidia_com_gpu")];
        k.add(KubeMetric::NodeCapacity, &[s(&cap, &[(0, 40.0), (300_000, 40.0)])], &cfg);
        let cells = &k.gpu_capacity(300_000, &k.hami_nodes())["hami-1"];
        assert_eq!(cells[0], (0, true), "there, with no GPU count of its own");
        assert_eq!(k.gpu_capacity(300_000, &BTreeMap::new())["hami-1"][0], (40, true));
    }
}
