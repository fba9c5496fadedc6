//! What a timeline of pods costs: the cloud prices per GPU model (and MIG profile), and the
//! power cost, from the energy each namespace drew per GPU-hour in the recorded month (and a
//! GPU no pod held), x PUE x the tariff of each 15 minutes.
//!
//! A replay moves pods in time and onto other nodes, not their draw: a namespace's pods are
//! taken to draw, per GPU-hour on a model, what that namespace's pods drew there in the month
//! (as charged by the chargeback, from DCGM's energy counters), and a GPU no pod holds what that
//! model's idle GPUs drew.

use std::collections::BTreeMap;

use crate::config::Config;
use crate::domain::units::{BUCKET_MS, UNALLOCATED, UNMEASURED};
use crate::pricing::tariff::Tariff;
use crate::report::chargeback::{Chargeback, RAW_PER_UNIT};

use super::model::{Ms, Setup};

const MS_PER_HOUR: f64 = 3_600_000.0;

/// A price per unit-hour of one (model, resource), in force from an instant.
#[derive(Debug, Clone, Default)]
pub struct PriceList {
    /// Per model, per resource: `(from, price per unit-hour)` sorted by `from`.
    pub rates: Vec<Vec<Vec<(Ms, f64)>>>,
}

impl PriceList {
    /// The cost of holding one unit of `(model, resource)` over `[a, b)`, priced piecewise.
    pub fn cost(&self, model: usize, resource: usize, a: Ms, b: Ms) -> f64 {
        let Some(list) = self.rates.get(model).and_then(|m| m.get(resource)) else { return 0.0 };
        let mut total = 0.0;
        for (i, &(from, price)) in list.iter().enumerate() {
            let until = list.get(i + 1).map_or(Ms::MAX, |n| n.0);
            let (x, y) = (a.max(from), b.min(until));
            if x < y {
                total += price * (y - x) as f64 / MS_PER_HOUR;
            }
        }
        total
    }
}

/// The configured cloud prices per (model, resource) unit-hour: a MIG profile's own price, else
/// its share of the GPU's price.
pub fn price_list(config: &Config, setup: &Setup) -> PriceList {
    let (models, resources, nodes) = (&setup.models, &setup.resources, &setup.nodes);
    let mut rates = vec![vec![Vec::new(); resources.len()]; models.len()];
    for (m, model) in models.iter().enumerate() {
        for (r, resource) in resources.iter().enumerate() {
            let profile = resource.strip_prefix("nvidia.com/mig-");
            let share = nodes.iter().filter(|n| n.model == m).flat_map(|n| n.units.iter()).find(|g| g.resource == r).map_or(1.0, |g| g.share);
            let own: Vec<_> = config.pricing.gpu.iter().filter(|p| p.model == *model && profile.is_some() && p.mig_profile.as_deref() == profile).collect();
            let mut list: Vec<(Ms, f64)> = if own.is_empty() {
                config
                    .pricing
                    .gpu
                    .iter()
                    .filter(|p| p.model == *model && p.mig_profile.is_none())
                    .map(|p| (day_ms(p.effective_from), p.price_per_hour * share))
                    .collect()
            } else {
                own.iter().map(|p| (day_ms(p.effective_from), p.price_per_hour)).collect()
            };
            list.sort_by_key(|x| x.0);
            rates[m][r] = list;
        }
    }
    PriceList { rates }
}

fn day_ms(d: chrono::NaiveDate) -> Ms {
    d.and_time(chrono::NaiveTime::MIN).and_utc().timestamp_millis()
}

/// GPU time and energy, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Drawn {
    pub gpu_us: i64,
    pub energy_mj: i64,
}

impl Drawn {
    fn add(&mut self, gpu_us: i64, energy_mj: i64) {
        self.gpu_us += gpu_us;
        self.energy_mj += energy_mj;
    }

    /// kWh per GPU-hour (mJ per GPU-us is the same ratio); none without GPU time.
    fn kwh_per_gpu_hour(&self) -> Option<f64> {
        (self.gpu_us > 0).then(|| self.energy_mj as f64 / self.gpu_us as f64)
    }
}

