//! The simulated history as Prometheus would have scraped it from dcgm-exporter and
//! kube-state-metrics, in OpenMetrics text for `promtool tsdb create-blocks-from openmetrics`.
//!
//! Names and labels follow `shared/reference/`: dcgm-exporter 4.x label order (gpu, UUID,
//! pci_bus_id, device, modelName, [GPU_I_PROFILE, GPU_I_ID], Hostname, driver version,
//! container, namespace, pod), integer fields printed with `%d` and doubles with `%f`;
//! kube-state-metrics floats in Go `%g` form (`1.7e+09`). Like a real scrape, a GPU's series
//! changes label set when its pod changes, and device-level fields (power, energy,
//! temperature, XID) of a MIG GPU are repeated on each of its instances. Every family is
//! declared `gauge` so names stay as the exporters print them (OpenMetrics counters must
//! end in `_total`). One GPU's energy counter resets half-way (a driver reload).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use super::cluster::{HAMI_SLOTS_PCT, HAMI_SPLIT};
use super::scheduler::SimPod;
use super::signals::{GpuStep, SignalModel, UnitCursor};
use super::Simulation;
use crate::domain::dcgm_field::Field as Dcgm;

const DRIVER: &str = "550.54.15";
const PHASES: [&str; 5] = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];
const STATUS_REASONS: [&str; 5] = ["Evicted", "NodeAffinity", "NodeLost", "Shutdown", "UnexpectedAdmissionError"];
/// Finished pods stay visible to kube-state-metrics this long before they are deleted.
const DELETE_AFTER_MS: i64 = 120_000;
/// Prometheus scrapes HAMi's scheduler this long after each step (its own target, off the step).
const HAMI_SCRAPE_OFFSET_MS: i64 = 7_000;

/// A float as Go's `strconv.FormatFloat(v, 'g', -1, 64)` prints it (kube-state-metrics).
pub fn go_g(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    // Go uses %e when the exponent is < -4 or >= 6 for the shortest representation.
    let exp = v.abs().log10().floor() as i32;
    if !(-4..6).contains(&exp) {
        let digits = format!("{v:e}");
        let (m, e) = digits.split_once('e').expect("exponent form");
        let e: i32 = e.parse().expect("exponent");
        format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
    } else {
        format!("{v}")
    }
}

fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn ts_s(ms: i64) -> String {
    if ms % 1000 == 0 {
        format!("{}", ms / 1000)
    } else {
        format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
    }
}

/// Where dcgm-exporter puts a MIG GPU's device-level fields (power, energy, temperature, XID):
/// both happen in the field, depending on its version and settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum MigDeviceFields {
    /// Repeated on every instance's series, with the GPU's value.
    #[default]
    Repeated,
    /// On the parent GPU's own series, without `GPU_I_*` labels (and without a pod).
    Parent,
}

/// A node's dcgm-exporter down over `[start, end)` (ms): no DCGM samples of its GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    pub node: usize,
    pub start: i64,
    pub end: i64,
}

/// `n` exporter outages of `minutes` each, on nodes and at times drawn from the seed, each at
/// least an hour from the window's edges (a window too short for that gets none).
pub fn plan_outages(sim: &Simulation, n: u32, minutes: u32) -> Vec<Outage> {
    let (ws, we) = sim.params.window_ms();
    let len = minutes as i64 * 60_000;
    let (lo, hi) = (ws + 3_600_000, we - 3_600_000 - len);
    if n == 0 || hi <= lo || sim.cluster.nodes.is_empty() {
        return Vec::new();
    }
    let mut rng = super::rng::Rng::new(sim.params.seed ^ 0x0DA7_A6E5);
    (0..n)
        .map(|_| {
            let node = rng.int(0, sim.cluster.nodes.len() as i64 - 1) as usize;
            let start = rng.int(lo, hi);
            Outage { node, start, end: start + len }
        })
        .collect()
}

/// How the exporters are shaped.
#[derive(Debug, Clone, Default)]
pub struct OmOptions {
    pub mig_device_fields: MigDeviceFields,
    /// How often Prometheus scrapes each node's dcgm-exporter (ms); None: once per lake step,
    /// on the step.
    pub scrape_interval_ms: Option<i64>,
    /// Each scrape lands up to this much (ms) either side of its slot.
    pub scrape_jitter_ms: i64,
    /// Share of scrapes that never happen (0-1), in runs of 1 to 4 in a row.
    pub missed_scrapes: f64,
    /// Nodes whose exporter is down for a while (no scrape of it succeeds).
    pub outages: Vec<Outage>,
    /// Copies of every series, as an HA pair of Prometheis behind a Thanos Query without
    /// deduplication returns them: `prometheus_replica="prometheus-k8s-<i>"`, copy i scraping
    /// i x 7 s later (0 or 1: one copy, no replica label).
    pub replicas: u32,
    /// The first this many nodes' dcgm-exporter ServiceMonitor stops honouring the exporter's
    /// labels half-way through the window: from then on their series carry the exporter's own
    /// `namespace`/`pod`/`container` and the workload's as `exported_*`.
    pub honor_labels_flip: usize,
    /// `cluster="<name>"` on every series (an external label of a Thanos or Mimir that holds
    /// several clusters).
    pub cluster: Option<String>,
    /// A rolling update of the dcgm-exporter DaemonSet starting at this instant (ms): node i's
    /// exporter is replaced at `start + i x ROLLOUT_STAGGER_MS`, no scrape for
    /// `ROLLOUT_GAP_MS`, and the new pod has a new address (the `instance` label).
    pub rollout: Option<i64>,
}

