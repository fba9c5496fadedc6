//! A pod's top-level workload, resolved from what kube-state-metrics (and KubeRay's operator)
//! export (`shared/reference/owner-chains.md` §2, §3): the pod's controller ownerReference
//! (`kube_pod_owner`), one hop above it where an owner series exists (`kube_replicaset_owner`,
//! `kube_job_owner`, `kube_deployment_owner`), and the pod's labels where no series reaches
//! (a StatefulSet's Notebook or LeaderWorkerSet, a Volcano Job, a RayCluster's RayJob).
//!
//! Every hop not read from an owner series is named in [`Resolved::inferred`], never silent.

use std::collections::{BTreeMap, BTreeSet};

/// `(namespace, name)` of an owner series' object.
pub type Object = (String, String);

/// The owner series of a window: per object, its controller `(kind, name)`, or None where the
/// series says it has no owner (`owner_kind=""`, or `<none>` before kube-state-metrics 2.8).
#[derive(Debug, Clone, Default)]
pub struct OwnerSeries {
    /// `kube_replicaset_owner`.
    pub replicaset: BTreeMap<Object, Option<(String, String)>>,
    /// `kube_job_owner` (batch/v1 Jobs only: a Volcano Job has no series).
    pub job: BTreeMap<Object, Option<(String, String)>>,
    /// `kube_deployment_owner` (kube-state-metrics 2.18 and later).
    pub deployment: BTreeMap<Object, Option<(String, String)>>,
    /// KubeRay's `kuberay_cluster_info`: a RayCluster's `owner_kind` (`RayJob`, `RayService`,
    /// `None`), without the owner's name.
    pub ray_cluster: BTreeMap<Object, String>,
}

impl OwnerSeries {
    /// Records one owner series: `kind` empty or `<none>` is "no owner"; a controller reference
    /// wins over another reference of the same object.
    pub fn add(map: &mut BTreeMap<Object, Option<(String, String)>>, object: Object, kind: &str, name: &str, controller: bool) {
        if kind.is_empty() || kind == "<none>" {
            map.entry(object).or_insert(None);
        } else if controller {
            map.insert(object, Some((kind.to_string(), name.to_string())));
        } else {
            map.entry(object)
                .and_modify(|o| _ = o.get_or_insert_with(|| (kind.to_string(), name.to_string())))
                .or_insert(Some((kind.to_string(), name.to_string())));
        }
    }

    /// The RayJobs of `namespace` this window names: owners of Jobs (a RayJob's submitter Job).
    fn ray_jobs(&self, namespace: &str) -> BTreeSet<&str> {
        self.job.iter().filter(|((ns, _), _)| ns == namespace).filter_map(|(_, o)| o.as_ref().filter(|(k, _)| k == "RayJob").map(|(_, n)| n.as_str())).collect()
    }
}

/// A pod's resolved workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The hops from the pod's owner to the top, ` > ` between them.
    pub chain: String,
    pub kind: String,
    pub name: String,
    /// What was inferred and from what, where a hop came from no owner series.
    pub inferred: Option<&'static str>,
}

impl Resolved {
    /// `Kind/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }
}

/// Why a hop was inferred (the `inferred` column, counted in the run's log).
pub const BY_NOTEBOOK_LABEL: &str = "Notebook from the pod's notebook-name label";
pub const BY_LWS_LABEL: &str = "LeaderWorkerSet from the pod's leaderworkerset.sigs.k8s.io/name label";
pub const BY_VOLCANO_LABEL: &str = "Volcano Job: a Job with no kube_job_owner series and the pod's volcano.sh/job-name label";
pub const NO_JOB_SERIES: &str = "a Job with no kube_job_owner series: taken as top-level";
pub const BY_RAYJOB_NAME: &str = "RayJob from the RayCluster's name (<rayjob>-<5 characters>) and the RayJob's submitter Job";
pub const BY_RAYJOB_INFO: &str = "RayJob from the RayCluster's name (<rayjob>-<5 characters>), kuberay_cluster_info saying a RayJob owns it";
pub const BY_RS_NAME: &str = "Deployment from the ReplicaSet's name (<deployment>-<hash>): no kube_replicaset_owner series";

