//! The recorded month as a replay's input: the pool (from the inventory), the demand (pods,
//! preemption chains joined into jobs), the quotas, priority classes and node affinity as they
//! were; and the recorded timeline the baseline replay is calibrated against.
//!
//! What the lake does not hold is inferred, and every inference is stated in `notes`: a
//! namespace's node affinity is the set of GPU models its whole-GPU pods ran on; a priority
//! class the config does not name replays at value 0 without preempting; a preempted pod's
//! successor is the pod of the same name its controller created within two minutes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::model::{Carried, Class, Job, Ms, NodeSpec, PodOutcome, Setup, UnitGroup, GPU_RESOURCE};
use super::prices::{Charged, Prices};
use crate::config::Config;

/// A successor created later than this after its predecessor's eviction is a new job.
pub const SUCCESSOR_WITHIN_MS: Ms = 120_000;

/// One `pods` row (queries/plan_pods.sql).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodRow {
    pub namespace: Label,
    pub pod: String,
    pub uid: String,
    pub node: Option<Label>,
    pub priority_class: Label,
    pub created: Ms,
    pub scheduled: Option<Ms>,
    pub started: Option<Ms>,
    pub finished: Option<Ms>,
    pub resource: Label,
    pub count: u32,
    pub reason: Option<Label>,
}

/// A label many pods share (namespace, node, class, resource, reason): one copy, shared.
pub type Label = std::sync::Arc<str>;

/// The labels read so far, each kept once.
#[derive(Default)]
pub struct Labels(std::collections::HashSet<Label>);

impl Labels {
    pub fn get(&mut self, s: &str) -> Label {
        if let Some(label) = self.0.get(s) {
            return label.clone();
        }
        let label: Label = s.into();
        self.0.insert(label.clone());
        label
    }
}

/// One inventory row (queries/plan_pool.sql).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolRow {
    pub node: String,
    pub gpu_uuid: String,
    pub model: String,
    pub mig_profile: Option<String>,
    pub share: f64,
    pub replicas: u32,
    pub first_seen: Ms,
    pub last_seen: Ms,
}

/// The recorded month, ready to replay.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The baseline: the recorded pool, quotas, classes and affinity.
    pub setup: Setup,
    pub jobs: Vec<Job>,
    /// The pods as they ran.
    pub pods: Vec<PodOutcome>,
    /// Pending GPU-seconds recorded, per namespace and per namespace and hour.
    pub pending_gpu_s: Vec<i64>,
    pub pending_by_hour: Vec<Vec<i64>>,
    /// Team -> its namespaces (indices).
    pub teams: BTreeMap<String, Vec<usize>>,
    /// The month's prices for the recorded setup, and what the chargeback charged.
    pub prices: Prices,
    pub charged: Charged,
    /// What was inferred or filled in.
    pub notes: Vec<String>,
}

pub struct Inputs<'a> {
    pub from: Ms,
    pub to: Ms,
    pub step: Ms,
    pub pods: Vec<PodRow>,
    pub pool: Vec<PoolRow>,
    /// (namespace, hour start, pending GPU-seconds).
    pub pending: Vec<(String, Ms, i64)>,
    /// namespace -> ResourceQuota hard (whole GPUs).
    pub quotas: BTreeMap<String, u32>,
    /// namespace -> team.
    pub teams: BTreeMap<String, String>,
    /// The month's chargeback: the energy each namespace drew per GPU-hour, and its cost.
    pub charged: Charged,
    pub config: &'a Config,
}