/// A DaemonSet rollout replaces one node's exporter pod after another, this far apart.
pub const ROLLOUT_STAGGER_MS: i64 = 90_000;
/// How long a node's exporter is away while its pod is replaced.
pub const ROLLOUT_GAP_MS: i64 = 70_000;
/// A restarting exporter container is away this long (`exporter_restarts`).
pub const RESTART_GAP_MS: i64 = 40_000;

/// Node `node`'s exporter restarting every `every_h` hours over the window (the first after
/// `every_h` hours), each a gap of [`RESTART_GAP_MS`] with no scrape, as outages.
pub fn restart_outages(sim: &Simulation, node: usize, every_h: u32) -> Vec<Outage> {
    let (ws, we) = sim.params.window_ms();
    if every_h == 0 || node >= sim.cluster.nodes.len() {
        return Vec::new();
    }
    let every = every_h as i64 * 3_600_000;
    // Off the step grid, as a restart is: 17 s past the hour.
    (1..).map(|k| ws + k * every + 17_000).take_while(|&t| t + RESTART_GAP_MS < we).map(|start| Outage { node, start, end: start + RESTART_GAP_MS }).collect()
}

/// How much later each further replica scrapes (ms).
const REPLICA_OFFSET_MS: i64 = 7_000;

/// Writes the window's history; returns the number of samples written.
pub fn write(sim: &Simulation, out: &mut impl Write) -> io::Result<u64> {
    write_with(sim, OmOptions::default(), out)
}

/// [`write`] with the exporters shaped by `options`.
pub fn write_with(sim: &Simulation, options: OmOptions, out: &mut impl Write) -> io::Result<u64> {
    let mut w = OmWriter { sim, model: sim.signals(), out, samples: 0, options, copies: String::new() };
    w.dcgm()?;
    w.hami()?;
    w.ksm()?;
    w.flush_copies()?;
    writeln!(w.out, "# EOF")?;
    Ok(w.samples)
}

struct OmWriter<'a, W: Write> {
    sim: &'a Simulation,
    model: SignalModel<'a>,
    out: &'a mut W,
    samples: u64,
    options: OmOptions,
    /// The further replicas' lines of the current family, written after its first copy's (each
    /// series' samples stay consecutive and in time order).
    copies: String,
}

