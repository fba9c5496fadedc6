//! The schedulers' queue series -> `queue_quotas` (`shared/reference/queue-metrics.md`): per step,
//! scheduler, queue, flavor and GPU resource, the queue's quota and its use as the scheduler
//! reports them, in GPUs.
//!
//! - Kueue: `kueue_cluster_queue_nominal_quota`, `_borrowing_limit`, `_resource_usage` (admitted
//!   workloads) per ClusterQueue, flavor and resource (with `enableClusterQueueResources`),
//!   `_resource_pending` (no flavor), and the cohort from `kueue_cluster_queue_info` (always on).
//! - Volcano: `volcano_queue_{deserved,capacity,allocated,request}_scalar_resources` per queue
//!   and resource, in thousandths (1 GPU = 1000); pending is request less allocated.
//! - KAI: `kai_queue_deserved_gpus` (the queue's configured GPU quota) and
//!   `kai_queue_allocated_gpus` (its children's included).
//!
//! An unlimited borrowing limit (Kueue's `+Inf`) is stored as null.

use super::*;

/// One queue gauge: its scheduler and which column it fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gauge {
    Nominal,
    BorrowingLimit,
    Capacity,
    Allocated,
    Requested,
    Pending,
}

/// A queue's figures at one step (GPUs).
#[derive(Debug, Clone, Default)]
pub(super) struct QueueCell {
    nominal: Option<f64>,
    borrowing_limit: Option<f64>,
    capacity: Option<f64>,
    allocated: Option<f64>,
    requested: Option<f64>,
    pending: Option<f64>,
    cohort: Option<String>,
}

