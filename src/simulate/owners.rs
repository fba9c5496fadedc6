//! Who owns each simulated pod, as Kubernetes controllers set it up
//! (`shared/reference/owner-chains.md`): the pod's controller ownerReference, the further hops
//! kube-state-metrics exports (`kube_replicaset_owner`, `kube_job_owner`), the pod labels the
//! controllers and users set, and the top-level workload that is the truth for the ledger.
//!
//! A function of the pod's namespace, name and creation time only (no draw from the seed), so
//! the schedule, the lake's other tables and the ledger's other figures are as before. Per
//! namespace (its `container`), pods are grouped in workloads of consecutive arrivals:
//! - `trainer`: Kubeflow PyTorchJobs (pod -> PyTorchJob) and JobSets (pod -> Job
//!   `<jobset>-workers-<i>` -> JobSet), alternately;
//! - `train`: KubeRay RayJobs (pod -> RayCluster `<rayjob>-<5 chars>`; the RayCluster's own
//!   owner is not in kube-state-metrics, its submitter Job is: `kube_job_owner{job_name=<rayjob>}`
//!   -> RayJob) and PyTorchJobs;
//! - `worker` and `server`: Deployments rolled out half-way through the window (pod ->
//!   ReplicaSet `<deployment>-<hash>` -> Deployment, a new hash after the rollout); one server
//!   pod in seven is a bare pod;
//! - `notebook`: Kubeflow Notebooks (pod -> StatefulSet `<notebook>`, whose owner the Notebook
//!   is not exported: the pod's `notebook-name` label tells it);
//! - `job`: a CronJob's Jobs (pod -> Job `<cronjob>-<minute>` -> CronJob) and Volcano Jobs
//!   (pod -> `Job` of batch.volcano.sh, which has no `kube_job_owner` series; its pods carry
//!   `volcano.sh/job-name`).
//!
//! Labels: `app` and `team` (as before), `project` (a business line across namespaces: `llm`
//! in team-llm, half of team-vision and a Deployment of team-inference; none on team-research's
//! notebooks), Kueue's queue labels on the training namespaces and Volcano's queue on the batch
//! jobs.

use std::collections::BTreeMap;

use super::scheduler::SimPod;
use super::workload::NamespaceSpec;
use crate::domain::workload::OwnerSeries;

/// A simulated queue: its scheduler's series name it; its quota as a share of the pool.
pub struct SimQueue {
    pub scheduler: &'static str,
    pub name: &'static str,
    /// The pod label (Kubernetes key) that names it.
    pub label: &'static str,
    pub nominal_frac: f64,
    /// Kueue's borrowing limit / Volcano's capability, as a share of the pool.
    pub limit_frac: f64,
}

/// Kueue's ClusterQueues (cohort [`COHORT`]) and Volcano's queue of the simulated cluster.
pub const QUEUES: [SimQueue; 3] = [
    SimQueue { scheduler: "kueue", name: "training-cq", label: "kueue.x-k8s.io/cluster-queue-name", nominal_frac: 0.20, limit_frac: 0.25 },
    SimQueue { scheduler: "kueue", name: "research-cq", label: "kueue.x-k8s.io/cluster-queue-name", nominal_frac: 0.45, limit_frac: 0.10 },
    SimQueue { scheduler: "volcano", name: "batch-q", label: "volcano.sh/queue-name", nominal_frac: 0.04, limit_frac: 0.30 },
];

/// The Kueue cohort the ClusterQueues borrow and lend in.
pub const COHORT: &str = "gpu-pool";

impl SimQueue {
    /// Its nominal quota (Kueue) or deserved share (Volcano) in GPUs of a pool of `gpus`.
    pub fn nominal(&self, gpus: usize) -> f64 {
        (gpus as f64 * self.nominal_frac).round()
    }

