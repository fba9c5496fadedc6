//! HAMi's own series: the scheduler's allocations per container and device, the vGPU
//! monitor's utilisation per container.

use super::*;

impl<W: Write> OmWriter<'_, W> {
    /// HAMi's own series for its node (`shared/reference/gpu-sharing-facts.md`): the scheduler's
    /// allocation per container and device (`hami_vgpu_core_allocated_ratio` in percent,
    /// `hami_vgpu_memory_allocated_bytes`), scraped every step 7 s after it, and each device's
    /// `hami_gpu_memory_limit_bytes`; the vGPU monitor's `hami_container_device_utilization_ratio`
    /// (the container's part of the whole GPU's work, 0-100) on the node's scrapes. A series per
    /// pod while it holds its slot, as the scheduler and monitor drop a container once it is gone.
    pub(super) fn hami(&mut self) -> io::Result<()> {
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
}
