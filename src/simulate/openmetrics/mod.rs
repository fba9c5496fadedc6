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

mod dcgm;
mod hami;
mod ksm;
pub mod queues;

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
}

/// The ResourceClaim a DRA pod's template made for it: `<pod>-gpu-<5 characters>`, one per pod
/// (a pod re-created under the same name gets a new claim), as Kubernetes names them.
fn dra_claim(pod: &SimPod) -> String {
    let tail: String = pod.uid.chars().filter(char::is_ascii_alphanumeric).take(5).collect();
    format!("{}-gpu-{tail}", pod.name)
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