/// Names compared as people count: runs of digits by value, the rest as text.
pub fn natural_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn runs(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (x, y) = (runs(a), runs(b));
    for (p, q) in x.iter().zip(y.iter()) {
        let o = match (p.0, q.0) {
            (true, true) => {
                let (m, n) = (p.1.trim_start_matches('0'), q.1.trim_start_matches('0'));
                m.len().cmp(&n.len()).then_with(|| m.cmp(n))
            }
            _ => p.1.cmp(q.1),
        };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    x.len().cmp(&y.len()).then_with(|| a.cmp(b))
}

fn intern(list: &mut Vec<String>, name: &str) -> usize {
    match list.iter().position(|n| n == name) {
        Some(i) => i,
        None => {
            list.push(name.to_string());
            list.len() - 1
        }
    }
}

pub fn build(input: Inputs<'_>) -> Recorded {
    let Inputs { from, to, step, pods, pool, pending, quotas, teams, charged, config } = input;
    let mut notes = Vec::new();
    let mut models: Vec<String> = Vec::new();
    let mut resources: Vec<String> = vec!["nvidia.com/gpu".to_string()];

    // The pool: per node, per resource, the units and the span the node was seen over.
    let mut by_node: BTreeMap<String, (usize, Vec<UnitGroup>, Ms, Ms)> = BTreeMap::new();
    for r in &pool {
        let model = intern(&mut models, &r.model);
        let (resource, count) = match (&r.mig_profile, r.replicas) {
            (Some(p), _) => (format!("nvidia.com/mig-{p}"), 1),
            (None, n) if n > 1 => ("nvidia.com/gpu.shared".to_string(), n),
            (None, _) => ("nvidia.com/gpu".to_string(), 1),
        };
        let resource = intern(&mut resources, &resource);
        let e = by_node.entry(r.node.clone()).or_insert((model, Vec::new(), r.first_seen, r.last_seen + step));
        e.2 = e.2.min(r.first_seen);
        e.3 = e.3.max(r.last_seen + step);
        match e.1.iter_mut().find(|g| g.resource == resource) {
            Some(g) => g.count += count,
            None => e.1.push(UnitGroup { resource, count, share: r.share }),
        }
    }
    // The window as far as the lake recorded the pool: a replay does not run past its data.
    let data_end = by_node.values().map(|e| e.3).max().unwrap_or(to);
    if data_end < to {
        notes.push(format!(
            "the lake's pool ends at {}: the replay covers the window up to there",
            chrono::DateTime::from_timestamp_millis(data_end).map_or(data_end.to_string(), |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        ));
    }
    let to = to.min(data_end).max(from);
    // Ties in placement go to the first node: nodes in the order their names count in
    // (gpu-node-9 before gpu-node-10), not as text.
    let mut nodes: Vec<NodeSpec> = by_node
        .into_iter()
        .map(|(name, (model, units, a, b))| NodeSpec { name, model, units, available_from: a.max(from), available_to: b.min(to).max(a.max(from)) })
        .collect();
    nodes.sort_by(|a, b| natural_order(&a.name, &b.name));
    let node_index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();

    // Namespaces, classes and resources, in a stable order.
    let mut namespaces: BTreeSet<String> = pods.iter().map(|p| p.namespace.to_string()).collect();
    namespaces.extend(quotas.keys().cloned());
    let namespaces: Vec<String> = namespaces.into_iter().collect();
    let ns_index: HashMap<&str, usize> = namespaces.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
    let mut classes: Vec<Class> = config.plan.priority_classes.iter().map(|(n, c)| Class { name: n.clone(), value: c.value, preempts: c.preempts }).collect();
    let mut unknown_classes = BTreeSet::new();
    for p in &pods {
        if !classes.iter().any(|c| *c.name == *p.priority_class) {
            unknown_classes.insert(p.priority_class.to_string());
            classes.push(Class { name: p.priority_class.to_string(), value: 0, preempts: false });
        }
    }
    if !unknown_classes.is_empty() {
        let names: Vec<String> = unknown_classes.iter().map(|c| if c.is_empty() { "(none)".to_string() } else { c.clone() }).collect();
        notes.push(format!("priority classes not in [plan.priority_classes] replay at value 0 without preempting: {}", names.join(", ")));
    }
    for p in &pods {
        intern(&mut resources, &p.resource);
    }

    // Node affinity: the models each namespace's whole-GPU pods ran on.
    let mut affinity = vec![vec![false; models.len()]; namespaces.len()];
    let mut any_placed = vec![false; namespaces.len()];
    for p in pods.iter().filter(|p| &*p.resource == "nvidia.com/gpu") {
        if let Some(&n) = p.node.as_deref().and_then(|n| node_index.get(n)) {
            affinity[ns_index[&*p.namespace]][nodes[n].model] = true;
            any_placed[ns_index[&*p.namespace]] = true;
        }
    }
    // A namespace none of whose whole-GPU pods ran in the window was held by something the
    // lake does not record (a node selector, a toleration, a request no node fits): replayed
    // as able to run nowhere, unless a scenario names its models (`affinity`).
    let never_ran: Vec<String> = (0..namespaces.len())
        .filter(|&i| !any_placed[i] && pods.iter().any(|p| *p.namespace == *namespaces[i] && &*p.resource == "nvidia.com/gpu"))
        .map(|i| namespaces[i].clone())
        .collect();
    notes.push("node affinity inferred: a namespace's whole-GPU pods may run on the GPU models they ran on in the window".to_string());
    if !never_ran.is_empty() {
        notes.push(format!(
            "no whole-GPU pod of {} ran in the window: replayed as able to run on no GPU model (a scenario's [scenario.affinity] names its models)",
            never_ran.join(", ")
        ));
    }

    // Jobs: a preempted pod and the successor its controller created are one job.
    // A uid read more than once counts once, its last row: found by sorting row numbers by uid
    // (a map of a million uids would cost more than the rows it keeps).
    let rows: Vec<&PodRow> = {
        let mut by_uid: Vec<u32> = (0..pods.len() as u32).collect();
        by_uid.sort_unstable_by(|&a, &b| pods[a as usize].uid.cmp(&pods[b as usize].uid).then(a.cmp(&b)));
        let mut keep: Vec<u32> = Vec::with_capacity(by_uid.len());
        for (k, &i) in by_uid.iter().enumerate() {
            if by_uid.get(k + 1).is_none_or(|&n| pods[n as usize].uid != pods[i as usize].uid) {
                keep.push(i);
            }
        }
        drop(by_uid);
        keep.sort_unstable();
        keep.into_iter().map(|i| &pods[i as usize]).collect()
    };
    // The rows of each (namespace, name), in row order: the first per name, then a chain.
    let mut first_named: HashMap<(&str, &str), usize> = HashMap::with_capacity(rows.len());
    let mut next_named: Vec<usize> = vec![usize::MAX; rows.len()];
    let mut last_named: Vec<usize> = vec![usize::MAX; rows.len()];
    for (i, p) in rows.iter().enumerate() {
        let first = *first_named.entry((&*p.namespace, p.pod.as_str())).or_insert(i);
        if first != i {
            next_named[last_named[first]] = i;
        }
        last_named[first] = i;
    }
    drop(last_named);
    let named = |first: usize| std::iter::successors(Some(first), |&i| Some(next_named[i]).filter(|&n| n != usize::MAX));
    let mut successor: Vec<Option<usize>> = vec![None; rows.len()];
    let mut has_predecessor = vec![false; rows.len()];
    for (i, p) in rows.iter().enumerate() {
        if p.reason.as_deref() != Some("Preempted") {
            continue;
        }
        let Some(f) = p.finished else { continue };
        let next = named(first_named[&(&*p.namespace, p.pod.as_str())])
            .find(|&j| j != i && !has_predecessor[j] && rows[j].created >= f && rows[j].created <= f + SUCCESSOR_WITHIN_MS);
        if let Some(j) = next {
            successor[i] = Some(j);
            has_predecessor[j] = true;
        }
    }
    drop((first_named, next_named));
    let mut jobs = Vec::with_capacity(rows.len() - has_predecessor.iter().filter(|&&h| h).count());
    let mut chained = 0usize;
    for (start, &continues) in has_predecessor.iter().enumerate() {
        if continues {
            continue;
        }
        let mut chain = vec![start];
        while let Some(n) = successor[*chain.last().expect("non-empty")] {
            chain.push(n);
        }
        // Attempts that ended before the window are history: the job starts at the attempt
        // that was pending or running when the window opened.
        let first = chain.iter().position(|&i| rows[i].finished.is_none_or(|f| f >= from)).unwrap_or(0);
        let chain = &chain[first..];
        chained += chain.len() - 1;
        let head = rows[chain[0]];
        let last = rows[*chain.last().expect("non-empty")];
        let mut run: Option<Ms> = Some(0);
        for &i in chain {
            let p = rows[i];
            run = match (run, p.started, p.finished) {
                (Some(r), Some(s), Some(f)) => Some(r + (f - s).max(0)),
                (Some(r), None, Some(_)) => Some(r),
                _ => None,
            };
        }
        let delays: Vec<Ms> = chain.iter().filter_map(|&i| Some((rows[i].started? - rows[i].scheduled?).max(0))).collect();
        let carried = match (head.scheduled, head.started, &head.node) {
            (Some(s), Some(st), Some(node)) if s < from => Some(Carried { node: node.to_string(), scheduled: s, started: st }),
            _ => None,
        };
        let class = classes.iter().position(|c| *c.name == *head.priority_class).expect("every class interned");
        jobs.push(Job {
            ns: ns_index[&*head.namespace],
            name: head.pod.clone(),
            class,
            resource: resources.iter().position(|r| **r == *head.resource).expect("every resource interned"),
            count: head.count,
            created: head.created,
            delays,
            run,
            end_reason: last.reason.clone(),
            carried,
        });
    }
    jobs.sort_by(|a, b| (a.created, a.ns, &a.name).cmp(&(b.created, b.ns, &b.name)));
    if chained > 0 {
        notes.push(format!(
            "{chained} pods re-created after a preemption joined to their predecessors' jobs (same name, created within {} s)",
            SUCCESSOR_WITHIN_MS / 1000
        ));
    }

    // The recorded timeline.
    let rec_pods: Vec<PodOutcome> = rows
        .iter()
        .enumerate()
        .map(|(i, p)| PodOutcome {
            job: i,
            ns: ns_index[&*p.namespace],
            class: classes.iter().position(|c| *c.name == *p.priority_class).expect("interned"),
            resource: resources.iter().position(|r| **r == *p.resource).expect("interned"),
            count: p.count,
            created: p.created,
            scheduled: p.scheduled,
            started: p.started,
            finished: p.finished,
            node: p.node.as_deref().and_then(|n| node_index.get(n).copied()),
            preempted: p.reason.as_deref() == Some("Preempted"),
        })
        .collect();
    let hours = ((to - from + 3_599_999) / 3_600_000).max(0) as usize;
    let mut pending_gpu_s = vec![0; namespaces.len()];
    let mut pending_by_hour = vec![vec![0; hours]; namespaces.len()];
    for (ns, hour, gpu_s) in &pending {
        let Some(&i) = ns_index.get(ns.as_str()) else { continue };
        pending_gpu_s[i] += gpu_s;
        if let Some(slot) = pending_by_hour[i].get_mut(((hour - from) / 3_600_000) as usize) {
            *slot += gpu_s;
        }
    }

    // Quotas: the ResourceQuota recorded, else the config's [quotas].
    let quota: Vec<Option<u32>> = namespaces.iter().map(|n| quotas.get(n).copied().or_else(|| config.quotas.get(n).copied())).collect();
    let from_config: Vec<&String> = namespaces.iter().filter(|n| !quotas.contains_key(*n) && config.quotas.contains_key(*n)).collect();
    if !from_config.is_empty() {
        notes.push(format!(
            "no ResourceQuota recorded for {}: [quotas] in the config used",
            from_config.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    let mut team_members: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (ns, team) in &teams {
        if let Some(&i) = ns_index.get(ns.as_str()) {
            team_members.entry(team.clone()).or_default().push(i);
        }
    }
    let nns = namespaces.len();
    let nmodels = models.len();
    let setup = Setup {
        from,
        to,
        step,
        models,
        resources,
        nodes,
        classes,
        namespaces,
        class_override: vec![None; nns],
        quota,
        model_quota: vec![vec![None; nmodels]; nns],
        shared_quotas: Vec::new(),
        cohorts: Vec::new(),
        affinity,
        windows: vec![None; nns],
        preemption: true,
    };
    debug_assert_eq!(GPU_RESOURCE, 0);
    let (prices, filled) = Prices::new(config, &setup, &charged);
    if !filled.is_empty() {
        notes.push(format!("power: no energy charged for {}; filled in as stated", filled.join("; ")));
    }
    Recorded { setup, jobs, pods: rec_pods, pending_gpu_s, pending_by_hour, teams: team_members, prices, charged, notes }
}

#[cfg(test)]
mod tests {
    use super::natural_order;

    #[test]
    fn node_names_in_counting_order() {
        let mut names = vec!["gpu-node-100", "gpu-node-10", "gpu-node-9", "gpu-node-01", "a100-2", "gpu-node-010", "gpu-node-b"];
        names.sort_by(|a, b| natural_order(a, b));
        assert_eq!(names, vec!["a100-2", "gpu-node-01", "gpu-node-9", "gpu-node-010", "gpu-node-10", "gpu-node-100", "gpu-node-b"]);
    }
}