    /// Its borrowing limit (Kueue) or capability (Volcano) in GPUs.
    pub fn limit(&self, gpus: usize) -> f64 {
        (gpus as f64 * self.limit_frac).round()
    }
}

/// Each queue of [`QUEUES`]'s GPUs in use at each step of `window` (by step index): the GPUs
/// requested by its pods (their queue labels) from the first step at or after they were bound to
/// a node to the first step at or after they ended, as Kueue's admitted usage and Volcano's
/// allocated count them.
pub fn queue_usage(pods: &[SimPod], owners: &[Ownership], window: (i64, i64), step: i64) -> Vec<Vec<i64>> {
    let (ws, we) = window;
    let steps = ((we - ws) / step) as usize;
    let mut deltas = vec![vec![0i64; steps + 1]; QUEUES.len()];
    let index = |t: i64| ((t.clamp(ws, we) - ws + step - 1).div_euclid(step)) as usize;
    for (p, o) in pods.iter().zip(owners) {
        let Some(bound) = p.scheduled else { continue };
        let Some(q) = QUEUES.iter().position(|q| o.labels.iter().any(|(k, v)| *k == q.label && v == q.name)) else { continue };
        let (first, end) = (index(bound), index(p.finished.unwrap_or(we)));
        if first < end {
            deltas[q][first] += p.gpu_request as i64;
            deltas[q][end] -= p.gpu_request as i64;
        }
    }
    deltas
        .into_iter()
        .map(|d| {
            let mut in_use = 0;
            d[..steps]
                .iter()
                .map(|x| {
                    in_use += x;
                    in_use
                })
                .collect()
        })
        .collect()
}

/// A hop above the pod that kube-state-metrics exports as a series of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    /// `kube_replicaset_owner` or `kube_job_owner`.
    pub family: &'static str,
    /// Its identity label: `replicaset` or `job_name`.
    pub id_label: &'static str,
    pub name: String,
    pub owner_kind: &'static str,
    pub owner_name: String,
}

