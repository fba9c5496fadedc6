//! What a chargeback's rows are keyed by.

/// How the chargeback's rows are keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ChargeBy {
    /// One row per cluster and namespace (a namespace name in two clusters is two rows).
    #[default]
    Namespace,
    Team,
    CostCentre,
    /// One row per cluster (`prometheus.cluster_label`).
    Cluster,
}

impl ChargeBy {
    pub fn column(self) -> &'static str {
        match self {
            ChargeBy::Namespace => "namespace",
            ChargeBy::Team => "team",
            ChargeBy::CostCentre => "cost_centre",
            ChargeBy::Cluster => "cluster",
        }
    }
}