/// The top-level workload of pod `pod` in `namespace`, whose controller reference is `owner`
/// (`kind`, `name`) and whose labels (kube-state-metrics names, without `label_`) are `labels`.
pub fn resolve(namespace: &str, pod: &str, owner: Option<(&str, &str)>, labels: &BTreeMap<String, String>, series: &OwnerSeries) -> Resolved {
    let object = |name: &str| (namespace.to_string(), name.to_string());
    let at = |kind: &str, name: &str, chain: Vec<String>, inferred: Option<&'static str>| Resolved {
        chain: chain.join(" > "),
        kind: kind.to_string(),
        name: name.to_string(),
        inferred,
    };
    let Some((kind, name)) = owner.filter(|(k, _)| !k.is_empty() && *k != "<none>") else {
        return at("Pod", pod, vec![], None);
    };
    let first = format!("{kind}/{name}");
    let label = |key: &str| labels.get(key).filter(|v| !v.is_empty()).map(String::as_str);
    match kind {
        "ReplicaSet" => match series.replicaset.get(&object(name)) {
            Some(Some((k, n))) if k == "Deployment" => {
                // A Deployment owned in turn (kube_deployment_owner, 2.18 and later).
                match series.deployment.get(&object(n)) {
                    Some(Some((k2, n2))) => at(k2, n2, vec![first, format!("Deployment/{n}"), format!("{k2}/{n2}")], None),
                    _ => at("Deployment", n, vec![first, format!("Deployment/{n}")], None),
                }
            }
            Some(Some((k, n))) => at(k, n, vec![first, format!("{k}/{n}")], None),
            Some(None) => at("ReplicaSet", name, vec![first], None),
            None => match label("pod_template_hash").and_then(|h| name.strip_suffix(&format!("-{h}"))) {
                Some(deployment) => at("Deployment", deployment, vec![first, format!("Deployment/{deployment}")], Some(BY_RS_NAME)),
                None => at("ReplicaSet", name, vec![first], None),
            },
        },
        "Job" => match series.job.get(&object(name)) {
            Some(Some((k, n))) => at(k, n, vec![first, format!("{k}/{n}")], None),
            Some(None) => at("Job", name, vec![first], None),
            None if label("volcano_sh_job_name") == Some(name) => at("VolcanoJob", name, vec![format!("VolcanoJob/{name}")], Some(BY_VOLCANO_LABEL)),
            None => at("Job", name, vec![first], Some(NO_JOB_SERIES)),
        },
        "StatefulSet" => {
            if let Some(nb) = label("notebook_name") {
                at("Notebook", nb, vec![first, format!("Notebook/{nb}")], Some(BY_NOTEBOOK_LABEL))
            } else if let Some(lws) = label("leaderworkerset_sigs_k8s_io_name") {
                at("LeaderWorkerSet", lws, vec![first, format!("LeaderWorkerSet/{lws}")], Some(BY_LWS_LABEL))
            } else {
                at("StatefulSet", name, vec![first], None)
            }
        }
        "RayCluster" => {
            // KubeRay names a RayJob's cluster `<rayjob>-<5 random characters>`.
            let stem =
                name.rsplit_once('-').filter(|(_, tail)| tail.len() == 5 && tail.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())).map(|(s, _)| s);
            let info = series.ray_cluster.get(&object(name)).map(String::as_str);
            match (stem, info) {
                (Some(rj), _) if series.ray_jobs(namespace).contains(rj) => at("RayJob", rj, vec![first, format!("RayJob/{rj}")], Some(BY_RAYJOB_NAME)),
                (Some(rj), Some("RayJob")) => at("RayJob", rj, vec![first, format!("RayJob/{rj}")], Some(BY_RAYJOB_INFO)),
                _ => at("RayCluster", name, vec![first], None),
            }
        }
        // A CRD owner (PyTorchJob, TFJob, MPIJob, TrainJob, RayCluster, LeaderWorkerSet,
        // Workflow ...) or a DaemonSet: top-level as it is.
        _ => at(kind, name, vec![first], None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn series() -> OwnerSeries {
        let mut s = OwnerSeries::default();
        let o = |n: &str| ("ml".to_string(), n.to_string());
        OwnerSeries::add(&mut s.replicaset, o("web-5d8f7c9b4"), "Deployment", "web", true);
        OwnerSeries::add(&mut s.replicaset, o("loose-6c9d"), "", "", false);
        OwnerSeries::add(&mut s.job, o("nightly-29012345"), "CronJob", "nightly", true);
        OwnerSeries::add(&mut s.job, o("llm-workers-0"), "JobSet", "llm", true);
        OwnerSeries::add(&mut s.job, o("train"), "RayJob", "train", true);
        OwnerSeries::add(&mut s.job, o("once"), "<none>", "<none>", false);
        s.ray_cluster.insert(o("serve-ab12c"), "RayService".into());
        s.ray_cluster.insert(o("other-x7k2p"), "RayJob".into());
        s
    }

    fn key(owner: Option<(&str, &str)>, l: &[(&str, &str)]) -> (String, Option<&'static str>) {
        let r = resolve("ml", "p-0", owner, &labels(l), &series());
        (r.key(), r.inferred)
    }

    #[test]
    fn each_chain_of_the_reference_resolves_to_its_top() {
        assert_eq!(key(None, &[]), ("Pod/p-0".into(), None));
        assert_eq!(key(Some(("<none>", "<none>")), &[]), ("Pod/p-0".into(), None), "kube-state-metrics before 2.8");
        assert_eq!(key(Some(("ReplicaSet", "web-5d8f7c9b4")), &[]), ("Deployment/web".into(), None));
        assert_eq!(key(Some(("ReplicaSet", "loose-6c9d")), &[]), ("ReplicaSet/loose-6c9d".into(), None), "a ReplicaSet of its own");
        assert_eq!(key(Some(("ReplicaSet", "api-7f9c")), &[("pod_template_hash", "7f9c")]), ("Deployment/api".into(), Some(BY_RS_NAME)));
        assert_eq!(key(Some(("Job", "nightly-29012345")), &[]), ("CronJob/nightly".into(), None));
        assert_eq!(key(Some(("Job", "llm-workers-0")), &[]), ("JobSet/llm".into(), None));
        assert_eq!(key(Some(("Job", "once")), &[]), ("Job/once".into(), None));
        assert_eq!(key(Some(("Job", "vc-1")), &[("volcano_sh_job_name", "vc-1")]), ("VolcanoJob/vc-1".into(), Some(BY_VOLCANO_LABEL)));
        assert_eq!(key(Some(("Job", "gone")), &[]), ("Job/gone".into(), Some(NO_JOB_SERIES)));
        assert_eq!(key(Some(("PyTorchJob", "bert")), &[]), ("PyTorchJob/bert".into(), None));
        assert_eq!(key(Some(("StatefulSet", "nb")), &[("notebook_name", "nb")]), ("Notebook/nb".into(), Some(BY_NOTEBOOK_LABEL)));
        assert_eq!(key(Some(("StatefulSet", "lws")), &[("leaderworkerset_sigs_k8s_io_name", "lws")]), ("LeaderWorkerSet/lws".into(), Some(BY_LWS_LABEL)));
        assert_eq!(key(Some(("StatefulSet", "db")), &[]), ("StatefulSet/db".into(), None));
        assert_eq!(key(Some(("RayCluster", "train-x7k2p")), &[]), ("RayJob/train".into(), Some(BY_RAYJOB_NAME)));
        assert_eq!(key(Some(("RayCluster", "other-x7k2p")), &[]), ("RayJob/other".into(), Some(BY_RAYJOB_INFO)));
        assert_eq!(key(Some(("RayCluster", "serve-ab12c")), &[]), ("RayCluster/serve-ab12c".into(), None), "a RayService's cluster is not guessed");
        assert_eq!(key(Some(("RayCluster", "solo")), &[]), ("RayCluster/solo".into(), None));
    }

    #[test]
    fn a_controller_reference_wins_and_the_chain_is_kept() {
        let mut m = BTreeMap::new();
        OwnerSeries::add(&mut m, ("ml".into(), "x".into()), "Other", "o", false);
        OwnerSeries::add(&mut m, ("ml".into(), "x".into()), "Deployment", "d", true);
        OwnerSeries::add(&mut m, ("ml".into(), "x".into()), "Third", "t", false);
        assert_eq!(m[&("ml".into(), "x".into())], Some(("Deployment".into(), "d".into())));
        let r = resolve("ml", "p", Some(("ReplicaSet", "web-5d8f7c9b4")), &BTreeMap::new(), &series());
        assert_eq!(r.chain, "ReplicaSet/web-5d8f7c9b4 > Deployment/web");
    }
}