impl<W: Write> OmWriter<'_, W> {
    fn family(&mut self, name: &str, help: &str) -> io::Result<()> {
        self.flush_copies()?;
        writeln!(self.out, "# HELP {name} {help}")?;
        writeln!(self.out, "# TYPE {name} gauge")
    }

    fn flush_copies(&mut self) -> io::Result<()> {
        self.out.write_all(self.copies.as_bytes())?;
        self.copies.clear();
        Ok(())
    }

    fn sample(&mut self, name: &str, labels: &str, value: &str, ms: i64) -> io::Result<()> {
        let with_cluster;
        let labels = match &self.options.cluster {
            Some(c) => {
                with_cluster = if labels.is_empty() { format!("cluster=\"{c}\"") } else { format!("{labels},cluster=\"{c}\"") };
                with_cluster.as_str()
            }
            None => labels,
        };
        self.samples += 1;
        if self.options.replicas <= 1 {
            return writeln!(self.out, "{name}{{{labels}}} {value} {}", ts_s(ms));
        }
        writeln!(self.out, "{name}{{{labels},prometheus=\"monitoring/k8s\",prometheus_replica=\"prometheus-k8s-0\"}} {value} {}", ts_s(ms))?;
        let (_, we) = self.sim.params.window_ms();
        for r in 1..self.options.replicas {
            let at = ms + r as i64 * REPLICA_OFFSET_MS;
            if at < we {
                self.samples += 1;
                writeln!(self.copies, "{name}{{{labels},prometheus=\"monitoring/k8s\",prometheus_replica=\"prometheus-k8s-{r}\"}} {value} {}", ts_s(at))
                    .expect("string write");
            }
        }
        Ok(())
    }

    fn dcgm(&mut self) -> io::Result<()> {
        let sim = self.sim;
        let (ws, we) = sim.params.window_ms();
        let step = self.model.step_ms;
        let steps = ((we - ws) / step) as usize;
        // Energy counters (mJ since driver load), one per physical GPU, with one reset; a
        // new board's counter starts afresh, and a GPU that is not there uses nothing.
        let reset_gpu = sim.cluster.gpus.len() / 2;
        let mut counters: Vec<Vec<u64>> = Vec::with_capacity(sim.cluster.gpus.len());
        for g in 0..sim.cluster.gpus.len() {
            let life = &sim.cluster.gpus[g].life;
            let mut c = Vec::with_capacity(steps);
            let mut acc = 1_000_000_000.0 * (1.0 + g as f64 % 7.0);
            for k in 0..steps {
                let t = ws + k as i64 * step;
                if g == reset_gpu && k == steps / 2 {
                    acc = 0.0;
                }
                if life.new_board.as_ref().is_some_and(|(at, _)| *at == t) {
                    acc = 12_345_000.0;
                }
                c.push(acc.round() as u64);
                if life.exists(t) {
                    acc += self.model.gpu_at(g, t).energy_j() * 1000.0;
                }
            }
            counters.push(c);
        }

        let on_parent = self.options.mig_device_fields == MigDeviceFields::Parent;
        for fam in Dcgm::ALL {
            self.family(fam.default_name(), fam.help())?;
            let device_level = matches!(fam, Dcgm::Power | Dcgm::Energy | Dcgm::Temp | Dcgm::Xid);
            if device_level && on_parent {
                self.mig_parents(fam, &counters)?;
            }
            for (u, unit) in sim.cluster.units.iter().enumerate() {
                let mig = unit.mig_profile.is_some();
                if (fam == Dcgm::Util && mig) || (fam == Dcgm::EngineActive && !mig) || (mig && device_level && on_parent) {
                    continue;
                }
                // HAMi's vGPUs are invisible to DCGM: one series per GPU (its first slot's),
                // the GPU's own values, no pod (HAMi#1032).
                let hami = unit.hami;
                if hami && sim.cluster.gpus[unit.gpu].units[0] != u {
                    continue;
                }
                // Group the unit's steps by holder (and label convention): one series per label
                // set, each contiguous.
                let flip_at = (unit.node < self.options.honor_labels_flip).then(|| (ws + we) / 2);
                // One series per label set: label convention, exporter pod (instance), board
                // (UUID) and holder.
                let mut groups: BTreeMap<(bool, bool, bool, Option<usize>), Vec<i64>> = BTreeMap::new();
                let mut cursor = UnitCursor::default();
                let slot = sim.cluster.gpus[unit.gpu].units.iter().position(|&x| x == u).expect("unit of its gpu");
                let life = sim.cluster.life_of(u);
                for ts in self.scrape_times(unit.node) {
                    if !life.exists(ts) {
                        continue;
                    }
                    let (holder, _) = cursor.at(&sim.schedule.occupancy[u], &sim.schedule.zombies[u], ts);
                    let holder = holder.filter(|_| !hami);
                    // A time-sliced GPU has one series per pod sharing it, or one without a pod.
                    if unit.time_sliced && self.model.gpu_at(unit.gpu, ts).shares[slot] <= 0.0 {
                        continue;
                    }
                    let new_board = sim.cluster.uuid_at(u, ts) != unit.uuid;
                    groups.entry((flip_at.is_some_and(|t| ts >= t), self.rolled_out(unit.node, ts), new_board, holder)).or_default().push(ts);
                }
                let node = &sim.cluster.nodes[unit.node].name;
                for ((renamed, rolled, new_board, holder), ks) in groups {
                    let mut labels = String::new();
                    write!(
                        labels,
                        "gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"00000000:{:02X}:00.0\",device=\"nvidia{}\",modelName=\"{}\"",
                        unit.gpu_index,
                        if new_board { sim.cluster.uuid_at(u, i64::MAX) } else { unit.uuid.as_str() },
                        0x07 + unit.gpu_index * 8,
                        unit.gpu_index,
                        unit.model.name
                    )
                    .expect("string write");
                    if let (Some(p), Some(id)) = (unit.mig_profile, unit.gi_id) {
                        write!(labels, ",GPU_I_PROFILE=\"{p}\",GPU_I_ID=\"{id}\"").expect("string write");
                    }
                    write!(labels, ",Hostname=\"{node}\",DCGM_FI_DRIVER_VERSION=\"{DRIVER}\"").expect("string write");
                    let prefix = if renamed { "exported_" } else { "" };
                    if let Some(id) = holder {
                        let pod = &sim.schedule.pods[id];
                        let ns = &sim.namespaces[pod.ns];
                        write!(labels, ",{prefix}container=\"{}\"", ns.container).expect("string write");
                        // dcgm-exporter with DRA: the claim that allocated the device, beside the pod.
                        if sim.cluster.nodes[unit.node].dra {
                            let device = match unit.gi_id {
                                Some(gi) => format!("gpu-{}-mig-{gi}", unit.gpu_index),
                                None => format!("gpu-{}", unit.gpu_index),
                            };
                            write!(
                                labels,
                                ",dra_claim_name=\"{}\",dra_claim_namespace=\"{}\",dra_device_name=\"{device}\",dra_driver_name=\"gpu.nvidia.com\",dra_pool_name=\"{node}\"",
                                esc(&dra_claim(pod)),
                                esc(ns.name)
                            )
                            .expect("string write");
                        }
                        write!(labels, ",{prefix}namespace=\"{}\",{prefix}pod=\"{}\"", esc(ns.name), esc(&pod.name)).expect("string write");
                    }
                    if renamed {
                        // The scrape target's own labels, as Prometheus adds them without honorLabels.
                        write!(
                            labels,
                            ",container=\"nvidia-dcgm-exporter\",namespace=\"gpu-operator\",pod=\"nvidia-dcgm-exporter-{:05x}\"",
                            unit.node * 7919 + 4099
                        )
                        .expect("string write");
                    }
                    if fam == Dcgm::Xid {
                        write!(labels, ",err_code=\"0\",err_msg=\"No Error\"").expect("string write");
                    }
                    write!(labels, ",instance=\"{}\",job=\"dcgm-exporter\"", self.instance(unit.node, rolled)).expect("string write");
                    for ts in ks {
                        let g = self.model.gpu_at(unit.gpu, ts);
                        let i = sim.cluster.gpus[unit.gpu].units.iter().position(|&x| x == u).expect("unit of its gpu");
                        let mut us = g.units[i];
                        let mut fb_total = unit.fb_mib as f64;
                        if hami {
                            // The whole GPU: its slots' work and framebuffer together.
                            let slots = &sim.cluster.gpus[unit.gpu].units;
                            us.util_pct = (0..slots.len()).map(|k| self.util_at(unit.gpu, k, &g, ts) * g.shares[k]).sum::<f64>().round();
                            us.mem_used_mib = (0..slots.len()).map(|k| g.units[k].mem_used_mib).sum();
                            us.xid = (0..slots.len()).map(|k| g.units[k].xid).max().unwrap_or(0);
                            fb_total = unit.model.fb_mib as f64;
                        }
                        let value = match fam {
                            Dcgm::Util if hami => format!("{}", us.util_pct as i64),
                            Dcgm::Util => format!("{}", self.util_at(unit.gpu, i, &g, ts) as i64),
                            Dcgm::EngineActive => format!("{:.6}", self.util_at(unit.gpu, i, &g, ts) / 100.0),
                            Dcgm::FbUsed => format!("{}", us.mem_used_mib as i64),
                            Dcgm::FbFree => format!("{}", (fb_total - us.mem_used_mib) as i64),
                            Dcgm::Power => format!("{:.6}", g.power_w),
                            Dcgm::Energy => format!("{}", self.counter_at(unit.gpu, ts, &counters)),
                            Dcgm::Temp => format!("{}", g.temp_c as i64),
                            Dcgm::Xid => format!("{}", us.xid),
                        };
                        self.sample(fam.default_name(), &labels, &value, ts)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// HAMi's own series for its node (`shared/reference/gpu-sharing-facts.md`): the scheduler's
    /// allocation per container and device (`hami_vgpu_core_allocated_ratio` in percent,
    /// `hami_vgpu_memory_allocated_bytes`), scraped every step 7 s after it, and each device's
    /// `hami_gpu_memory_limit_bytes`; the vGPU monitor's `hami_container_device_utilization_ratio`
    /// (the container's part of the whole GPU's work, 0-100) on the node's scrapes. A series per
    /// pod while it holds its slot, as the scheduler and monitor drop a container once it is gone.
    fn hami(&mut self) -> io::Result<()> {
        let sim = self.sim;
        if !sim.cluster.units.iter().any(|u| u.hami) {
            return Ok(());
        }
        let (ws, we) = sim.params.window_ms();
        let step = self.model.step_ms;
        let scheduler_times: Vec<i64> = (0..(we - ws) / step).map(|k| ws + k * step + HAMI_SCRAPE_OFFSET_MS).filter(|&t| t < we).collect();
        let zone = "zone=\"vGPU\",instance=\"10.0.0.9:9395\",job=\"hami-scheduler\"";
        let slots: Vec<usize> = (0..sim.cluster.units.len()).filter(|&u| sim.cluster.units[u].hami).collect();
        // Per slot, its holders' runs of scrape times: (pod, times).
        let runs = |times: &[i64], u: usize| -> Vec<(usize, Vec<i64>)> {
            let mut cursor = UnitCursor::default();
            let mut out: Vec<(usize, Vec<i64>)> = Vec::new();
            for &ts in times {
                let (holder, _) = cursor.at(&sim.schedule.occupancy[u], &sim.schedule.zombies[u], ts);
                let Some(pod) = holder else { continue };
                match out.last_mut() {
                    Some((p, v)) if *p == pod => v.push(ts),
                    _ => out.push((pod, vec![ts])),
                }
            }
            out
        };
        let holder_labels = |u: usize, pod: usize| {
            let unit = &sim.cluster.units[u];
            let p = &sim.schedule.pods[pod];
            (format!("namespace=\"{}\",pod=\"{}\"", esc(sim.namespaces[p.ns].name), esc(&p.name)), &unit.uuid, &sim.cluster.nodes[unit.node].name)
        };
        for (name, help) in [
            ("hami_vgpu_core_allocated_ratio", "vGPU core allocated from a container"),
            ("hami_vgpu_memory_allocated_bytes", "vGPU memory allocated from a container"),
        ] {
            self.family(name, help)?;
            for &u in &slots {
                let unit = &sim.cluster.units[u];
                for (pod, times) in runs(&scheduler_times, u) {
                    let (who, uuid, node) = holder_labels(u, pod);
                    let labels = format!("container_index=\"0\",device_uuid=\"{uuid}\",{who},node=\"{node}\",{zone}");
                    let value = if name.contains("core") { format!("{}", (unit.share * 100.0).round()) } else { go_g(unit.fb_mib as f64 * 1_048_576.0) };
                    for ts in times {
                        self.sample(name, &labels, &value, ts)?;
                    }
                }
            }
        }
        self.family("hami_gpu_memory_limit_bytes", "Device memory limit for a certain GPU")?;
        for gpu in &sim.cluster.gpus {
            let Some(&first) = gpu.units.first().filter(|&&u| sim.cluster.units[u].hami) else { continue };
            let unit = &sim.cluster.units[first];
            let labels = format!("device_index=\"{}\",device_uuid=\"{}\",node=\"{}\",{zone}", unit.gpu_index, unit.uuid, sim.cluster.nodes[gpu.node].name);
            let value = go_g(gpu.model.fb_mib as f64 * 1_048_576.0);
            for &ts in &scheduler_times {
                self.sample("hami_gpu_memory_limit_bytes", &labels, &value, ts)?;
            }
        }
        // The vGPU monitor's series per container and run on a vGPU: its part of the GPU's
        // utilisation, and the seconds since it last launched a kernel (0 at a scrape where it
        // works, 1% or more; else since the last such scrape, or since it got the vGPU).
        let mut monitor: Vec<(String, Vec<(i64, f64, i64)>)> = Vec::new();
        for &u in &slots {
            let unit = &sim.cluster.units[u];
            let slot = sim.cluster.gpus[unit.gpu].units.iter().position(|&x| x == u).expect("unit of its gpu");
            let times = self.scrape_times(unit.node);
            for (pod, times) in runs(&times, u) {
                let (who, uuid, _) = holder_labels(u, pod);
                let labels = format!(
                    "container=\"{}\",device_uuid=\"{uuid}\",{who},vdevice_index=\"0\",instance=\"{}:9394\",job=\"hami-vgpu-monitor\"",
                    sim.namespaces[sim.schedule.pods[pod].ns].container, sim.cluster.nodes[unit.node].name
                );
                let mut last_kernel = None;
                let samples = times
                    .into_iter()
                    .map(|ts| {
                        let g = self.model.gpu_at(unit.gpu, ts);
                        let util = self.util_at(unit.gpu, slot, &g, ts);
                        if util >= 1.0 {
                            last_kernel = Some(ts);
                        }
                        let since = last_kernel.or(sim.schedule.pods[pod].started).unwrap_or(ts).min(ts);
                        (ts, util * g.shares[slot], (ts - since) / 1000)
                    })
                    .collect();
                monitor.push((labels, samples));
            }
        }
        self.family("hami_container_device_utilization_ratio", "Container device utilization ratio")?;
        for (labels, samples) in &monitor {
            for &(ts, ratio, _) in samples {
                self.sample("hami_container_device_utilization_ratio", labels, &format!("{}", ratio.round()), ts)?;
            }
        }
        self.family("hami_container_last_kernel_elapsed_seconds", "Container time since last kernel launch")?;
        for (labels, samples) in &monitor {
            for &(ts, _, elapsed_s) in samples {
                self.sample("hami_container_last_kernel_elapsed_seconds", labels, &go_g(elapsed_s as f64), ts)?;
            }
        }
        Ok(())
    }

    /// Unit `slot` of GPU `gpu`'s utilisation at a scrape at `ts` (`g`: the GPU at `ts`), as
    /// the model has it: a pod works from the first step it holds the unit at the step's start
    /// and stops when it ends, so a pod that started inside the step is still loading (0%), and
    /// after a pod ended the unit is idle; otherwise the step's value.
    fn util_at(&self, gpu: usize, slot: usize, g: &GpuStep, ts: i64) -> f64 {
        let start = ts.div_euclid(self.model.step_ms) * self.model.step_ms;
        if start == ts {
            return g.units[slot].util_pct;
        }
        let at_start = self.model.gpu_at(gpu, start);
        if at_start.units[slot].pod == g.units[slot].pod {
            at_start.units[slot].util_pct
        } else {
            0.0
        }
    }

    /// When Prometheus scraped node `node`'s exporter: on every step, or every
    /// `scrape_interval_ms` from a per-node offset, with jitter and runs of missed scrapes.
    fn scrape_times(&self, node: usize) -> Vec<i64> {
        let (ws, we) = self.sim.params.window_ms();
        let step = self.model.step_ms;
        let rollout_gap = self.options.rollout.map(|r| r + node as i64 * ROLLOUT_STAGGER_MS);
        let down = |t: i64| {
            self.options.outages.iter().any(|o| o.node == node && t >= o.start && t < o.end) || rollout_gap.is_some_and(|r| t >= r && t < r + ROLLOUT_GAP_MS)
        };
        let Some(interval) = self.options.scrape_interval_ms else {
            return (0..(we - ws) / step).map(|k| ws + k * step).filter(|&t| !down(t)).collect();
        };
        let mut rng = super::rng::Rng::new(self.sim.params.seed ^ (0x5C4A_9E00 + node as u64));
        // The first scrape lands inside the first step (the data starts at the window).
        let mut t = ws + rng.int(0, interval.min(step) - 1);
        let (mut out, mut missing) = (Vec::new(), 0u32);
        while t < we {
            if missing > 0 {
                missing -= 1;
            } else if rng.f64() < self.options.missed_scrapes / 2.5 {
                missing = rng.int(0, 3) as u32; // this one and up to three more
            } else {
                let j = self.options.scrape_jitter_ms;
                let at = (t + if j > 0 { rng.int(-j, j) } else { 0 }).clamp(ws, we - 1);
                if !down(at) && out.last().is_none_or(|&l| at > l) {
                    out.push(at);
                }
            }
            t += interval;
        }
        out
    }

    /// Whether node `node`'s exporter pod was replaced by the rollout before `t`.
    fn rolled_out(&self, node: usize, t: i64) -> bool {
        self.options.rollout.is_some_and(|r| t >= r + node as i64 * ROLLOUT_STAGGER_MS)
    }

    /// The scrape target's address: the node's exporter pod, a new one after the rollout.
    fn instance(&self, node: usize, rolled: bool) -> String {
        let name = &self.sim.cluster.nodes[node].name;
        if rolled {
            format!("10.42.{}.{}:9400", node / 200, 10 + node % 200)
        } else {
            format!("{name}:9400")
        }
    }

    /// Physical GPU `g`'s energy counter (mJ) at `ts`: the step's counter plus what the model
    /// used since the step began.
    fn counter_at(&self, g: usize, ts: i64, counters: &[Vec<u64>]) -> u64 {
        let (ws, _) = self.sim.params.window_ms();
        let step = self.model.step_ms;
        let k = ((ts - ws) / step) as usize;
        let start = ws + k as i64 * step;
        counters[g][k] + (self.model.gpu_at(g, start).energy_between(start, ts) * 1000.0).round() as u64
    }

    /// A device-level field of every MIG GPU on its parent's own series: the GPU's labels
    /// without `GPU_I_*` and without a pod, one series per GPU for the whole window.
    fn mig_parents(&mut self, fam: Dcgm, counters: &[Vec<u64>]) -> io::Result<()> {
        let sim = self.sim;
        for (g, gpu) in sim.cluster.gpus.iter().enumerate() {
            let first = &sim.cluster.units[gpu.units[0]];
            if first.mig_profile.is_none() {
                continue;
            }
            let node = &sim.cluster.nodes[gpu.node].name;
            let mut base = format!(
                "gpu=\"{}\",UUID=\"{}\",pci_bus_id=\"00000000:{:02X}:00.0\",device=\"nvidia{}\",modelName=\"{}\",Hostname=\"{node}\",DCGM_FI_DRIVER_VERSION=\"{DRIVER}\"",
                first.gpu_index,
                first.uuid,
                0x07 + first.gpu_index * 8,
                first.gpu_index,
                first.model.name
            );
            if fam == Dcgm::Xid {
                base.push_str(",err_code=\"0\",err_msg=\"No Error\"");
            }
            let times: Vec<i64> = self.scrape_times(gpu.node).into_iter().filter(|&t| gpu.life.exists(t)).collect();
            for ts in times {
                let labels = format!("{base},instance=\"{}\",job=\"dcgm-exporter\"", self.instance(gpu.node, self.rolled_out(gpu.node, ts)));
                let s = self.model.gpu_at(g, ts);
                let value = match fam {
                    Dcgm::Power => format!("{:.6}", s.power_w),
                    Dcgm::Energy => format!("{}", self.counter_at(g, ts, counters)),
                    Dcgm::Temp => format!("{}", s.temp_c as i64),
                    _ => format!("{}", s.units.iter().map(|u| u.xid).max().unwrap_or(0)),
                };
                self.sample(fam.default_name(), &labels, &value, ts)?;
            }
        }
        Ok(())
    }

    /// Steps at which kube-state-metrics saw `pod`: from creation to deletion, within the window.
    fn pod_steps(&self, pod: &SimPod) -> std::ops::Range<i64> {
        let (ws, we) = self.sim.params.window_ms();
        let step = self.model.step_ms;
        let first = pod.created.max(ws);
        let first = ws + (first - ws + step - 1).div_euclid(step) * step;
        let gone = pod.finished.map_or(we, |f| (f + DELETE_AFTER_MS).min(we));
        first..gone.max(first)
    }

    fn ksm(&mut self) -> io::Result<()> {
        let sim = self.sim;
        let step = self.model.step_ms;
        let ksm = "instance=\"10.0.0.5:8080\",job=\"kube-state-metrics\"";
        let pods: Vec<usize> = (0..sim.schedule.pods.len()).filter(|&i| !self.pod_steps(&sim.schedule.pods[i]).is_empty()).collect();
        let id_labels = |p: &SimPod| format!("namespace=\"{}\",pod=\"{}\",uid=\"{}\"", esc(sim.namespaces[p.ns].name), esc(&p.name), p.uid);
        let node_name = |p: &SimPod| p.node.map(|n| sim.cluster.nodes[n].name.clone()).unwrap_or_default();
        let at = |t: Option<i64>, ts: i64| t.filter(|&t| t <= ts);
        let on_dra = |p: &SimPod| p.node.is_some_and(|n| sim.cluster.nodes[n].dra);

        // Families with one series per pod whose value is a time (or 1).
        type ValueFn<'x> = Box<dyn Fn(&SimPod, i64) -> Option<String> + 'x>;
        let simple: Vec<(&str, &str, ValueFn)> = vec![
            ("kube_pod_info", "Information about pod.", Box::new(|_p, _ts| Some("1".into()))),
            ("kube_pod_created", "Unix creation timestamp", Box::new(|p, _ts| Some(go_g((p.created / 1000) as f64)))),
            (
                "kube_pod_status_scheduled_time",
                "Unix timestamp when pod moved into scheduled status",
                Box::new(move |p, ts| at(p.scheduled, ts).map(|t| go_g((t / 1000) as f64))),
            ),
            ("kube_pod_start_time", "Start time in unix timestamp for a pod.", Box::new(move |p, ts| at(p.started, ts).map(|t| go_g((t / 1000) as f64)))),
            (
                "kube_pod_completion_time",
                "Completion time in unix timestamp for a pod.",
                Box::new(move |p, ts| at(p.finished, ts).map(|t| go_g((t / 1000) as f64))),
            ),
        ];
        for (name, help, value) in &simple {
            self.family(name, help)?;
            for &i in &pods {
                let p = &sim.schedule.pods[i];
                let mut labels = id_labels(p);
                if *name == "kube_pod_info" {
                    // The node label is empty until the pod is bound: a new series then.
                    let job = p.name.rsplit_once('-').map_or(p.name.as_str(), |(j, _)| j);
                    let mut before = labels.clone();
                    write!(before, ",node=\"\",created_by_kind=\"Job\",created_by_name=\"{}\",priority_class=\"{}\",{ksm}", esc(job), p.priority.class_name())
                        .expect("string write");
                    write!(
                        labels,
                        ",node=\"{}\",created_by_kind=\"Job\",created_by_name=\"{}\",priority_class=\"{}\",{ksm}",
                        node_name(p),
                        esc(job),
                        p.priority.class_name()
                    )
                    .expect("string write");
                    for ts in self.pod_steps(p).step_by(step as usize) {
                        let l = if at(p.scheduled, ts).is_some() { &labels } else { &before };
                        // series are contiguous: unbound samples come first in time
                        self.sample(name, l, "1", ts)?;
                    }
                    continue;
                }
                write!(labels, ",{ksm}").expect("string write");
                for ts in self.pod_steps(p).step_by(step as usize) {
                    if let Some(v) = value(p, ts) {
                        self.sample(name, &labels, &v, ts)?;
                    }
                }
            }
        }

        self.family("kube_pod_status_phase", "The pods current phase.")?;
        for &i in &pods {
            let p = &sim.schedule.pods[i];
            for phase in PHASES {
                let labels = format!("{},phase=\"{phase}\",{ksm}", id_labels(p));
                for ts in self.pod_steps(p).step_by(step as usize) {
                    let now = phase_at(p, ts);
                    self.sample("kube_pod_status_phase", &labels, if now == phase { "1" } else { "0" }, ts)?;
                }
            }
        }

        self.family("kube_pod_container_resource_requests", "The number of requested request resource by a container.")?;
        for &i in &pods {
            let p = &sim.schedule.pods[i];
            let ns = &sim.namespaces[p.ns];
            let gpu_res = p.resource.name().replace(['.', '/', '-'], "_");
            let mut reqs = vec![("cpu", "core", p.cpu_request), ("memory", "byte", p.mem_request_bytes as f64)];
            // A pod on a DRA node asks for its devices in a ResourceClaim, not here.
            if !on_dra(p) {
                reqs.insert(0, (gpu_res.as_str(), "integer", p.gpu_request as f64));
            }
            // A HAMi pod also asks for its share's cores (percent) and framebuffer (MiB), from
            // its spec: pending too.
            if let Some(pct) = p.resource.hami_pct() {
                reqs.push(("nvidia_com_gpucores", "integer", pct as f64));
                reqs.push(("nvidia_com_gpumem", "integer", hami_gpumem_mib(pct)));
            }
            for (res, unit, v) in reqs {
                // Requests come from the pod spec, so pending pods have them too: with an empty
                // node label until the pod is bound, then a new series with the node.
                let before = format!("{},container=\"{}\",node=\"\",resource=\"{res}\",unit=\"{unit}\",{ksm}", id_labels(p), ns.container);
                let bound = format!("{},container=\"{}\",node=\"{}\",resource=\"{res}\",unit=\"{unit}\",{ksm}", id_labels(p), ns.container, node_name(p));
                for ts in self.pod_steps(p).step_by(step as usize) {
                    let l = if at(p.scheduled, ts).is_some() { &bound } else { &before };
                    self.sample("kube_pod_container_resource_requests", l, &go_g(v), ts)?;
                }
            }
        }

        // kube-state-metrics 2.20's pod-to-claim link, one series per pod.spec.resourceClaims
        // entry: the pod's claim from a template named after what it asks for.
        self.family("kube_pod_resourceclaim_info", "Information about a DRA ResourceClaim referenced by a pod.")?;
        for &i in pods.iter().filter(|&&i| on_dra(&sim.schedule.pods[i])) {
            let p = &sim.schedule.pods[i];
            let template = format!("{}-x{}", p.resource.name().trim_start_matches("nvidia.com/").replace(['.', '/'], "-"), p.gpu_request);
            let labels =
                format!("{},claim_name=\"gpu\",resourceclaim_name=\"{}\",resourceclaim_template_name=\"{template}\",{ksm}", id_labels(p), esc(&dra_claim(p)));
            for ts in self.pod_steps(p).step_by(step as usize) {
                self.sample("kube_pod_resourceclaim_info", &labels, "1", ts)?;
            }
        }

        self.family("kube_pod_status_reason", "The pod status reasons")?;
        for &i in &pods {
            let p = &sim.schedule.pods[i];
            for reason in STATUS_REASONS {
                let labels = format!("{},reason=\"{reason}\",{ksm}", id_labels(p));
                for ts in self.pod_steps(p).step_by(step as usize) {
                    let evicted = reason == "Evicted" && p.reason == Some("Preempted") && at(p.finished, ts).is_some();
                    self.sample("kube_pod_status_reason", &labels, if evicted { "1" } else { "0" }, ts)?;
                }
            }
        }

        self.family("kube_pod_container_status_last_terminated_reason", "Describes the last reason the container was in terminated state.")?;
        for &i in &pods {
            let p = &sim.schedule.pods[i];
            let Some(reason @ ("OOMKilled" | "Error" | "Completed")) = p.reason else { continue };
            let labels = format!("{},container=\"{}\",reason=\"{reason}\",{ksm}", id_labels(p), sim.namespaces[p.ns].container);
            for ts in self.pod_steps(p).step_by(step as usize) {
                if at(p.finished, ts).is_some() {
                    self.sample("kube_pod_container_status_last_terminated_reason", &labels, "1", ts)?;
                }
            }
        }

        self.family("kube_pod_labels", "Kubernetes labels converted to Prometheus labels.")?;
        for &i in &pods {
            let p = &sim.schedule.pods[i];
            let ns = &sim.namespaces[p.ns];
            let labels = format!("{},label_app=\"{}\",label_team=\"{}\",{ksm}", id_labels(p), ns.container, esc(ns.team));
            for ts in self.pod_steps(p).step_by(step as usize) {
                self.sample("kube_pod_labels", &labels, "1", ts)?;
            }
        }

        self.family("kube_resourcequota", "Information about resource quota.")?;
        for (n, ns) in sim.namespaces.iter().enumerate() {
            for kind in ["hard", "used"] {
                let labels = format!("namespace=\"{}\",resource=\"requests.nvidia.com/gpu\",resourcequota=\"gpu-quota\",type=\"{kind}\",{ksm}", esc(ns.name));
                let samples: Vec<(i64, u32)> =
                    sim.schedule.quotas.iter().filter(|q| q.ns == n).map(|q| (q.ts, if kind == "hard" { q.hard } else { q.used })).collect();
                let (ws, we) = sim.params.window_ms();
                for (ts, v) in samples.into_iter().filter(|(ts, _)| *ts >= ws && *ts < we) {
                    self.sample("kube_resourcequota", &labels, &go_g(v as f64), ts)?;
                }
            }
        }

        self.family("kube_namespace_labels", "Kubernetes labels converted to Prometheus labels.")?;
        let (ws, we) = sim.params.window_ms();
        for ns in &sim.namespaces {
            let labels = format!("namespace=\"{}\",label_cost_centre=\"{}\",label_team=\"{}\",{ksm}", esc(ns.name), esc(ns.cost_centre()), esc(ns.team));
            let mut ts = ws;
            while ts < we {
                self.sample("kube_namespace_labels", &labels, "1", ts)?;
                ts += step;
            }
        }

        // A node reports capacity while it is there, for the GPUs there (a board out is one
        // GPU fewer until the new one is in).
        self.family("kube_node_status_capacity", "The capacity for different resources of a node.")?;
        for node in &sim.cluster.nodes {
            let mut res: BTreeMap<String, Vec<usize>> = BTreeMap::new();
            for &u in &node.units {
                let name = match sim.cluster.units[u].mig_profile {
                    Some(p) => format!("nvidia_com_mig_{}", p.replace('.', "_")),
                    None if sim.cluster.units[u].time_sliced => "nvidia_com_gpu_shared".into(),
                    None => "nvidia_com_gpu".into(),
                };
                res.entry(name).or_default().push(u);
            }
            for (r, units) in res {
                let labels = format!("node=\"{}\",resource=\"{r}\",unit=\"integer\",{ksm}", node.name);
                let mut ts = ws;
                while ts < we {
                    let node_there = node.units.iter().any(|&u| sim.cluster.life_of(u).exists(ts));
                    let mut n = units.iter().filter(|&&u| sim.cluster.life_of(u).exists(ts)).count();
                    // HAMi advertises HAMI_SPLIT vGPUs per GPU as nvidia.com/gpu.
                    if units.first().is_some_and(|&u| sim.cluster.units[u].hami) {
                        n = n / HAMI_SLOTS_PCT.len() * HAMI_SPLIT;
                    }
                    if node_there {
                        self.sample("kube_node_status_capacity", &labels, &n.to_string(), ts)?;
                    }
                    ts += step;
                }
            }
        }
        Ok(())
    }
}

/// The ResourceClaim a DRA pod's template made for it: `<pod>-gpu-<5 characters>`, one per pod
/// (a pod re-created under the same name gets a new claim), as Kubernetes names them.
fn dra_claim(pod: &SimPod) -> String {
    let tail: String = pod.uid.chars().filter(char::is_ascii_alphanumeric).take(5).collect();
    format!("{}-gpu-{tail}", pod.name)
}

fn phase_at(p: &SimPod, ts: i64) -> &'static str {
    if p.finished.is_some_and(|f| f <= ts) {
        if p.reason == Some("Completed") {
            "Succeeded"
        } else {
            "Failed"
        }
    } else if p.started.is_some_and(|s| s <= ts) {
        "Running"
    } else {
        "Pending"
    }
}

/// The framebuffer (MiB) a HAMi pod of `pct` percent asks for: that share of the H100 the
/// simulator's HAMi node has (a slot's own `fb_mib`).
fn hami_gpumem_mib(pct: u32) -> f64 {
    (super::cluster::H100.fb_mib as f64 * pct as f64 / 100.0).round()
}

#[cfg(test)]
mod tests {
    use super::go_g;

    #[test]
    fn go_float_format() {
        assert_eq!(go_g(1.5e9), "1.5e+09");
        assert_eq!(go_g(3e8), "3e+08");
        assert_eq!(go_g(1730000123.0), "1.730000123e+09");
        assert_eq!(go_g(8.0), "8");
        assert_eq!(go_g(0.2), "0.2");
        assert_eq!(go_g(0.0), "0");
    }
}
