//! Spreading what no tenant asked for (the idle pool, shared namespaces) over the rows that
//! receive it, by `pricing.idle_policy` and `pricing.shared_policy`, exactly.

use std::collections::BTreeMap;

use super::*;
use crate::config::{Config, CostBasis, SpreadPolicy};
use crate::domain::money::{round_ratio, split};

impl Chargeback {
    /// Per cluster and namespace, with `__unallocated__` and shared namespaces spread by the
    /// config's policies within each cluster (a cluster's idle GPUs are its namespaces' to
    /// carry). Money moved is exact: the rows' totals sum to the clusters' basis cost.
    pub fn namespaces(&self, config: &Config) -> Vec<NamespaceCharge> {
        let mut by_cluster: BTreeMap<&str, BTreeMap<&str, Quantities>> = BTreeMap::new();
        for r in &self.detail {
            by_cluster.entry(&r.cluster).or_default().entry(&r.namespace).or_default().add(&r.q);
        }
        let mut out = Vec::new();
        for (cluster, by_ns) in by_cluster {
            out.extend(self.spread_in_cluster(config, cluster, by_ns));
        }
        out
    }

    fn spread_in_cluster(&self, config: &Config, cluster: &str, by_ns: BTreeMap<&str, Quantities>) -> Vec<NamespaceCharge> {
        let mut rows: Vec<NamespaceCharge> = by_ns
            .into_iter()
            .map(|(ns, q)| NamespaceCharge { cluster: cluster.to_string(), namespace: ns.to_string(), owner: self.owner(config, ns), q, spread: 0 })
            .collect();
        for policy in [config.shared_policy(), config.idle_policy()] {
            if let SpreadPolicy::Owner(owner) = policy {
                if !rows.iter().any(|r| r.namespace == owner) {
                    let o = self.owner(config, &owner);
                    rows.push(NamespaceCharge { cluster: cluster.to_string(), namespace: owner, owner: o, q: Quantities::default(), spread: 0 });
                }
            }
        }
        rows.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        let basis = config.pricing.basis;
        let shared: Vec<&str> = config.pricing.shared_namespaces.iter().map(String::as_str).collect();
        let donors_shared: Vec<usize> = rows.iter().enumerate().filter(|(_, r)| shared.contains(&r.namespace.as_str())).map(|(i, _)| i).collect();
        spread(&mut rows, &donors_shared, &config.shared_policy(), basis, &shared);
        let donors_idle: Vec<usize> = rows.iter().enumerate().filter(|(_, r)| r.namespace == UNALLOCATED).map(|(i, _)| i).collect();
        spread(&mut rows, &donors_idle, &config.idle_policy(), basis, &shared);
        rows
    }
}

/// Moves each donor's basis cost onto the receivers `policy` names. Proportional weights are
/// the receivers' own basis cost (in cents), else their GPU time; donors, `__unallocated__`,
/// `__unmeasured__` and shared namespaces never receive. An owner must already have a row.
fn spread(rows: &mut [NamespaceCharge], donors: &[usize], policy: &SpreadPolicy, basis: CostBasis, shared: &[&str]) {
    let receivers: Vec<usize> = match policy {
        SpreadPolicy::Separate => return,
        SpreadPolicy::Owner(owner) => rows.iter().position(|r| &r.namespace == owner).into_iter().collect(),
        SpreadPolicy::Proportional => rows
            .iter()
            .enumerate()
            .filter(|(i, r)| !donors.contains(i) && r.namespace != UNALLOCATED && r.namespace != UNMEASURED && !shared.contains(&r.namespace.as_str()))
            .map(|(i, _)| i)
            .collect(),
    };
    if receivers.is_empty() {
        return;
    }
    let cents: Vec<i128> = receivers.iter().map(|&i| round_ratio(rows[i].q.basis_cost(basis).max(0), RAW_PER_UNIT, 2)).collect();
    let weights = if receivers.len() == 1 {
        vec![1]
    } else if cents.iter().sum::<i128>() > 0 {
        cents
    } else {
        receivers.iter().map(|&i| (rows[i].q.gpu_us as i128) / 360_000).collect()
    };
    if weights.iter().sum::<i128>() <= 0 {
        return;
    }
    for &d in donors {
        let give = rows[d].total(basis);
        if give == 0 {
            continue;
        }
        rows[d].spread -= give;
        for (k, part) in split(give, &weights).into_iter().enumerate() {
            rows[receivers[k]].spread += part;
        }
    }
}