/// What the month's chargeback charged, as a replay prices power and compares cost.
#[derive(Debug, Clone, Default)]
pub struct Charged {
    /// Per (namespace, GPU model): GPU time and energy of the pods.
    pub drawn: BTreeMap<(String, String), Drawn>,
    /// Per GPU model: GPU time and energy of GPUs no pod held.
    pub idle: BTreeMap<String, Drawn>,
    /// Per namespace (and `__unallocated__`): the GPU cost (cloud prices, GPUs only) and the
    /// power cost charged, in currency units, before any idle or shared spread.
    pub gpu_cost: BTreeMap<String, f64>,
    pub power_cost: BTreeMap<String, f64>,
}

impl Charged {
    /// The chargeback's detail rows of `cluster` (all of them for `None`).
    pub fn from_chargeback(c: &Chargeback, cluster: Option<&str>) -> Charged {
        let mut out = Charged::default();
        for r in c.detail.iter().filter(|r| cluster.is_none_or(|c| r.cluster == c)) {
            let Some(model) = &r.gpu_model else { continue };
            if r.namespace == UNMEASURED {
                continue;
            }
            if r.namespace == UNALLOCATED {
                out.idle.entry(model.clone()).or_default().add(r.q.gpu_us, r.q.energy_mj);
            } else {
                out.drawn.entry((r.namespace.clone(), model.clone())).or_default().add(r.q.gpu_us, r.q.energy_mj);
            }
            *out.gpu_cost.entry(r.namespace.clone()).or_default() += r.q.gpu_cost as f64 / RAW_PER_UNIT as f64;
            *out.power_cost.entry(r.namespace.clone()).or_default() += r.q.power_cost as f64 / RAW_PER_UNIT as f64;
        }
        out
    }
}

/// Power prices of one setup: draw per GPU-hour and the tariff integrated over time.
#[derive(Debug, Clone, Default)]
pub struct PowerPrices {
    pub pue: f64,
    /// Start of the first 15-minute bucket of the tariff grid.
    from: Ms,
    /// Per bucket: its price per kWh.
    price: Vec<f64>,
    /// `cum[i]`: the price per kWh integrated over buckets `0..i`, in price x hours.
    cum: Vec<f64>,
    /// Per namespace and model: kWh per GPU-hour a pod of the namespace draws there.
    pub kwh_per_gpu_hour: Vec<Vec<f64>>,
    /// Per model: kWh per GPU-hour of a GPU no pod holds.
    pub idle_kwh_per_gpu_hour: Vec<f64>,
}

impl PowerPrices {
    /// For `setup`'s namespaces and models. A namespace with no charged GPU time on a model
    /// draws that model's average over the month's pods; a model with none, the namespace's
    /// average; else the pool's. Each such fill is returned as a line for the notes.
    pub fn new(config: &Config, setup: &Setup, charged: &Charged) -> (PowerPrices, Vec<String>) {
        let mut filled = Vec::new();
        let tariff = Tariff::from_config(&config.pricing.power);
        let grid = tariff.grid(setup.from, setup.to.max(setup.from + 1));
        let from = grid.first().map_or(setup.from, |g| g.0);
        let price: Vec<f64> = grid.iter().map(|g| g.1.price_per_kwh).collect();
        let mut per_model: BTreeMap<&str, Drawn> = BTreeMap::new();
        let mut per_ns: BTreeMap<&str, Drawn> = BTreeMap::new();
        let mut pool = Drawn::default();
        for ((ns, model), d) in &charged.drawn {
            per_model.entry(model).or_default().add(d.gpu_us, d.energy_mj);
            per_ns.entry(ns).or_default().add(d.gpu_us, d.energy_mj);
            pool.add(d.gpu_us, d.energy_mj);
        }
        let mut kwh = vec![vec![0.0; setup.models.len()]; setup.namespaces.len()];
        for (i, ns) in setup.namespaces.iter().enumerate() {
            for (m, model) in setup.models.iter().enumerate() {
                let own = charged.drawn.get(&(ns.clone(), model.clone())).and_then(Drawn::kwh_per_gpu_hour);
                kwh[i][m] = match own {
                    Some(v) => v,
                    None => {
                        let (v, from) = match (
                            per_model.get(model.as_str()).and_then(Drawn::kwh_per_gpu_hour),
                            per_ns.get(ns.as_str()).and_then(Drawn::kwh_per_gpu_hour),
                        ) {
                            (Some(v), _) => (v, "that model's average"),
                            (None, Some(v)) => (v, "its average on other models"),
                            (None, None) => (pool.kwh_per_gpu_hour().unwrap_or(0.0), "the pool's average"),
                        };
                        if setup.nodes.iter().any(|n| n.model == m)
                            && setup.affinity.get(i).and_then(|a| a.get(m)).copied().unwrap_or(true)
                            && per_ns.contains_key(ns.as_str())
                        {
                            filled.push(format!("{ns} on {model}: {v:.3} kWh per GPU-hour ({from})"));
                        }
                        v
                    }
                };
            }
        }
        let mut idle_all = Drawn::default();
        for d in charged.idle.values() {
            idle_all.add(d.gpu_us, d.energy_mj);
        }
        let idle = setup
            .models
            .iter()
            .enumerate()
            .map(|(m, model)| match charged.idle.get(model).and_then(Drawn::kwh_per_gpu_hour) {
                Some(v) => v,
                None => {
                    let v = idle_all.kwh_per_gpu_hour().unwrap_or(0.0);
                    if setup.nodes.iter().any(|n| n.model == m) {
                        let from = if idle_all.gpu_us > 0 { "the pool's idle average" } else { "no GPU was idle in the month" };
                        filled.push(format!("idle {model}: {v:.3} kWh per GPU-hour ({from})"));
                    }
                    v
                }
            })
            .collect();
        (PowerPrices::with_grid(config.pricing.power.pue, from, price, kwh, idle), filled)
    }

