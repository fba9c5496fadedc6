//! Writes the simulated history into the lake, one file per table and day.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use arrow::array::RecordBatch;
use chrono::{DateTime, NaiveDate};

use super::cluster::{Cluster, MAX_UNITS};
use super::owners::Ownership;
use super::scheduler::Schedule;
use super::signals::{SignalModel, UnitCursor};
use super::workload::NamespaceSpec;
use crate::domain::workload::OwnerSeries;
use crate::lake::rows::with_cluster;
use crate::lake::rows::{
    GpuSampleRow, GpuSamplesBuilder, NodeRow, NodesBuilder, PendingBuilder, PendingRow, PodLabelRow, PodLabelsBuilder, PodOwnerRow, PodOwnersBuilder, PodRow,
    PodsBuilder, QueueQuotaRow, QueueQuotasBuilder, QuotaRow, QuotasBuilder,
};
use crate::lake::{write_partition, Lake, Table, WriteError};
use crate::progress::Progress;

const DAY_MS: i64 = 86_400_000;

pub struct LakeOutput<'a> {
    pub lake: &'a Lake,
    pub cluster: &'a Cluster,
    pub namespaces: &'a [NamespaceSpec],
    pub schedule: &'a Schedule,
    pub model: &'a SignalModel<'a>,
    pub window: (i64, i64),
    /// The `cluster` of every row.
    pub cluster_name: &'a str,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct WriteStats {
    pub files: usize,
    pub gpu_rows: usize,
    pub pod_rows: usize,
    pub pending_rows: usize,
}