/// (step, scheduler, queue, flavor, resource)
pub(super) type QueueKey = (i64, &'static str, String, Option<String>, String);

/// The scheduler, column and scale (the divisor to GPUs) of a queue metric; None for the
/// cohort map and for metrics that are not queue gauges.
pub(super) fn gauge_of(metric: KubeMetric) -> Option<(&'static str, Gauge, f64)> {
    Some(match metric {
        KubeMetric::KueueNominal => ("kueue", Gauge::Nominal, 1.0),
        KubeMetric::KueueBorrowingLimit => ("kueue", Gauge::BorrowingLimit, 1.0),
        KubeMetric::KueueUsage => ("kueue", Gauge::Allocated, 1.0),
        KubeMetric::KueuePendingResources => ("kueue", Gauge::Pending, 1.0),
        KubeMetric::VolcanoDeserved => ("volcano", Gauge::Nominal, 1000.0),
        KubeMetric::VolcanoCapacity => ("volcano", Gauge::Capacity, 1000.0),
        KubeMetric::VolcanoAllocated => ("volcano", Gauge::Allocated, 1000.0),
        KubeMetric::VolcanoRequest => ("volcano", Gauge::Requested, 1000.0),
        KubeMetric::KaiDeserved => ("kai", Gauge::Nominal, 1.0),
        KubeMetric::KaiAllocated => ("kai", Gauge::Allocated, 1.0),
        _ => return None,
    })
}

impl KubeState {
    /// Adds one queue metric's series (see [`gauge_of`]); `kueue_cluster_queue_info` names each
    /// ClusterQueue's cohort.
    pub(super) fn add_queue(&mut self, metric: KubeMetric, series: &[Series]) {
        if metric == KubeMetric::KueueInfo {
            for s in series {
                let cohort = s.labels.get("root_cohort").or_else(|| s.labels.get("parent_cohort")).filter(|c| !c.is_empty());
                if let (Some(cq), Some(cohort)) = (s.labels.get("cluster_queue"), cohort) {
                    self.queue_cohorts.insert(cq.clone(), cohort.clone());
                }
            }
            return;
        }
        let Some((scheduler, gauge, scale)) = gauge_of(metric) else { return };
        for s in series {
            let queue = ["cluster_queue", "queue_name"].iter().find_map(|l| s.labels.get(*l)).filter(|q| !q.is_empty());
            let Some(queue) = queue else { continue };
            let flavor = s.labels.get("flavor").filter(|f| !f.is_empty()).cloned();
            let resource = s.labels.get("resource").cloned().unwrap_or_else(|| "nvidia.com/gpu".into());
            let cohort = s.labels.get("cohort").filter(|c| !c.is_empty()).cloned();
            for &(t, v) in &s.samples {
                let cell = self.cell(t);
                if cell < self.from || cell >= self.to {
                    continue;
                }
                let e = self.queues.entry((cell, scheduler, queue.clone(), flavor.clone(), resource.clone())).or_default();
                let v = sane(v).map(|v| v / scale);
                let slot = match gauge {
                    Gauge::Nominal => &mut e.nominal,
                    Gauge::BorrowingLimit => &mut e.borrowing_limit,
                    Gauge::Capacity => &mut e.capacity,
                    Gauge::Allocated => &mut e.allocated,
                    Gauge::Requested => &mut e.requested,
                    Gauge::Pending => &mut e.pending,
                };
                *slot = slot.or(v);
                if e.cohort.is_none() {
                    e.cohort = cohort.clone();
                }
            }
        }
    }

    /// `queue_quotas` rows for steps in `[c_start, c_end)`.
    pub fn queue_quotas_batch(&self, c_start: i64, c_end: i64) -> RecordBatch {
        let mut rows = QueueQuotasBuilder::new();
        for ((t, scheduler, queue, flavor, resource), c) in self.queues.range((c_start, "", String::new(), None, String::new())..) {
            if *t >= c_end {
                break;
            }
            let cohort = c.cohort.as_deref().or_else(|| self.queue_cohorts.get(queue).map(String::as_str));
            // Volcano reports what its jobs request, the running included.
            let pending = c.pending.or(match (c.requested, c.allocated) {
                (Some(r), a) => Some((r - a.unwrap_or(0.0)).max(0.0)),
                _ => None,
            });
            rows.push(&QueueQuotaRow {
                ts: *t,
                scheduler,
                queue,
                cohort,
                flavor: flavor.as_deref(),
                resource,
                nominal: c.nominal,
                borrowing_limit: c.borrowing_limit,
                capacity: c.capacity,
                allocated: c.allocated,
                pending,
            });
        }
        rows.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::s;
    use super::*;

    /// Kueue's GPUs are counts and its unlimited borrowing `+Inf`; Volcano's are thousandths and
    /// its pending demand is what is requested beyond what is allocated; the cohort comes from
    /// `kueue_cluster_queue_info` where the quota series has none.
    #[test]
    fn queue_gauges_in_gpus() {
        let mut k = KubeState::new(0, 60_000, 30);
        let cq = |extra: &[(&'static str, &'static str)]| {
            let mut l = vec![("cluster_queue", "cq"), ("flavor", "h100"), ("resource", "nvidia.com/gpu")];
            l.extend_from_slice(extra);
            l
        };
        k.add_queue(KubeMetric::KueueNominal, &[s(&cq(&[]), &[(0, 16.0), (30_000, 16.0)])]);
        k.add_queue(KubeMetric::KueueBorrowingLimit, &[s(&cq(&[]), &[(0, f64::INFINITY)])]);
        k.add_queue(KubeMetric::KueueUsage, &[s(&cq(&[]), &[(0, 12.0), (30_000, 20.0)])]);
        k.add_queue(KubeMetric::KueueInfo, &[s(&[("cluster_queue", "cq"), ("parent_cohort", "pool"), ("root_cohort", "pool")], &[(0, 1.0)])]);
        let vq = [("queue_name", "batch"), ("resource", "nvidia.com/gpu")];
        k.add_queue(KubeMetric::VolcanoDeserved, &[s(&vq, &[(0, 4000.0)])]);
        k.add_queue(KubeMetric::VolcanoAllocated, &[s(&vq, &[(0, 2500.0)])]);
        k.add_queue(KubeMetric::VolcanoRequest, &[s(&vq, &[(0, 4000.0)])]);
        let b = k.queue_quotas_batch(0, 60_000);
        let col = |n: &str| arrow::compute::cast(b.column_by_name(n).unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
        let text = |n: &str, i: usize| {
            let c = col(n);
            let c = c.as_any().downcast_ref::<arrow::array::StringArray>().unwrap();
            arrow::array::Array::is_valid(c, i).then(|| c.value(i).to_string())
        };
        let f = |n: &str, i: usize| b.column_by_name(n).unwrap().as_any().downcast_ref::<arrow::array::Float64Array>().unwrap().iter().nth(i).unwrap();
        assert_eq!(b.num_rows(), 3, "cq at two steps, batch at one");
        assert_eq!((text("scheduler", 0), text("queue", 0), text("cohort", 0)), (Some("kueue".into()), Some("cq".into()), Some("pool".into())));
        assert_eq!((f("nominal", 0), f("borrowing_limit", 0), f("allocated", 0), f("allocated", 2)), (Some(16.0), None, Some(12.0), Some(20.0)));
        assert_eq!((text("scheduler", 1), f("nominal", 1), f("allocated", 1), f("pending", 1)), (Some("volcano".into()), Some(4.0), Some(2.5), Some(1.5)));
    }
}