    /// From parts: PUE, a grid of 15-minute prices from `from`, draws per namespace and model,
    /// and idle draws per model (for hand-worked cases).
    pub fn with_grid(pue: f64, from: Ms, price: Vec<f64>, kwh_per_gpu_hour: Vec<Vec<f64>>, idle_kwh_per_gpu_hour: Vec<f64>) -> PowerPrices {
        let mut cum = Vec::with_capacity(price.len() + 1);
        cum.push(0.0);
        for p in &price {
            cum.push(cum.last().copied().unwrap_or(0.0) + p * BUCKET_MS as f64 / MS_PER_HOUR);
        }
        PowerPrices { pue, from, price, cum, kwh_per_gpu_hour, idle_kwh_per_gpu_hour }
    }

    /// The tariff's price per kWh integrated from the grid's start to `t`, in price x hours.
    fn integral(&self, t: Ms) -> f64 {
        let n = self.price.len();
        if n == 0 || t <= self.from {
            return 0.0;
        }
        let i = ((t - self.from) / BUCKET_MS) as usize;
        if i >= n {
            return self.cum[n];
        }
        self.cum[i] + self.price[i] * (t - self.from - i as i64 * BUCKET_MS) as f64 / MS_PER_HOUR
    }

    /// The price per kWh x hours over `[a, b)`: the cost of drawing 1 kW over it, before PUE.
    pub fn price_hours(&self, a: Ms, b: Ms) -> f64 {
        if b <= a {
            return 0.0;
        }
        self.integral(b) - self.integral(a)
    }
}

/// Both price lists of one setup.
#[derive(Debug, Clone, Default)]
pub struct Prices {
    pub cloud: PriceList,
    pub power: PowerPrices,
}

impl Prices {
    pub fn new(config: &Config, setup: &Setup, charged: &Charged) -> (Prices, Vec<String>) {
        let (power, filled) = PowerPrices::new(config, setup, charged);
        (Prices { cloud: price_list(config, setup), power }, filled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(from: Ms, prices: &[f64]) -> PowerPrices {
        PowerPrices::with_grid(1.5, from, prices.to_vec(), Vec::new(), Vec::new())
    }

    #[test]
    fn the_tariff_integrates_across_bucket_edges() {
        // Buckets of 15 min at 0.10, 0.20, 0.30 per kWh from t = 0.
        let p = flat(0, &[0.10, 0.20, 0.30]);
        // 1 kW for the whole 45 min: 0.25 h x (0.1 + 0.2 + 0.3) = 0.15.
        assert!((p.price_hours(0, 3 * BUCKET_MS) - 0.15).abs() < 1e-12);
        // From 10 min to 20 min: 5 min at 0.10 and 5 min at 0.20 = (0.5 + 1.0) / 60 = 0.025.
        assert!((p.price_hours(10 * 60_000, 20 * 60_000) - 0.025).abs() < 1e-12);
        // Nothing outside the grid, and nothing for an empty span.
        assert_eq!(p.price_hours(-BUCKET_MS, 0), 0.0);
        assert!((p.price_hours(0, 10 * BUCKET_MS) - 0.15).abs() < 1e-12);
        assert_eq!(p.price_hours(5, 5), 0.0);
    }
}
