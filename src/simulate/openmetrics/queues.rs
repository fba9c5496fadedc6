//! The schedulers' queue series (`shared/reference/queue-metrics.md`): Kueue's ClusterQueues
//! (`kueue_cluster_queue_info`, and with `enableClusterQueueResources` their nominal quota,
//! borrowing limit and admitted usage of `nvidia.com/gpu` per flavor) and Volcano's queue
//! (`volcano_queue_{deserved,capacity,allocated}_scalar_resources`, in thousandths of a GPU).
//! A queue's usage at a step is the GPUs requested by its pods bound then (the pods' queue
//! labels, `simulate::owners`).

use super::*;
use crate::simulate::owners::{Ownership, SimQueue, COHORT, QUEUES};

impl<W: Write> OmWriter<'_, W> {
    pub(super) fn queue_families(&mut self, owners: &[Ownership]) -> io::Result<()> {
        let sim = self.sim;
        let step = self.model.step_ms;
        let (ws, we) = sim.params.window_ms();
        let gpus = sim.cluster.gpu_count();
        let kueue = "instance=\"10.0.0.7:8443\",job=\"kueue-controller-manager\",replica_role=\"leader\"";
        let volcano = "instance=\"10.0.0.8:8080\",job=\"volcano-scheduler\"";
        // Each queue's GPUs in use at each step: +request when a pod of it is bound, -request
        // when it ends.
        let mut deltas: Vec<BTreeMap<i64, i64>> = QUEUES.iter().map(|_| BTreeMap::new()).collect();
        for (i, p) in sim.schedule.pods.iter().enumerate() {
            let Some(bound) = p.scheduled else { continue };
            let Some(q) = QUEUES.iter().position(|q| owners[i].labels.iter().any(|(k, v)| *k == q.label && v == q.name)) else { continue };
            let first = ws + (bound.max(ws) - ws + step - 1).div_euclid(step) * step;
            let end = p.finished.map_or(we, |f| ws + (f.min(we) - ws + step - 1).div_euclid(step) * step);
            if first < end {
                *deltas[q].entry(first).or_default() += p.gpu_request as i64;
                *deltas[q].entry(end).or_default() -= p.gpu_request as i64;
            }
        }
        let steps: Vec<i64> = (ws..we).step_by(step as usize).collect();
        self.family("kueue_cluster_queue_info", "Reports the cluster queue's cohort hierarchy")?;
        for q in QUEUES.iter().filter(|q| q.scheduler == "kueue") {
            let labels = format!("cluster_queue=\"{}\",parent_cohort=\"{COHORT}\",root_cohort=\"{COHORT}\",{kueue}", q.name);
            for &ts in &steps {
                self.sample("kueue_cluster_queue_info", &labels, "1", ts)?;
            }
        }
        for (family, value) in
            [("kueue_cluster_queue_nominal_quota", &|q: &SimQueue| q.nominal(gpus)), ("kueue_cluster_queue_borrowing_limit", &|q: &SimQueue| q.limit(gpus))]
                as [(&str, &dyn Fn(&SimQueue) -> f64); 2]
        {
            self.family(family, "Reports the cluster queue's resource quota")?;
            for q in QUEUES.iter().filter(|q| q.scheduler == "kueue") {
                let labels = format!("cohort=\"{COHORT}\",cluster_queue=\"{}\",flavor=\"default-flavor\",resource=\"nvidia.com/gpu\",{kueue}", q.name);
                for &ts in &steps {
                    self.sample(family, &labels, &format!("{}", value(q)), ts)?;
                }
            }
        }
        self.family("kueue_cluster_queue_resource_usage", "Reports the cluster queue's total resource usage")?;
        for (qi, q) in QUEUES.iter().enumerate().filter(|(_, q)| q.scheduler == "kueue") {
            let labels = format!("cohort=\"{COHORT}\",cluster_queue=\"{}\",flavor=\"default-flavor\",resource=\"nvidia.com/gpu\",{kueue}", q.name);
            self.usage_samples("kueue_cluster_queue_resource_usage", &labels, &deltas[qi], &steps, 1)?;
        }
        for (family, what) in [
            ("volcano_queue_deserved_scalar_resources", "deserved"),
            ("volcano_queue_capacity_scalar_resources", "capacity"),
            ("volcano_queue_allocated_scalar_resources", "allocated"),
        ] {
            self.family(family, "Scalar resources of the queue, in milli-units")?;
            for (qi, q) in QUEUES.iter().enumerate().filter(|(_, q)| q.scheduler == "volcano") {
                let labels = format!("queue_name=\"{}\",resource=\"nvidia.com/gpu\",{volcano}", q.name);
                match what {
                    "allocated" => self.usage_samples(family, &labels, &deltas[qi], &steps, 1000)?,
                    _ => {
                        let v = if what == "deserved" { q.nominal(gpus) } else { q.limit(gpus) } * 1000.0;
                        for &ts in &steps {
                            self.sample(family, &labels, &format!("{v}"), ts)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// A queue's GPUs in use at each step (the running sum of `deltas`), times `scale`.
    fn usage_samples(&mut self, family: &str, labels: &str, deltas: &BTreeMap<i64, i64>, steps: &[i64], scale: i64) -> io::Result<()> {
        let mut in_use = 0;
        let mut next = deltas.iter().peekable();
        for &ts in steps {
            while let Some((_, d)) = next.next_if(|(t, _)| **t <= ts) {
                in_use += d;
            }
            self.sample(family, labels, &format!("{}", in_use * scale), ts)?;
        }
        Ok(())
    }
}
