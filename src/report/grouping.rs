//! A report's rows by namespace, or by a key of each pod (`--by workload`, `queue`,
//! `label:KEY`, ...): each pod's value, `__unattributed__` where it has none. For the reports
//! that count or time pods (the queue's waits and pending demand, the events); the chargeback
//! splits money by the same values (`chargeback::attribution`).

use std::collections::HashMap;

use datafusion::prelude::SessionContext;

use super::chargeback::{pod_values, ChargeBy, UNATTRIBUTED};
use super::Result;
use crate::domain::window::Window;
use crate::queries::Queries;

pub struct Grouping {
    /// The key of each pod, or None by namespace.
    by: Option<ChargeBy>,
    /// By (cluster, namespace, pod name), each pod's value.
    values: HashMap<(String, String, String), String>,
}

impl Grouping {
    /// By `by` over `window`: its pods' values where it is a key of each pod, else by namespace.
    pub async fn of(ctx: &SessionContext, queries: &Queries, window: &Window, by: &ChargeBy) -> Result<Grouping> {
        if !by.is_per_pod() {
            return Ok(Grouping { by: None, values: HashMap::new() });
        }
        Ok(Grouping { by: Some(by.clone()), values: pod_values(ctx, queries, window, by).await?.values })
    }

    /// Whether rows group by a key of each pod.
    pub fn per_pod(&self) -> bool {
        self.by.is_some()
    }

    /// The key of each pod, if rows group by one.
    pub fn key(&self) -> Option<&ChargeBy> {
        self.by.as_ref()
    }

    /// The group of the pod `pod` of `cluster` and `ns`, and whether it has a value (always,
    /// by namespace).
    pub fn group(&self, cluster: &str, ns: &str, pod: &str) -> (String, bool) {
        if self.by.is_none() {
            return (ns.to_string(), true);
        }
        match self.values.get(&(cluster.to_string(), ns.to_string(), pod.to_string())) {
            Some(v) => (v.clone(), true),
            None => (UNATTRIBUTED.to_string(), false),
        }
    }

    /// The group column's name: `namespace`, or the key's (`workload`, `label_project`).
    pub fn column(&self) -> String {
        self.by.as_ref().map_or_else(|| "namespace".to_string(), ChargeBy::column)
    }

    /// " by workload" for a title; nothing by namespace.
    pub fn words(&self) -> String {
        self.by.as_ref().map_or_else(String::new, |b| format!(" by {}", b.words()))
    }
}