/// A pod's ownership as the cluster has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    /// The controller ownerReference (`kube_pod_owner`); None: a bare pod.
    pub owner: Option<(&'static str, String)>,
    /// The exported hop above the owner, where there is one.
    pub hop: Option<Hop>,
    /// The top-level workload (kind, name): the truth.
    pub workload: (&'static str, String),
    /// Kubernetes label keys (unsanitised) and values.
    pub labels: Vec<(&'static str, String)>,
}

impl Ownership {
    /// The workload as `Kind/name`.
    pub fn workload_key(&self) -> String {
        format!("{}/{}", self.workload.0, self.workload.1)
    }

    /// The labels as kube-state-metrics names them (without `label_`).
    pub fn ksm_labels(&self) -> BTreeMap<String, String> {
        self.labels.iter().map(|(k, v)| (crate::domain::ksm_label::sanitised(k), v.clone())).collect()
    }
}

/// Every pod's ownership (by pod index) over `window` (ms): Deployments roll out half-way.
pub fn all(namespaces: &[NamespaceSpec], pods: &[SimPod], window: (i64, i64)) -> Vec<Ownership> {
    let rollout_at = window.0 + (window.1 - window.0) / 2;
    pods.iter().map(|p| of(&namespaces[p.ns], p, rollout_at)).collect()
}

/// The owner series kube-state-metrics exports for these pods (`owners[i]` of pod `i` of
/// namespace `namespace_of(i)`): the hops above them.
pub fn series(owners: &[Ownership], namespace_of: impl Fn(usize) -> String) -> OwnerSeries {
    let mut out = OwnerSeries::default();
    for (i, o) in owners.iter().enumerate() {
        if let Some(hop) = &o.hop {
            let map = if hop.family == "kube_replicaset_owner" { &mut out.replicaset } else { &mut out.job };
            OwnerSeries::add(map, (namespace_of(i), hop.name.clone()), hop.owner_kind, &hop.owner_name, true);
        }
    }
    out
}

/// The pod's index among its namespace's arrivals (the name's numeric suffix).
fn seq_of(pod: &SimPod) -> u64 {
    pod.name.rsplit('-').next().and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// `n` characters from Kubernetes' name alphabet, from a hash of `seed` (FNV-1a).
fn suffix(seed: &str, n: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    (0..n)
        .map(|_| {
            let c = ALPHABET[(h % ALPHABET.len() as u64) as usize] as char;
            h /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// The ownership of `pod` (of namespace `ns`); `rollout_at`: the instant (ms) Deployments roll
/// out a new ReplicaSet.
pub fn of(ns: &NamespaceSpec, pod: &SimPod, rollout_at: i64) -> Ownership {
    let seq = seq_of(pod);
    let group = seq / 3;
    let short = ns.name.trim_start_matches("team-");
    let mut labels: Vec<(&'static str, String)> = vec![("app", ns.container.to_string()), ("team", ns.team.to_string())];
    let kueue = |labels: &mut Vec<(&'static str, String)>, cq: &str| {
        let lq = format!("{}-lq", ns.name);
        labels.push(("kueue.x-k8s.io/queue-name", lq.clone()));
        labels.push(("kueue.x-k8s.io/local-queue-name", lq));
        labels.push(("kueue.x-k8s.io/cluster-queue-name", cq.to_string()));
    };
    let deployment = |labels: &mut Vec<(&'static str, String)>, name: String| {
        let generation = if pod.created < rollout_at { "1" } else { "2" };
        let rs = format!("{name}-{}", suffix(&format!("{name}/{generation}"), 10));
        labels.push(("pod-template-hash", rs.rsplit('-').next().unwrap_or_default().to_string()));
        let hop = Hop { family: "kube_replicaset_owner", id_label: "replicaset", name: rs.clone(), owner_kind: "Deployment", owner_name: name.clone() };
        (Some(("ReplicaSet", rs)), Some(hop), ("Deployment", name))
    };
    let (owner, hop, workload) = match ns.container {
        "trainer" if group % 2 == 0 => {
            let job = format!("{short}-pt-{group}");
            labels.push(("training.kubeflow.org/job-name", job.clone()));
            labels.push(("training.kubeflow.org/operator-name", "pytorchjob-controller".into()));
            labels.push(("project", "llm".into()));
            kueue(&mut labels, "training-cq");
            (Some(("PyTorchJob", job.clone())), None, ("PyTorchJob", job))
        }
        "trainer" => {
            let jobset = format!("{short}-js-{group}");
            let job = format!("{jobset}-workers-{}", seq % 2);
            labels.push(("jobset.sigs.k8s.io/jobset-name", jobset.clone()));
            labels.push(("jobset.sigs.k8s.io/replicatedjob-name", "workers".into()));
            labels.push(("project", "llm".into()));
            kueue(&mut labels, "training-cq");
            let hop = Hop { family: "kube_job_owner", id_label: "job_name", name: job.clone(), owner_kind: "JobSet", owner_name: jobset.clone() };
            (Some(("Job", job)), Some(hop), ("JobSet", jobset))
        }
        "train" if group % 2 == 0 => {
            let rayjob = format!("{short}-ray-{group}");
            let cluster = format!("{rayjob}-{}", suffix(&rayjob, 5));
            labels.push(("ray.io/cluster", cluster.clone()));
            labels.push(("ray.io/node-type", if seq % 3 == 0 { "head" } else { "worker" }.into()));
            labels.push(("project", "llm".into()));
            kueue(&mut labels, "research-cq");
            // The submitter Job's series: the one exported link from a RayJob to its name.
            let hop = Hop { family: "kube_job_owner", id_label: "job_name", name: rayjob.clone(), owner_kind: "RayJob", owner_name: rayjob.clone() };
            (Some(("RayCluster", cluster)), Some(hop), ("RayJob", rayjob))
        }
        "train" => {
            let job = format!("{short}-pt-{group}");
            labels.push(("training.kubeflow.org/job-name", job.clone()));
            labels.push(("project", "vision".into()));
            kueue(&mut labels, "research-cq");
            (Some(("PyTorchJob", job.clone())), None, ("PyTorchJob", job))
        }
        "worker" => {
            labels.push(("project", "ads".into()));
            deployment(&mut labels, format!("{short}-ranker-{}", group % 3))
        }
        "server" if seq % 7 == 0 => (None, None, ("Pod", pod.name.clone())),
        "server" => {
            let d = group % 2;
            if d == 0 {
                labels.push(("project", "llm".into()));
            }
            deployment(&mut labels, format!("{short}-api-{d}"))
        }
        "notebook" => {
            let nb = format!("nb-user{}", group % 5);
            labels.push(("notebook-name", nb.clone()));
            labels.push(("statefulset", nb.clone()));
            kueue(&mut labels, "research-cq");
            (Some(("StatefulSet", nb.clone())), None, ("Notebook", nb))
        }
        "job" if group % 2 == 0 => {
            let cron = format!("{short}-nightly");
            let job = format!("{cron}-{}", pod.created.div_euclid(3_600_000) * 60);
            labels.push(("project", "etl".into()));
            let hop = Hop { family: "kube_job_owner", id_label: "job_name", name: job.clone(), owner_kind: "CronJob", owner_name: cron.clone() };
            (Some(("Job", job)), Some(hop), ("CronJob", cron))
        }
        _ => {
            let vcjob = format!("{short}-vc-{group}");
            labels.push(("volcano.sh/job-name", vcjob.clone()));
            labels.push(("volcano.sh/queue-name", "batch-q".into()));
            labels.push(("project", "etl".into()));
            (Some(("Job", vcjob.clone())), None, ("VolcanoJob", vcjob))
        }
    };
    Ownership { owner, hop, workload: (workload.0, workload.1), labels }
}

#[cfg(test)]
mod tests {
    use super::suffix;

    /// What kube-state-metrics exports of the simulated owners resolves to each pod's true
    /// workload (every shape the simulator has is resolvable: the labels and series it writes
    /// are the evidence).
    #[test]
    fn every_pod_resolves_to_its_true_workload() {
        let params = crate::simulate::SimParams {
            gpus: 64,
            days: 4,
            seed: 42,
            step_s: 60,
            start: chrono::NaiveDate::from_ymd_opt(2026, 10, 1).unwrap(),
            warmup_days: 1,
            target_util: 0.75,
            time_sliced: 0,
        };
        let sim = crate::simulate::Simulation::run(params).unwrap();
        let owners = sim.owners();
        let series = super::series(&owners, |i| sim.namespaces[sim.schedule.pods[i].ns].name.to_string());
        let mut kinds = std::collections::BTreeSet::new();
        for (i, o) in owners.iter().enumerate() {
            let p = &sim.schedule.pods[i];
            let ns = sim.namespaces[p.ns].name;
            let owner = o.owner.as_ref().map(|(k, n)| (*k, n.as_str()));
            let r = crate::domain::workload::resolve(ns, &p.name, owner, &o.ksm_labels(), &series);
            assert_eq!(r.key(), o.workload_key(), "{ns}/{}", p.name);
            kinds.insert(r.kind);
        }
        let all = ["CronJob", "Deployment", "JobSet", "Notebook", "Pod", "PyTorchJob", "RayJob", "VolcanoJob"];
        assert_eq!(kinds.iter().map(String::as_str).collect::<Vec<_>>(), all);
    }

    #[test]
    fn suffixes_are_kubernetes_names() {
        let s = suffix("recsys-ranker-0/1", 10);
        assert_eq!(s.len(), 10);
        assert!(s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)), "{s}");
        assert_ne!(s, suffix("recsys-ranker-0/2", 10));
    }
}
