//! dcgm-exporter's series: each GPU's (or MIG instance's) fields per scrape, a MIG GPU's
//! parent series, energy counters with a reset, the scrape times of each node's exporter.

use super::*;

impl<W: Write> OmWriter<'_, W> {
    pub(super) fn dcgm(&mut self) -> io::Result<()> {
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

    /// Unit `slot` of GPU `gpu`'s utilisation at a scrape at `ts` (`g`: the GPU at `ts`), as
    /// the model has it: a pod works from the first step it holds the unit at the step's start
    /// and stops when it ends, so a pod that started inside the step is still loading (0%), and
    /// after a pod ended the unit is idle; otherwise the step's value.
    pub(super) fn util_at(&self, gpu: usize, slot: usize, g: &GpuStep, ts: i64) -> f64 {
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
    pub(super) fn scrape_times(&self, node: usize) -> Vec<i64> {
        let (ws, we) = self.sim.params.window_ms();
        let step = self.model.step_ms;
        let rollout_gap = self.options.rollout.map(|r| r + node as i64 * ROLLOUT_STAGGER_MS);
        let down = |t: i64| {
            self.options.outages.iter().any(|o| o.node == node && t >= o.start && t < o.end) || rollout_gap.is_some_and(|r| t >= r && t < r + ROLLOUT_GAP_MS)
        };
        let Some(interval) = self.options.scrape_interval_ms else {
            return (0..(we - ws) / step).map(|k| ws + k * step).filter(|&t| !down(t)).collect();
        };
        let mut rng = crate::simulate::rng::Rng::new(self.sim.params.seed ^ (0x5C4A_9E00 + node as u64));
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
    pub(super) fn rolled_out(&self, node: usize, t: i64) -> bool {
        self.options.rollout.is_some_and(|r| t >= r + node as i64 * ROLLOUT_STAGGER_MS)
    }

    /// The scrape target's address: the node's exporter pod, a new one after the rollout.
    pub(super) fn instance(&self, node: usize, rolled: bool) -> String {
        let name = &self.sim.cluster.nodes[node].name;
        if rolled {
            format!("10.42.{}.{}:9400", node / 200, 10 + node % 200)
        } else {
            format!("{name}:9400")
        }
    }

    /// Physical GPU `g`'s energy counter (mJ) at `ts`: the step's counter plus what the model
    /// used since the step began.
    pub(super) fn counter_at(&self, g: usize, ts: i64, counters: &[Vec<u64>]) -> u64 {
        let (ws, _) = self.sim.params.window_ms();
        let step = self.model.step_ms;
        let k = ((ts - ws) / step) as usize;
        let start = ws + k as i64 * step;
        counters[g][k] + (self.model.gpu_at(g, start).energy_between(start, ts) * 1000.0).round() as u64
    }

    /// A device-level field of every MIG GPU on its parent's own series: the GPU's labels
    /// without `GPU_I_*` and without a pod, one series per GPU for the whole window.
    pub(super) fn mig_parents(&mut self, fam: Dcgm, counters: &[Vec<u64>]) -> io::Result<()> {
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
}
