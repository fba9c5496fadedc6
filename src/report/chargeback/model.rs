//! The chargeback's types: exact quantities, the detail rows, the result with its cluster
//! totals, and the conservation checks.

use std::collections::BTreeMap;

use super::consts::RAW_PER_UNIT;
use crate::config::{Config, CostBasis};
use crate::domain::money::{format_units, round_ratio};
use crate::domain::units::{MJ_PER_KWH, US_PER_HOUR};
use crate::domain::window::Window;

/// Exact quantities: integers, and money in raw units (see `RAW_PER_UNIT`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Quantities {
    pub gpu_us: i64,
    pub energy_mj: i64,
    pub util_gpu_us: i64,
    /// The GPU time `util_gpu_us` was measured over: rows with a utilisation value.
    pub util_known_gpu_us: i64,
    pub gpu_cost: i128,
    pub power_cost: i128,
    pub carbon_mg: i128,
    pub unpriced_gpu_us: i64,
    pub request_based_gpu_us: i64,
    pub core_us: i64,
    pub cpu_cost: i128,
    pub gib_us: i64,
    pub memory_cost: i128,
}

impl Quantities {
    pub fn add(&mut self, o: &Quantities) {
        self.gpu_us += o.gpu_us;
        self.energy_mj += o.energy_mj;
        self.util_gpu_us += o.util_gpu_us;
        self.util_known_gpu_us += o.util_known_gpu_us;
        self.gpu_cost += o.gpu_cost;
        self.power_cost += o.power_cost;
        self.carbon_mg += o.carbon_mg;
        self.unpriced_gpu_us += o.unpriced_gpu_us;
        self.request_based_gpu_us += o.request_based_gpu_us;
        self.core_us += o.core_us;
        self.cpu_cost += o.cpu_cost;
        self.gib_us += o.gib_us;
        self.memory_cost += o.memory_cost;
    }

    /// GPU, CPU and memory at cloud prices.
    pub fn cloud_cost(&self) -> i128 {
        self.gpu_cost + self.cpu_cost + self.memory_cost
    }

    pub fn basis_cost(&self, basis: CostBasis) -> i128 {
        match basis {
            CostBasis::Cloud => self.cloud_cost(),
            CostBasis::Power => self.power_cost,
        }
    }
}

/// One detail row of `queries/chargeback.sql`.
#[derive(Debug, Clone, PartialEq)]
pub struct DetailRow {
    /// The cluster (`prometheus.cluster_label`); node and namespace names are per cluster.
    pub cluster: String,
    pub namespace: String,
    /// None on CPU / memory rows.
    pub gpu_model: Option<String>,
    pub mig_profile: Option<String>,
    /// UTC day, YYYY-MM-DD.
    pub date: String,
    pub q: Quantities,
}

/// Team and cost centre of a namespace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Owner {
    pub team: Option<String>,
    pub cost_centre: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Chargeback {
    pub window: Window,
    pub detail: Vec<DetailRow>,
    pub owners: BTreeMap<String, Owner>,
    pub cluster_gpu_us: i64,
    pub cluster_energy_mj: i64,
    pub cluster_rows: i64,
    pub cluster_gpus: i64,
    /// Energy against the GPUs' own counters over the window's whole days (None: the window
    /// holds no whole day).
    pub counters: Option<CounterCheck>,
}

/// Energy's conservation against the counters: over the window's whole days, the rows' energy
/// on the steps each GPU's energy counter covers against the counter's own delta there
/// (`queries/energy_counters.sql`).
#[derive(Debug, Clone, Default)]
pub struct CounterCheck {
    pub first_day: String,
    pub last_day: String,
    /// Whole days in the window, and those of them whose `nodes` rows carry energy.
    pub days: i64,
    pub days_recorded: i64,
    pub rows_energy_mj: i64,
    pub counter_energy_mj: i64,
    pub counter_delta_mj: i64,
    /// GPUs (node, uuid) by how far their rows' energy is from their counter, largest first:
    /// (GPU, rows mJ, counter mJ), at most [`COUNTER_WORST`].
    pub worst: Vec<(String, i64, i64)>,
}

