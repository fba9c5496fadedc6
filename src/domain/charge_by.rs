//! What a chargeback's rows are keyed by: a namespace or what a namespace maps to (team, cost
//! centre, cluster), or something each pod says of itself (its top-level workload, its scheduler
//! queue, a label or an annotation), which splits a namespace's rows between its pods' keys.

use std::fmt;
use std::str::FromStr;

use super::ksm_label::sanitised;

/// How the chargeback's rows are keyed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ChargeBy {
    /// One row per cluster and namespace (a namespace name in two clusters is two rows).
    #[default]
    Namespace,
    Team,
    CostCentre,
    /// One row per cluster (`prometheus.cluster_label`).
    Cluster,
    /// The pod's top-level workload, `Kind/name` (`pod_owners`).
    Workload,
    /// The Kueue LocalQueue (`kueue.x-k8s.io/local-queue-name`), else the Volcano queue, else
    /// the KAI queue of the pod's labels and annotations.
    Queue,
    /// The Kueue ClusterQueue (`kueue.x-k8s.io/cluster-queue-name`).
    ClusterQueue,
    /// The cohort of the pod's Kueue ClusterQueue (`queue_quotas`).
    Cohort,
    /// A pod label, as kube-state-metrics names it (`app_kubernetes_io_part_of`).
    Label(String),
    /// A pod annotation, as kube-state-metrics names it.
    Annotation(String),
}

/// The keys `--by` takes, for messages and `--help`.
pub const KEYS: &str = "namespace, team, cost-centre, cluster, workload, queue, cluster-queue, cohort, label:KEY, annotation:KEY";

impl ChargeBy {
    /// The name of the report's key column.
    pub fn column(&self) -> String {
        match self {
            ChargeBy::Namespace => "namespace".into(),
            ChargeBy::Team => "team".into(),
            ChargeBy::CostCentre => "cost_centre".into(),
            ChargeBy::Cluster => "cluster".into(),
            ChargeBy::Workload => "workload".into(),
            ChargeBy::Queue => "queue".into(),
            ChargeBy::ClusterQueue => "cluster_queue".into(),
            ChargeBy::Cohort => "cohort".into(),
            ChargeBy::Label(k) => format!("label_{k}"),
            ChargeBy::Annotation(k) => format!("annotation_{k}"),
        }
    }

    /// Whether each pod has its own value of the key (so a namespace's rows are split between
    /// its pods' values), rather than the namespace one.
    pub fn is_per_pod(&self) -> bool {
        !matches!(self, ChargeBy::Namespace | ChargeBy::Team | ChargeBy::CostCentre | ChargeBy::Cluster)
    }

    /// Words for a title: "by workload", "by label project".
    pub fn words(&self) -> String {
        match self {
            ChargeBy::CostCentre => "cost centre".into(),
            ChargeBy::ClusterQueue => "ClusterQueue".into(),
            ChargeBy::Label(k) => format!("label {k}"),
            ChargeBy::Annotation(k) => format!("annotation {k}"),
            other => other.column(),
        }
    }
}

impl fmt::Display for ChargeBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChargeBy::CostCentre => f.write_str("cost-centre"),
            ChargeBy::ClusterQueue => f.write_str("cluster-queue"),
            ChargeBy::Label(k) => write!(f, "label:{k}"),
            ChargeBy::Annotation(k) => write!(f, "annotation:{k}"),
            other => f.write_str(&other.column()),
        }
    }
}

impl FromStr for ChargeBy {
    type Err = String;

    /// `label:KEY` and `annotation:KEY` take the Kubernetes key (`app.kubernetes.io/part-of`)
    /// or its kube-state-metrics name (`app_kubernetes_io_part_of`): both name one key.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let keyed = |key: &str| {
            let key = sanitised(key.trim());
            if key.is_empty() {
                Err(format!("`{s}` names no key: give label:KEY or annotation:KEY, e.g. label:project"))
            } else {
                Ok(key)
            }
        };
        Ok(match s {
            "namespace" => ChargeBy::Namespace,
            "team" => ChargeBy::Team,
            "cost-centre" | "cost_centre" => ChargeBy::CostCentre,
            "cluster" => ChargeBy::Cluster,
            "workload" => ChargeBy::Workload,
            "queue" => ChargeBy::Queue,
            "cluster-queue" | "cluster_queue" => ChargeBy::ClusterQueue,
            "cohort" => ChargeBy::Cohort,
            _ => match s.split_once(':') {
                Some(("label", key)) => ChargeBy::Label(keyed(key)?),
                Some(("annotation", key)) => ChargeBy::Annotation(keyed(key)?),
                _ => return Err(format!("unknown key `{s}`: one of {KEYS}")),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_reads_back_as_it_prints() {
        for s in ["namespace", "team", "cost-centre", "cluster", "workload", "queue", "cluster-queue", "cohort", "label:project", "annotation:owner_email"] {
            assert_eq!(s, s.parse::<ChargeBy>().unwrap().to_string());
        }
    }

    #[test]
    fn a_label_key_is_named_as_kube_state_metrics_names_it() {
        let by: ChargeBy = "label:app.kubernetes.io/part-of".parse().unwrap();
        assert_eq!(ChargeBy::Label("app_kubernetes_io_part_of".into()), by);
        assert_eq!("label_app_kubernetes_io_part_of", by.column());
        assert!(by.is_per_pod());
        assert!(!ChargeBy::Team.is_per_pod());
        assert!("label:".parse::<ChargeBy>().is_err());
        assert!("project".parse::<ChargeBy>().unwrap_err().contains("label:KEY"));
    }
}