impl LakeOutput<'_> {
    fn days(&self) -> Vec<(NaiveDate, i64, i64)> {
        let (ws, we) = self.window;
        let mut days = Vec::new();
        let mut d = ws.div_euclid(DAY_MS) * DAY_MS;
        while d < we {
            let date = DateTime::from_timestamp_millis(d).expect("valid").date_naive();
            days.push((date, d.max(ws), (d + DAY_MS).min(we)));
            d += DAY_MS;
        }
        days
    }

    /// Writes every day of the window on `threads` threads.
    pub fn write_all(&self, threads: usize, progress: &Progress) -> Result<WriteStats, WriteError> {
        let days = self.days();
        let owners = super::owners::all(self.namespaces, &self.schedule.pods, self.window);
        let queues = super::owners::queue_usage(&self.schedule.pods, &owners, self.window, self.model.step_ms);
        let next = AtomicUsize::new(0);
        let stats = Mutex::new(WriteStats::default());
        let first_error: Mutex<Option<WriteError>> = Mutex::new(None);
        std::thread::scope(|scope| {
            for _ in 0..threads.max(1) {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= days.len() || first_error.lock().expect("lock").is_some() {
                        break;
                    }
                    let (date, s, e) = days[i];
                    match self.write_day(date, s, e, &queues) {
                        Ok(day) => {
                            let mut st = stats.lock().expect("lock");
                            st.files += day.files;
                            st.gpu_rows += day.gpu_rows;
                            st.pending_rows += day.pending_rows;
                            progress.inc(&date.to_string());
                        }
                        Err(e) => {
                            first_error.lock().expect("lock").get_or_insert(e);
                        }
                    }
                });
            }
        });
        if let Some(e) = first_error.into_inner().expect("lock") {
            return Err(e);
        }
        let mut stats = stats.into_inner().expect("lock");
        stats.pod_rows = self.write_pods()?;
        let pod_days = self.lake.dates(Table::Pods).map_err(|source| WriteError::Io { path: self.lake.table_dir(Table::Pods), source })?;
        stats.files += pod_days.len() * 3;
        crate::lake::published::Published::record(self.lake, days.iter().map(|d| d.0).chain(pod_days))?;
        Ok(stats)
    }

    fn write_day(&self, date: NaiveDate, s: i64, e: i64, queues: &[Vec<i64>]) -> Result<WriteStats, WriteError> {
        let mut stats = WriteStats::default();
        let named = |b: RecordBatch| with_cluster(b, self.cluster_name);
        let gpu = named(self.gpu_samples(s, e));
        stats.gpu_rows = gpu.num_rows();
        write_partition(self.lake, Table::GpuSamples, date, &gpu)?;
        let pending = named(self.pending_samples(s, e));
        stats.pending_rows = pending.num_rows();
        write_partition(self.lake, Table::PendingSamples, date, &pending)?;
        write_partition(self.lake, Table::Quotas, date, &named(self.quotas(s, e)))?;
        write_partition(self.lake, Table::Nodes, date, &named(self.nodes(s, e, &gpu)))?;
        write_partition(self.lake, Table::NamespaceLabels, date, &named(self.namespace_labels(s, e)))?;
        write_partition(self.lake, Table::QueueQuotas, date, &named(self.queue_quotas(s, e, queues)))?;
        stats.files = 6;
        Ok(stats)
    }

    fn gpu_samples(&self, s: i64, e: i64) -> RecordBatch {
        let step = self.model.step_ms;
        let mut rows = GpuSamplesBuilder::new();
        for (g, phys) in self.cluster.gpus.iter().enumerate() {
            let mut cursors = vec![UnitCursor::default(); phys.units.len()];
            let mut t = s;
            while t < e {
                if !phys.life.exists(t) {
                    t += step;
                    continue;
                }
                let mut holders = [None; MAX_UNITS];
                let mut zombies = [None; MAX_UNITS];
                for (i, &u) in phys.units.iter().enumerate() {
                    (holders[i], zombies[i]) = cursors[i].at(&self.schedule.occupancy[u], &self.schedule.zombies[u], t);
                }
                let sample = self.model.gpu_step(g, t, &holders, &zombies);
                let len_s = ((e.min(t + step) - t) / 1000) as i32;
                // The GPU's energy over the step, as its counter would say: on its first row.
                let mut counted = Some(sample.energy_between(t, t + len_s as i64 * 1000));
                for (i, &u) in phys.units.iter().enumerate() {
                    let unit = &self.cluster.units[u];
                    let us = &sample.units[i];
                    let share = sample.shares[i];
                    if share <= 0.0 {
                        continue; // an idle time-slicing replica: its GPU's row is the first replica's
                    }
                    let pod = us.pod.map(|id| &self.schedule.pods[id]);
                    let ns = pod.map(|p| &self.namespaces[p.ns]);
                    rows.push(&GpuSampleRow {
                        ts: t,
                        step_s: len_s,
                        node: &self.cluster.nodes[unit.node].name,
                        gpu_uuid: self.cluster.uuid_at(u, t),
                        gpu_index: unit.gpu_index,
                        gpu_model: unit.model.name,
                        mig_profile: unit.mig_profile,
                        gpu_instance_id: unit.gi_id,
                        namespace: ns.map(|n| n.name),
                        pod: pod.map(|p| p.name.as_str()),
                        container: ns.map(|n| n.container),
                        share,
                        util_pct: Some(us.util_pct as f32),
                        mem_used_mib: Some(us.mem_used_mib as f32),
                        mem_total_mib: Some(unit.fb_mib),
                        power_w: Some(us.power_w as f32),
                        energy_j: Some(sample.energy_between(t, t + len_s as i64 * 1000) * share),
                        temp_c: Some(us.temp_c as f32),
                        xid: Some(us.xid),
                        counter_j: counted.take(),
                    });
                }
                t += step;
            }
        }
        rows.finish()
    }

    fn pending_samples(&self, s: i64, e: i64) -> RecordBatch {
        let mut rows = PendingBuilder::new();
        let step = self.model.step_ms;
        for run in self.schedule.pending.iter().filter(|r| r.first < e && r.last >= s) {
            let sp = &self.schedule.pods[run.pod];
            let resource = sp.resource.name();
            let skipped = if run.first >= s { 0 } else { (s - run.first + step - 1) / step };
            let mut ts = run.first + skipped * step;
            while ts <= run.last && ts < e {
                rows.push(&PendingRow {
                    ts,
                    step_s: (step / 1000) as i32,
                    namespace: self.namespaces[sp.ns].name,
                    pod: &sp.name,
                    uid: &sp.uid,
                    priority_class: Some(sp.priority.class_name()),
                    gpu_resource: Some(&resource),
                    gpu_request: sp.gpu_request as i32,
                    reason: Some(run.reason),
                    gpu_share_pct: sp.resource.hami_pct().map(f64::from),
                });
                ts += step;
            }
        }
        rows.finish()
    }

    fn quotas(&self, s: i64, e: i64) -> RecordBatch {
        let mut rows = QuotasBuilder::new();
        for q in self.schedule.quotas.iter().filter(|q| q.ts >= s && q.ts < e) {
            rows.push(&QuotaRow {
                ts: q.ts,
                namespace: self.namespaces[q.ns].name,
                resource: "requests.nvidia.com/gpu",
                hard: Some(q.hard as f64),
                used: Some(q.used as f64),
            });
        }
        rows.finish()
    }

    /// Each namespace's team and cost-centre labels, hourly (kube_namespace_labels).
    fn namespace_labels(&self, s: i64, e: i64) -> RecordBatch {
        use arrow::array::{ArrayRef, StringDictionaryBuilder, TimestampMillisecondBuilder};
        use arrow::datatypes::Int32Type;
        let mut ts = TimestampMillisecondBuilder::new().with_timezone("UTC");
        let (mut ns, mut team, mut cc) =
            (StringDictionaryBuilder::<Int32Type>::new(), StringDictionaryBuilder::<Int32Type>::new(), StringDictionaryBuilder::<Int32Type>::new());
        for spec in self.namespaces {
            let mut t = s;
            while t < e {
                ts.append_value(t);
                ns.append_value(spec.name);
                team.append_value(spec.team);
                cc.append_value(spec.cost_centre());
                t += 3_600_000;
            }
        }
        let columns: Vec<ArrayRef> =
            vec![std::sync::Arc::new(ts.finish()), std::sync::Arc::new(ns.finish()), std::sync::Arc::new(team.finish()), std::sync::Arc::new(cc.finish())];
        crate::lake::rows::table_batch(Table::NamespaceLabels.schema(), columns)
    }

    /// The day's inventory, each physical GPU's energy of the day (`gpu`: its rows, named with
    /// the cluster) on its first row.
    fn nodes(&self, s: i64, e: i64, gpu: &RecordBatch) -> RecordBatch {
        let mut energy = crate::lake::gpu_energy::EnergyByGpu::of(gpu);
        let step = self.model.step_ms;
        let last = s + ((e - s - 1) / step) * step;
        let mut rows = NodesBuilder::new();
        for (u, unit) in self.cluster.units.iter().enumerate() {
            // Each board's first and last step of the day that the GPU was there.
            let life = self.cluster.life_of(u);
            let mut seen: Vec<(&str, i64, i64)> = Vec::new();
            let mut t = if life.absent.is_empty() && life.new_board.is_none() {
                seen.push((&unit.uuid, s, last));
                last + step
            } else {
                s
            };
            while t <= last {
                if life.exists(t) {
                    let uuid = self.cluster.uuid_at(u, t);
                    match seen.last_mut() {
                        Some(x) if x.0 == uuid => x.2 = t,
                        _ => seen.push((uuid, t, t)),
                    }
                }
                t += step;
            }
            for (uuid, first_seen, last_seen) in seen {
                let node = &self.cluster.nodes[unit.node].name;
                let e = energy.take(Some(self.cluster_name), node, uuid);
                rows.push(&NodeRow {
                    node: &self.cluster.nodes[unit.node].name,
                    gpu_uuid: uuid,
                    gpu_index: unit.gpu_index,
                    gpu_model: unit.model.name,
                    mig_profile: unit.mig_profile,
                    gpu_instance_id: unit.gi_id,
                    share: unit.share,
                    mem_total_mib: Some(unit.fb_mib),
                    first_seen,
                    last_seen,
                    rows_energy_j: e.rows_j,
                    counter_energy_j: e.counter_energy_j,
                    counter_delta_j: e.counter_delta_j,
                });
            }
        }
        rows.finish()
    }

    /// `queue_quotas` of steps `[s, e)`: each simulated queue's quota and GPUs in use (`usage`, by
    /// step index of the window), as the collector reads the schedulers' series.
    fn queue_quotas(&self, s: i64, e: i64, usage: &[Vec<i64>]) -> RecordBatch {
        let step = self.model.step_ms;
        let gpus = self.cluster.gpu_count();
        let mut rows = QueueQuotasBuilder::new();
        for ts in (s..e).step_by(step as usize) {
            let k = ((ts - self.window.0) / step) as usize;
            for (q, used) in super::owners::QUEUES.iter().zip(usage) {
                let kueue = q.scheduler == "kueue";
                rows.push(&QueueQuotaRow {
                    ts,
                    scheduler: q.scheduler,
                    queue: q.name,
                    cohort: kueue.then_some(super::owners::COHORT),
                    flavor: kueue.then_some("default-flavor"),
                    resource: "nvidia.com/gpu",
                    nominal: Some(q.nominal(gpus)),
                    borrowing_limit: kueue.then(|| q.limit(gpus)),
                    capacity: (!kueue).then(|| q.limit(gpus)),
                    allocated: Some(used[k] as f64),
                    pending: None,
                });
            }
        }
        rows.finish()
    }

    /// Pods whose life touches the window, partitioned by the day they were created.
    fn write_pods(&self) -> Result<usize, WriteError> {
        let (ws, we) = self.window;
        let mut by_day: std::collections::BTreeMap<NaiveDate, Vec<usize>> = Default::default();
        for (id, p) in self.schedule.pods.iter().enumerate() {
            let touches = p.created < we && p.finished.is_none_or(|f| f >= ws);
            if touches {
                let date = DateTime::from_timestamp_millis(p.created).expect("valid").date_naive();
                by_day.entry(date).or_default().push(id);
            }
        }
        let owners = super::owners::all(self.namespaces, &self.schedule.pods, self.window);
        let series = super::owners::series(&owners, |i| self.namespaces[self.schedule.pods[i].ns].name.to_string());
        let mut rows = 0;
        for (date, ids) in by_day {
            self.write_owners_and_labels(date, &ids, &owners, &series)?;
            let mut batch = PodsBuilder::new();
            for &id in &ids {
                let p = &self.schedule.pods[id];
                // What was observable at the end of the window.
                let seen = |t: Option<i64>| t.filter(|&t| t < we);
                let done = seen(p.finished).is_some();
                let resource = p.resource.name();
                let ns = &self.namespaces[p.ns];
                batch.push(&PodRow {
                    namespace: ns.name,
                    pod: &p.name,
                    uid: &p.uid,
                    node: p.node.filter(|_| seen(p.scheduled).is_some()).map(|n| self.cluster.nodes[n].name.as_str()),
                    priority_class: Some(p.priority.class_name()),
                    created: p.created,
                    scheduled: seen(p.scheduled),
                    started: seen(p.started),
                    finished: seen(p.finished),
                    gpu_resource: Some(&resource),
                    gpu_request: p.gpu_request as i32,
                    cpu_request: Some(p.cpu_request),
                    mem_request_bytes: Some(p.mem_request_bytes),
                    phase: Some(match (done, seen(p.started)) {
                        (true, _) => p.phase(),
                        (false, Some(_)) => "Running",
                        (false, None) => "Pending",
                    }),
                    termination_reason: if done { p.reason } else { None },
                    team: Some(ns.team),
                    gpu_share_pct: p.resource.hami_pct().map(f64::from),
                });
            }
            rows += ids.len();
            write_partition(self.lake, Table::Pods, date, &with_cluster(batch.finish(), self.cluster_name))?;
        }
        Ok(rows)
    }

    /// `pod_owners` and `pod_labels` of pods `ids` (created on `date`), their workloads resolved
    /// from the owner series and labels kube-state-metrics would export, as the collector does.
    fn write_owners_and_labels(&self, date: NaiveDate, ids: &[usize], owners: &[Ownership], series: &OwnerSeries) -> Result<(), WriteError> {
        let mut owner_rows = PodOwnersBuilder::new();
        let mut label_rows = PodLabelsBuilder::new();
        for &id in ids {
            let p = &self.schedule.pods[id];
            let namespace = self.namespaces[p.ns].name;
            let o = &owners[id];
            let labels = o.ksm_labels();
            let owner = o.owner.as_ref().map(|(k, n)| (*k, n.as_str()));
            let w = crate::domain::workload::resolve(namespace, &p.name, owner, &labels, series);
            owner_rows.push(&PodOwnerRow {
                created: p.created,
                namespace,
                pod: &p.name,
                uid: &p.uid,
                owner_kind: owner.map(|(k, _)| k),
                owner_name: owner.map(|(_, n)| n),
                chain: &w.chain,
                workload_kind: &w.kind,
                workload_name: &w.name,
                inferred: w.inferred,
            });
            for (key, value) in &labels {
                label_rows.push(&PodLabelRow { created: p.created, namespace, pod: &p.name, uid: &p.uid, source: "label", key, value });
            }
        }
        write_partition(self.lake, Table::PodOwners, date, &with_cluster(owner_rows.finish(), self.cluster_name))?;
        write_partition(self.lake, Table::PodLabels, date, &with_cluster(label_rows.finish(), self.cluster_name))?;
        Ok(())
    }
}