/// GPUs named where the rows' energy is not the counters'.
pub const COUNTER_WORST: usize = 5;

/// The rows' energy may differ from the counters' by this many parts per million (the
/// readings are interpolated with the power at a step's ends by the rows, linearly here).
pub const COUNTER_TOLERANCE_PPM: i64 = 1_000;

impl CounterCheck {
    /// The rows' energy on the counted steps minus the counters' (mJ).
    pub fn difference_mj(&self) -> i64 {
        self.counter_energy_mj - self.counter_delta_mj
    }

    pub fn conserved(&self) -> bool {
        self.difference_mj().abs() as i128 * 1_000_000 <= self.counter_delta_mj.abs() as i128 * COUNTER_TOLERANCE_PPM as i128
    }

    /// Energy of steps no counter covers (power x step, or a reset inside the step).
    pub fn uncounted_mj(&self) -> i64 {
        self.rows_energy_mj - self.counter_energy_mj
    }
}

/// A namespace's totals after the idle / shared spread.
#[derive(Debug, Clone)]
pub struct NamespaceCharge {
    pub cluster: String,
    pub namespace: String,
    pub owner: Owner,
    pub q: Quantities,
    /// Raw money moved onto (positive) or off (negative) this row by the spread policies.
    pub spread: i128,
}

impl NamespaceCharge {
    pub fn total(&self, basis: CostBasis) -> i128 {
        self.q.basis_cost(basis) + self.spread
    }
}

impl Chargeback {
    pub fn rows_gpu_us(&self) -> i64 {
        self.detail.iter().map(|r| r.q.gpu_us).sum()
    }

    pub fn rows_energy_mj(&self) -> i64 {
        self.detail.iter().map(|r| r.q.energy_mj).sum()
    }

    pub fn gpu_us_conserved(&self) -> bool {
        self.rows_gpu_us() == self.cluster_gpu_us
    }

    pub fn energy_conserved(&self) -> bool {
        self.rows_energy_mj() == self.cluster_energy_mj
    }

    /// What no bill may publish, named: a detail row with negative GPU time, energy, carbon or
    /// money (a money figure that rounds below zero at cents), and a pool of more GPU time
    /// than its GPUs had in the window. Empty when the bill is sane.
    pub fn impossible_rows(&self) -> Vec<String> {
        let hours = |us: i64| format_units(round_ratio(us as i128, US_PER_HOUR, 4), 4);
        let money = |raw: i128| format_units(round_ratio(raw, RAW_PER_UNIT, 2), 2);
        let below_zero = |raw: i128| raw * 200 < -RAW_PER_UNIT;
        let mut found = Vec::new();
        for r in &self.detail {
            let q = &r.q;
            let mut what = Vec::new();
            if q.gpu_us < 0 {
                what.push(format!("{} GPU-hours", hours(q.gpu_us)));
            }
            if q.energy_mj < 0 {
                what.push(format!("{} kWh", format_units(round_ratio(q.energy_mj as i128, MJ_PER_KWH, 4), 4)));
            }
            if q.carbon_mg < 0 {
                what.push("negative carbon".to_string());
            }
            for (name, raw) in [("gpu_cost", q.gpu_cost), ("power_cost", q.power_cost), ("cpu_cost", q.cpu_cost), ("memory_cost", q.memory_cost)] {
                if below_zero(raw) {
                    what.push(format!("{name} {}", money(raw)));
                }
            }
            if !what.is_empty() {
                let cluster = if r.cluster.is_empty() { String::new() } else { format!("{}/", r.cluster) };
                let model = r.gpu_model.as_deref().map(|m| format!(" {m}")).unwrap_or_default();
                let profile = r.mig_profile.as_deref().map(|p| format!(" {p}")).unwrap_or_default();
                found.push(format!("{cluster}{}{model}{profile} {}: {}", r.namespace, r.date, what.join(", ")));
            }
        }
        // (A lake without the `nodes` inventory, written by hand, has no GPU count to bound by.)
        let most = (self.cluster_gpus as i128) * (self.window.seconds() as i128) * 1_000_000;
        if self.cluster_gpus > 0 && self.cluster_gpu_us as i128 > most {
            found.push(format!(
                "the pool: {} GPU-hours for {} GPUs x {:.2} h (at most {} GPU-hours)",
                hours(self.cluster_gpu_us),
                self.cluster_gpus,
                self.window.seconds() as f64 / 3600.0,
                format_units(round_ratio(most, US_PER_HOUR, 4), 4)
            ));
        }
        found
    }

