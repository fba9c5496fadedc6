//! Writes the simulated history into the lake, one file per table and day.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arrow::array::{
    ArrayRef, Float32Builder, Float64Builder, Int16Builder, Int32Builder, Int64Builder, RecordBatch, StringBuilder,
    StringDictionaryBuilder, TimestampMillisecondBuilder,
};
use arrow::datatypes::Int32Type;
use chrono::{DateTime, NaiveDate};

use super::cluster::Cluster;
use super::scheduler::Schedule;
use super::signals::{SignalModel, UnitCursor};
use super::workload::NamespaceSpec;
use crate::lake::{write_partition, Lake, Table, WriteError};
use crate::progress::Progress;

const DAY_MS: i64 = 86_400_000;

type Labels = StringDictionaryBuilder<Int32Type>;

fn ts_builder(cap: usize) -> TimestampMillisecondBuilder {
    TimestampMillisecondBuilder::with_capacity(cap).with_timezone("UTC")
}

fn batch(table: Table, columns: Vec<ArrayRef>) -> RecordBatch {
    RecordBatch::try_new(table.schema(), columns).expect("columns match the table schema")
}

pub struct LakeOutput<'a> {
    pub lake: &'a Lake,
    pub cluster: &'a Cluster,
    pub namespaces: &'a [NamespaceSpec],
    pub schedule: &'a Schedule,
    pub model: &'a SignalModel<'a>,
    pub window: (i64, i64),
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
                    match self.write_day(date, s, e) {
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
        stats.files += self.lake.dates(Table::Pods).map(|d| d.len()).unwrap_or(0);
        Ok(stats)
    }

    fn write_day(&self, date: NaiveDate, s: i64, e: i64) -> Result<WriteStats, WriteError> {
        let mut stats = WriteStats::default();
        let gpu = self.gpu_samples(s, e);
        stats.gpu_rows = gpu.num_rows();
        write_partition(self.lake, Table::GpuSamples, date, &gpu)?;
        let pending = self.pending_samples(s, e);
        stats.pending_rows = pending.num_rows();
        write_partition(self.lake, Table::PendingSamples, date, &pending)?;
        write_partition(self.lake, Table::Quotas, date, &self.quotas(s, e))?;
        write_partition(self.lake, Table::Nodes, date, &self.nodes(s, e))?;
        stats.files = 4;
        Ok(stats)
    }

    fn gpu_samples(&self, s: i64, e: i64) -> RecordBatch {
        let step = self.model.step_ms;
        let steps = ((e - s + step - 1) / step) as usize;
        let cap = steps * self.cluster.units.len();
        let mut ts = ts_builder(cap);
        let mut step_s = Int32Builder::with_capacity(cap);
        let mut node = Labels::new();
        let mut uuid = Labels::new();
        let mut gpu_index = Int16Builder::with_capacity(cap);
        let mut model = Labels::new();
        let mut mig = Labels::new();
        let mut gi = Int16Builder::with_capacity(cap);
        let mut ns = Labels::new();
        let mut pod = Labels::new();
        let mut container = Labels::new();
        let mut share = Float64Builder::with_capacity(cap);
        let mut util = Float32Builder::with_capacity(cap);
        let mut mem = Float32Builder::with_capacity(cap);
        let mut mem_total = Float32Builder::with_capacity(cap);
        let mut power = Float32Builder::with_capacity(cap);
        let mut energy = Float64Builder::with_capacity(cap);
        let mut temp = Float32Builder::with_capacity(cap);
        let mut xid = Int32Builder::with_capacity(cap);

        for (g, phys) in self.cluster.gpus.iter().enumerate() {
            let mut cursors = vec![UnitCursor::default(); phys.units.len()];
            let mut t = s;
            while t < e {
                let mut holders = [None; 2];
                let mut zombies = [None; 2];
                for (i, &u) in phys.units.iter().enumerate() {
                    (holders[i], zombies[i]) = cursors[i].at(&self.schedule.occupancy[u], &self.schedule.zombies[u], t);
                }
                let sample = self.model.gpu_step(g, t, &holders, &zombies);
                let len_s = ((e.min(t + step) - t) / 1000) as i32;
                for (i, &u) in phys.units.iter().enumerate() {
                    let unit = &self.cluster.units[u];
                    let us = &sample.units[i];
                    ts.append_value(t);
                    step_s.append_value(len_s);
                    node.append_value(&self.cluster.nodes[unit.node].name);
                    uuid.append_value(&unit.uuid);
                    gpu_index.append_value(unit.gpu_index);
                    model.append_value(unit.model.name);
                    mig.append_option(unit.mig_profile);
                    gi.append_option(unit.gi_id);
                    match us.pod {
                        Some(id) => {
                            let p = &self.schedule.pods[id];
                            ns.append_value(self.namespaces[p.ns].name);
                            pod.append_value(&p.name);
                            container.append_value(self.namespaces[p.ns].container);
                        }
                        None => {
                            ns.append_null();
                            pod.append_null();
                            container.append_null();
                        }
                    }
                    share.append_value(unit.share);
                    util.append_value(us.util_pct as f32);
                    mem.append_value(us.mem_used_mib as f32);
                    mem_total.append_value(unit.fb_mib);
                    power.append_value(us.power_w as f32);
                    energy.append_value(sample.energy_between(t, t + len_s as i64 * 1000) * unit.share);
                    temp.append_value(us.temp_c as f32);
                    xid.append_value(us.xid);
                }
                t += step;
            }
        }
        batch(
            Table::GpuSamples,
            vec![
                Arc::new(ts.finish()),
                Arc::new(step_s.finish()),
                Arc::new(node.finish()),
                Arc::new(uuid.finish()),
                Arc::new(gpu_index.finish()),
                Arc::new(model.finish()),
                Arc::new(mig.finish()),
                Arc::new(gi.finish()),
                Arc::new(ns.finish()),
                Arc::new(pod.finish()),
                Arc::new(container.finish()),
                Arc::new(share.finish()),
                Arc::new(util.finish()),
                Arc::new(mem.finish()),
                Arc::new(mem_total.finish()),
                Arc::new(power.finish()),
                Arc::new(energy.finish()),
                Arc::new(temp.finish()),
                Arc::new(xid.finish()),
            ],
        )
    }

    fn pending_samples(&self, s: i64, e: i64) -> RecordBatch {
        let mut ts = ts_builder(0);
        let mut step_s = Int32Builder::new();
        let mut ns = Labels::new();
        let mut pod = StringBuilder::new();
        let mut uid = StringBuilder::new();
        let mut prio = Labels::new();
        let mut res = Labels::new();
        let mut req = Int32Builder::new();
        let mut reason = Labels::new();
        for p in self.schedule.pending.iter().filter(|p| p.ts >= s && p.ts < e) {
            let sp = &self.schedule.pods[p.pod];
            ts.append_value(p.ts);
            step_s.append_value((self.model.step_ms / 1000) as i32);
            ns.append_value(self.namespaces[sp.ns].name);
            pod.append_value(&sp.name);
            uid.append_value(&sp.uid);
            prio.append_value(sp.priority.class_name());
            res.append_value(sp.resource.name());
            req.append_value(sp.gpu_request as i32);
            reason.append_value(p.reason);
        }
        batch(
            Table::PendingSamples,
            vec![
                Arc::new(ts.finish()),
                Arc::new(step_s.finish()),
                Arc::new(ns.finish()),
                Arc::new(pod.finish()),
                Arc::new(uid.finish()),
                Arc::new(prio.finish()),
                Arc::new(res.finish()),
                Arc::new(req.finish()),
                Arc::new(reason.finish()),
            ],
        )
    }

    fn quotas(&self, s: i64, e: i64) -> RecordBatch {
        let mut ts = ts_builder(0);
        let mut ns = Labels::new();
        let mut res = Labels::new();
        let mut hard = Float64Builder::new();
        let mut used = Float64Builder::new();
        for q in self.schedule.quotas.iter().filter(|q| q.ts >= s && q.ts < e) {
            ts.append_value(q.ts);
            ns.append_value(self.namespaces[q.ns].name);
            res.append_value("requests.nvidia.com/gpu");
            hard.append_value(q.hard as f64);
            used.append_value(q.used as f64);
        }
        batch(
            Table::Quotas,
            vec![Arc::new(ts.finish()), Arc::new(ns.finish()), Arc::new(res.finish()), Arc::new(hard.finish()), Arc::new(used.finish())],
        )
    }

    fn nodes(&self, s: i64, e: i64) -> RecordBatch {
        let step = self.model.step_ms;
        let last = s + ((e - s - 1) / step) * step;
        let mut node = Labels::new();
        let mut uuid = Labels::new();
        let mut idx = Int16Builder::new();
        let mut model = Labels::new();
        let mut mig = Labels::new();
        let mut gi = Int16Builder::new();
        let mut share = Float64Builder::new();
        let mut fb = Float32Builder::new();
        let mut first = ts_builder(0);
        let mut last_seen = ts_builder(0);
        for unit in &self.cluster.units {
            node.append_value(&self.cluster.nodes[unit.node].name);
            uuid.append_value(&unit.uuid);
            idx.append_value(unit.gpu_index);
            model.append_value(unit.model.name);
            mig.append_option(unit.mig_profile);
            gi.append_option(unit.gi_id);
            share.append_value(unit.share);
            fb.append_value(unit.fb_mib);
            first.append_value(s);
            last_seen.append_value(last);
        }
        batch(
            Table::Nodes,
            vec![
                Arc::new(node.finish()),
                Arc::new(uuid.finish()),
                Arc::new(idx.finish()),
                Arc::new(model.finish()),
                Arc::new(mig.finish()),
                Arc::new(gi.finish()),
                Arc::new(share.finish()),
                Arc::new(fb.finish()),
                Arc::new(first.finish()),
                Arc::new(last_seen.finish()),
            ],
        )
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
        let mut rows = 0;
        for (date, ids) in by_day {
            let mut ns = Labels::new();
            let mut pod = StringBuilder::new();
            let mut uid = StringBuilder::new();
            let mut node = Labels::new();
            let mut prio = Labels::new();
            let mut created = ts_builder(ids.len());
            let mut scheduled = ts_builder(ids.len());
            let mut started = ts_builder(ids.len());
            let mut finished = ts_builder(ids.len());
            let mut res = Labels::new();
            let mut req = Int32Builder::new();
            let mut cpu = Float64Builder::new();
            let mut mem = Int64Builder::new();
            let mut phase = Labels::new();
            let mut reason = Labels::new();
            let mut team = Labels::new();
            for &id in &ids {
                let p = &self.schedule.pods[id];
                // What was observable at the end of the window.
                let seen = |t: Option<i64>| t.filter(|&t| t < we);
                ns.append_value(self.namespaces[p.ns].name);
                pod.append_value(&p.name);
                uid.append_value(&p.uid);
                node.append_option(p.node.filter(|_| seen(p.scheduled).is_some()).map(|n| self.cluster.nodes[n].name.as_str()));
                prio.append_value(p.priority.class_name());
                created.append_value(p.created);
                scheduled.append_option(seen(p.scheduled));
                started.append_option(seen(p.started));
                finished.append_option(seen(p.finished));
                res.append_value(p.resource.name());
                req.append_value(p.gpu_request as i32);
                cpu.append_value(p.cpu_request);
                mem.append_value(p.mem_request_bytes);
                let done = seen(p.finished).is_some();
                phase.append_value(match (done, seen(p.started)) {
                    (true, _) => p.phase(),
                    (false, Some(_)) => "Running",
                    (false, None) => "Pending",
                });
                reason.append_option(if done { p.reason } else { None });
                team.append_value(self.namespaces[p.ns].team);
            }
            rows += ids.len();
            let b = batch(
                Table::Pods,
                vec![
                    Arc::new(ns.finish()),
                    Arc::new(pod.finish()),
                    Arc::new(uid.finish()),
                    Arc::new(node.finish()),
                    Arc::new(prio.finish()),
                    Arc::new(created.finish()),
                    Arc::new(scheduled.finish()),
                    Arc::new(started.finish()),
                    Arc::new(finished.finish()),
                    Arc::new(res.finish()),
                    Arc::new(req.finish()),
                    Arc::new(cpu.finish()),
                    Arc::new(mem.finish()),
                    Arc::new(phase.finish()),
                    Arc::new(reason.finish()),
                    Arc::new(team.finish()),
                ],
            );
            write_partition(self.lake, Table::Pods, date, &b)?;
        }
        Ok(rows)
    }
}
