//! The schedulers' queue series (`shared/reference/queue-metrics.md`): Kueue's ClusterQueues
//! (`kueue_cluster_queue_info`, and with `enableClusterQueueResources` their nominal quota,
//! borrowing limit and admitted usage of `nvidia.com/gpu` per flavor) and Volcano's queue
//! (`volcano_queue_{deserved,capacity,allocated}_scalar_resources`, in thousandths of a GPU).
//! A queue's usage at a step is the GPUs requested by its pods bound then
//! (`simulate::owners::queue_usage`).

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
        let usage = crate::simulate::owners::queue_usage(&sim.schedule.pods, owners, (ws, we), step);
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
            self.usage_samples("kueue_cluster_queue_resource_usage", &labels, &usage[qi], &steps, 1)?;
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
                    "allocated" => self.usage_samples(family, &labels, &usage[qi], &steps, 1000)?,
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

    /// A queue's GPUs in use at each step, times `scale`.
    fn usage_samples(&mut self, family: &str, labels: &str, usage: &[i64], steps: &[i64], scale: i64) -> io::Result<()> {
        for (&ts, &in_use) in steps.iter().zip(usage) {
            self.sample(family, labels, &format!("{}", in_use * scale), ts)?;
        }
        Ok(())
    }
}