    pub fn owner(&self, config: &Config, namespace: &str) -> Owner {
        if let Some(entry) = config.teams.get(namespace) {
            return Owner { team: Some(entry.team().to_string()), cost_centre: entry.cost_centre().map(str::to_string) };
        }
        self.owners.get(namespace).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day() -> Window {
        let start = chrono::DateTime::parse_from_rfc3339("2026-10-05T00:00:00Z").unwrap().with_timezone(&chrono::Utc);
        Window::new(start, start + chrono::Duration::days(1)).unwrap()
    }

    fn row(namespace: &str, gpu_us: i64, energy_mj: i64, gpu_cost: i128) -> DetailRow {
        DetailRow {
            cluster: String::new(),
            namespace: namespace.into(),
            gpu_model: Some("NVIDIA H100 80GB HBM3".into()),
            mig_profile: None,
            date: "2026-10-05".into(),
            q: Quantities { gpu_us, energy_mj, gpu_cost, ..Quantities::default() },
        }
    }

    fn bill(detail: Vec<DetailRow>, gpus: i64) -> Chargeback {
        let cluster_gpu_us = detail.iter().map(|r| r.q.gpu_us).sum();
        Chargeback { window: day(), detail, owners: BTreeMap::new(), cluster_gpu_us, cluster_energy_mj: 0, cluster_rows: 0, cluster_gpus: gpus, counters: None }
    }

    /// A sane bill passes; a negative row is named with what is negative; a cost that rounds to
    /// 0.00 is no negative bill; a pool beyond its GPUs x the day is named.
    #[test]
    fn an_impossible_bill_names_its_rows() {
        let hour = US_PER_HOUR as i64;
        assert!(bill(vec![row("team-a", 20 * hour, 5, 1), row("__unallocated__", 4 * hour, 1, 0)], 1).impossible_rows().is_empty());
        let found = bill(vec![row("team-a", 30 * hour, 5, 1), row("__unallocated__", -6 * hour, -2_000_000_000, -3 * RAW_PER_UNIT)], 1).impossible_rows();
        assert_eq!(found, ["__unallocated__ NVIDIA H100 80GB HBM3 2026-10-05: -6.0000 GPU-hours, -0.5556 kWh, gpu_cost -3.00"]);
        assert!(bill(vec![row("team-a", hour, 0, -RAW_PER_UNIT / 1000)], 1).impossible_rows().is_empty(), "-0.001 rounds to 0.00");
        let found = bill(vec![row("team-a", 30 * hour, 0, 0)], 1).impossible_rows();
        assert_eq!(found, ["the pool: 30.0000 GPU-hours for 1 GPUs x 24.00 h (at most 24.0000 GPU-hours)"]);
    }
}

#[cfg(test)]
mod counter_tests {
    use super::*;

    /// The rows' energy on the counted steps may be 0.1% from the counters', no more, either
    /// way; the energy of steps no counter covers is what the rows have beyond them.
    #[test]
    fn the_counters_check_allows_a_tenth_of_a_percent() {
        let check = |rows: i64, counted: i64, delta: i64| CounterCheck {
            days: 1,
            days_recorded: 1,
            rows_energy_mj: rows,
            counter_energy_mj: counted,
            counter_delta_mj: delta,
            ..CounterCheck::default()
        };
        assert!(check(1_000_500, 1_000_000, 1_000_000).conserved());
        assert!(check(1_001_000, 1_001_000, 1_000_000).conserved());
        assert!(check(999_000, 999_000, 1_000_000).conserved());
        assert!(!check(1_001_001, 1_001_001, 1_000_000).conserved(), "more than 0.1% above the counters");
        assert!(!check(998_999, 998_999, 1_000_000).conserved(), "more than 0.1% below");
        assert_eq!(check(1_000_500, 1_000_000, 1_000_000).uncounted_mj(), 500);
    }
}
