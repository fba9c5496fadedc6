//! The chargeback as a report: rows by namespace, team, cost centre or cluster, the total and
//! conservation lines, notes, and the JSON metadata.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::consts::R;
use super::*;
use crate::config::{Config, CostBasis};
use crate::domain::money::{apportion, format_units, round_ratio};
use crate::report::render::{Cell, Report};

impl Chargeback {
    pub fn to_report(&self, config: &Config, by: &ChargeBy) -> Report {
        self.to_report_by(config, by, None)
    }

    /// The chargeback keyed by `by`; a key of each pod (`ChargeBy::is_per_pod`) needs the
    /// namespaces split between their pods' keys (`attribution`), else every namespace is
    /// `__unattributed__`.
    pub fn to_report_by(&self, config: &Config, by: &ChargeBy, attribution: Option<&Attribution>) -> Report {
        let basis = config.pricing.basis;
        let namespaces = self.namespaces(config);
        // Group (after the spread, which is defined per cluster and namespace). By namespace the
        // key is the namespace and its cluster (sorted by namespace, then cluster).
        let mut groups: BTreeMap<(String, String), (Owner, Quantities, i128, Vec<String>)> = BTreeMap::new();
        for r in &namespaces {
            let special = r.namespace == UNALLOCATED || r.namespace == UNMEASURED;
            let parts: Vec<((String, String), Quantities, i128)> = match by {
                ChargeBy::Namespace => vec![((r.namespace.clone(), r.cluster.clone()), r.q.clone(), r.spread)],
                ChargeBy::Cluster => vec![((r.cluster.clone(), String::new()), r.q.clone(), r.spread)],
                _ if special => vec![((r.namespace.clone(), String::new()), r.q.clone(), r.spread)],
                ChargeBy::Team => vec![((r.owner.team.clone().unwrap_or_else(|| UNASSIGNED.into()), String::new()), r.q.clone(), r.spread)],
                ChargeBy::CostCentre => vec![((r.owner.cost_centre.clone().unwrap_or_else(|| UNASSIGNED.into()), String::new()), r.q.clone(), r.spread)],
                _ => match attribution {
                    Some(a) => a.parts(r, basis).into_iter().map(|(k, q, s)| ((k, String::new()), q, s)).collect(),
                    None => vec![((UNATTRIBUTED.to_string(), String::new()), r.q.clone(), r.spread)],
                },
            };
            for (key, q, spread) in parts {
                let g = groups.entry(key).or_insert_with(|| (r.owner.clone(), Quantities::default(), 0, Vec::new()));
                g.1.add(&q);
                g.2 += spread;
                if !g.3.contains(&r.namespace) {
                    g.3.push(r.namespace.clone());
                }
            }
        }
        let keys: Vec<&(String, String)> = groups.keys().collect();
        let vals: Vec<&(Owner, Quantities, i128, Vec<String>)> = groups.values().collect();
        let col = |f: &dyn Fn(&Quantities, i128) -> i128| -> Vec<i128> { vals.iter().map(|(_, q, s, _)| f(q, *s)).collect() };

        let gpu_us = col(&|q, _| q.gpu_us as i128);
        let (hours, hours_total) = apportion(&gpu_us, US_PER_HOUR, 4);
        let (kwh, kwh_total) = apportion(&col(&|q, _| q.energy_mj as i128), MJ_PER_KWH, 4);
        let money = |v: Vec<i128>| apportion(&v, RAW_PER_UNIT, 2);
        let (power, power_total) = money(col(&|q, _| q.power_cost));
        let (gpu_c, gpu_total) = money(col(&|q, _| q.gpu_cost));
        let (cpu_c, cpu_total) = money(col(&|q, _| q.cpu_cost));
        let (mem_c, mem_total) = money(col(&|q, _| q.memory_cost));
        let (cloud, cloud_total) = money(col(&|q, _| q.cloud_cost()));
        let (spread_c, spread_total) = money(col(&|_, s| s));
        let (total, total_total) = money(col(&|q, s| q.basis_cost(basis) + s));
        // kg = mg / 1e6, at 3 decimals.
        let (carbon, carbon_total) = apportion(&col(&|q, _| q.carbon_mg), RAW_PER_UNIT * 1_000, 3);
        let (req_h, req_total) = apportion(&col(&|q, _| q.request_based_gpu_us as i128), US_PER_HOUR, 4);
        let share_basis: i128 = gpu_us.iter().sum::<i128>().max(1);
        let (share, share_total) = apportion(&gpu_us.iter().map(|g| g * 100).collect::<Vec<_>>(), share_basis, 2);
        let carbon_on = config.pricing.power.carbon_g_per_kwh.is_some();

        let dec = |units: i128, decimals: u32| Cell::Dec { units, decimals };
        let opt = |v: &Option<String>| v.clone().map_or(Cell::Null, Cell::Str);
        let mut rows = Vec::with_capacity(keys.len());
        for (i, key) in keys.iter().enumerate() {
            let (owner, q, _, members) = vals[i];
            // Over the GPU time with a utilisation value: none (a row of unmeasured time, CPU only) is no figure, not 0%.
            let util = avg_util(q.util_gpu_us as i128, q.util_known_gpu_us as i128);
            let mut row = vec![Cell::Str(key.0.clone())];
            match by {
                ChargeBy::Namespace => row.extend([opt(&owner.team), opt(&owner.cost_centre)]),
                _ => row.push(Cell::Str(members.join(" "))),
            }
            row.extend([
                dec(hours[i], 4),
                util,
                dec(kwh[i], 4),
                dec(power[i], 2),
                dec(gpu_c[i], 2),
                dec(cpu_c[i], 2),
                dec(mem_c[i], 2),
                dec(cloud[i], 2),
                if carbon_on { dec(carbon[i], 3) } else { Cell::Null },
                dec(spread_c[i], 2),
                dec(total[i], 2),
                dec(share[i], 2),
                Cell::Str(if q.request_based_gpu_us > 0 { "yes" } else { "no" }.into()),
                dec(req_h[i], 4),
            ]);
            if *by == ChargeBy::Namespace {
                row.push(Cell::Str(key.1.clone()));
            }
            rows.push(row);
        }
        let util_all: i128 = vals.iter().map(|(_, q, _, _)| q.util_gpu_us as i128).sum();
        let util_known_all: i128 = vals.iter().map(|(_, q, _, _)| q.util_known_gpu_us as i128).sum();
        let mut total_row = vec![Cell::Str("total".into())];
        match by {
            ChargeBy::Namespace => total_row.extend([Cell::Null, Cell::Null]),
            _ => total_row.push(Cell::Null),
        }
        total_row.extend([
            dec(hours_total, 4),
            avg_util(util_all, util_known_all),
            dec(kwh_total, 4),
            dec(power_total, 2),
            dec(gpu_total, 2),
            dec(cpu_total, 2),
            dec(mem_total, 2),
            dec(cloud_total, 2),
            if carbon_on { dec(carbon_total, 3) } else { Cell::Null },
            dec(spread_total, 2),
            dec(total_total, 2),
            dec(share_total, 2),
            Cell::Str(if req_total > 0 { "yes" } else { "no" }.into()),
            dec(req_total, 4),
        ]);
        if *by == ChargeBy::Namespace {
            total_row.push(Cell::Null);
        }

        let mut columns = vec![by.column()];
        match by {
            ChargeBy::Namespace => columns.extend(["team", "cost_centre"].map(String::from)),
            _ => columns.push("namespaces".into()),
        }
        columns.extend(
            [
                "gpu_hours",
                "avg_util_pct",
                "energy_kwh",
                "power_cost",
                "gpu_cost",
                "cpu_cost",
                "memory_cost",
                "cloud_cost",
                "carbon_kg",
                "idle_cost",
                "total_cost",
                "share_pct",
                "request_based",
                "request_based_gpu_hours",
            ]
            .map(String::from),
        );
        // The cluster of each namespace row: last, so the columns before keep their places.
        if *by == ChargeBy::Namespace {
            columns.push("cluster".into());
        }

        let mut notes = self.notes(config, &namespaces, hours_total, kwh_total, total_total, req_total);
        if by.is_per_pod() {
            // The rows by key against the namespaces they were split from, to the unit.
            let (mut keyed, mut whole) = (Quantities::default(), Quantities::default());
            vals.iter().for_each(|(_, q, _, _)| keyed.add(q));
            namespaces.iter().for_each(|r| whole.add(&r.q));
            let spread_kept = vals.iter().map(|(_, _, s, _)| s).sum::<i128>() == namespaces.iter().map(|r| r.spread).sum::<i128>();
            notes.push(attribution_note(by, attribution, keyed == whole && spread_kept));
        }
        Report {
            name: R.into(),
            title: match by {
                ChargeBy::Namespace => format!("GPU chargeback {}", self.window.label()),
                _ => format!("GPU chargeback by {} {}", by.words(), self.window.label()),
            },
            columns,
            rows,
            total: Some(total_row),
            notes,
            meta: self.meta(config, &namespaces),
        }
    }

    fn notes(&self, config: &Config, namespaces: &[NamespaceCharge], hours_total: i128, kwh_total: i128, total_total: i128, req_total: i128) -> Vec<String> {
        let currency = &config.pricing.currency;
        let basis = config.pricing.basis;
        let check = |ok: bool| if ok { "OK" } else { "MISMATCH" };
        let cluster_hours = round_ratio(self.cluster_gpu_us as i128, US_PER_HOUR, 4);
        let cluster_kwh = round_ratio(self.cluster_energy_mj as i128, MJ_PER_KWH, 4);
        let basis_direct: i128 = namespaces.iter().map(|r| r.q.basis_cost(basis)).sum();
        let rows_total: i128 = namespaces.iter().map(|r| r.total(basis)).sum();
        let mut notes = vec![
            format!(
                "conservation: GPU-hours rows {} = cluster {} ({} GPU-us vs {}) {}; energy rows {} kWh = cluster {} kWh ({} mJ vs {}) {}; total_cost rows {} = cluster {} {currency} {}",
                format_units(hours_total, 4),
                format_units(cluster_hours, 4),
                self.rows_gpu_us(),
                self.cluster_gpu_us,
                check(self.gpu_us_conserved()),
                format_units(kwh_total, 4),
                format_units(cluster_kwh, 4),
                self.rows_energy_mj(),
                self.cluster_energy_mj,
                check(self.energy_conserved()),
                format_units(total_total, 2),
                format_units(round_ratio(basis_direct, RAW_PER_UNIT, 2), 2),
                check(rows_total == basis_direct),
            ),
            format!(
                "window {} to {}; {} GPUs, {} samples; total_cost = {} cost in {currency}; power: tariff in {}, PUE {}; unallocated: {}; shared namespaces ({}): {}",
                self.window.start.to_rfc3339(),
                self.window.end.to_rfc3339(),
                self.cluster_gpus,
                self.cluster_rows,
                match basis {
                    CostBasis::Cloud => "cloud (GPU + CPU + memory)",
                    CostBasis::Power => "power",
                },
                config.pricing.power.timezone,
                config.pricing.power.pue,
                config.idle_policy().label(),
                if config.pricing.shared_namespaces.is_empty() { "none".to_string() } else { config.pricing.shared_namespaces.join(", ") },
                config.shared_policy().label(),
            ),
        ];
        notes.push(self.counter_note());
        let unpriced: i64 = self.detail.iter().map(|r| r.q.unpriced_gpu_us).sum();
        if unpriced > 0 {
            notes.push(format!(
                "warning: {} GPU-hours ran on GPU models with no [[pricing.gpu]] entry and carry no GPU cost",
                format_units(round_ratio(unpriced as i128, US_PER_HOUR, 4), 4)
            ));
        }
        let unmeasured: i64 = self.detail.iter().filter(|r| r.namespace == UNMEASURED).map(|r| r.q.gpu_us).sum();
        if unmeasured > 0 {
            notes.push(format!(
                "unmeasured: {} GPU-hours of the pool had no DCGM sample, even within prometheus.lookback_secs (an exporter down, a node without one): row {UNMEASURED} at list price; `report completeness` says where",
                format_units(round_ratio(unmeasured as i128, US_PER_HOUR, 4), 4)
            ));
        }
        if req_total > 0 {
            notes.push(format!(
                "request-based: {} GPU-hours were attributed from kube-state-metrics requests x running time, on nodes whose DCGM exporter reported no pods or where no sample covered a pod bound there (rows marked request_based)",
                format_units(req_total, 4)
            ));
        }
        notes
    }

    /// The conservation of energy against the GPUs' own counters, over the window's whole days.
    fn counter_note(&self) -> String {
        let kwh = |mj: i64| format_units(round_ratio(mj as i128, MJ_PER_KWH, 4), 4);
        let Some(c) = &self.counters else {
            return "energy against the counters: compared over whole UTC days, and the window holds none".into();
        };
        let days = if c.days == 1 { c.first_day.clone() } else { format!("{} to {} ({} days)", c.first_day, c.last_day, c.days) };
        if c.days_recorded == 0 {
            return format!("energy against the counters, {days}: not recorded (days collected before the counters were kept; a re-collect records them)");
        }
        let mut note = format!(
            "energy against the counters, {days}: rows {} kWh, of which {} kWh on the steps the GPUs' energy counters cover = counters {} kWh ({} mJ vs {}, {}) {}; {} kWh by power x step where no counter reading covered the step",
            kwh(c.rows_energy_mj),
            kwh(c.counter_energy_mj),
            kwh(c.counter_delta_mj),
            c.counter_energy_mj,
            c.counter_delta_mj,
            signed_ppm_pct(c.difference_mj(), c.counter_delta_mj),
            if c.conserved() { "OK" } else { "MISMATCH" },
            kwh(c.uncounted_mj()),
        );
        if c.days_recorded < c.days {
            note.push_str(&format!(
                "; {} of the {} days carry no counter sums (collected before the counters were kept, or no GPU data)",
                c.days - c.days_recorded,
                c.days
            ));
        }
        note
    }

    fn meta(&self, config: &Config, namespaces: &[NamespaceCharge]) -> Map<String, Value> {
        let basis = config.pricing.basis;
        let mut meta = Map::new();
        meta.insert("window_start".into(), Value::String(self.window.start.to_rfc3339()));
        meta.insert("window_end".into(), Value::String(self.window.end.to_rfc3339()));
        meta.insert("currency".into(), Value::String(config.pricing.currency.clone()));
        let basis_direct: i128 = namespaces.iter().map(|r| r.q.basis_cost(basis)).sum();
        let rows_total: i128 = namespaces.iter().map(|r| r.total(basis)).sum();
        let mut cons = Map::new();
        cons.insert("rows_gpu_us".into(), Value::from(self.rows_gpu_us()));
        cons.insert("cluster_gpu_us".into(), Value::from(self.cluster_gpu_us));
        cons.insert("rows_energy_mj".into(), Value::from(self.rows_energy_mj()));
        cons.insert("cluster_energy_mj".into(), Value::from(self.cluster_energy_mj));
        cons.insert("gpu_hours_conserved".into(), Value::Bool(self.gpu_us_conserved()));
        cons.insert("energy_conserved".into(), Value::Bool(self.energy_conserved()));
        cons.insert("cost_conserved".into(), Value::Bool(rows_total == basis_direct));
        if let Some(c) = &self.counters {
            let mut counters = Map::new();
            counters.insert("first_day".into(), Value::String(c.first_day.clone()));
            counters.insert("last_day".into(), Value::String(c.last_day.clone()));
            counters.insert("days".into(), Value::from(c.days));
            counters.insert("days_recorded".into(), Value::from(c.days_recorded));
            counters.insert("rows_energy_mj".into(), Value::from(c.rows_energy_mj));
            counters.insert("counted_rows_energy_mj".into(), Value::from(c.counter_energy_mj));
            counters.insert("counter_delta_mj".into(), Value::from(c.counter_delta_mj));
            counters.insert("conserved".into(), Value::Bool(c.days_recorded == 0 || c.conserved()));
            cons.insert("energy_counters".into(), Value::Object(counters));
        }
        meta.insert("conservation".into(), Value::Object(cons));
        meta.insert("idle_policy".into(), Value::String(config.idle_policy().label()));
        meta.insert("request_based".into(), Value::Bool(self.detail.iter().any(|r| r.q.request_based_gpu_us > 0)));
        meta
    }
}

/// `diff` as a signed percentage of `of` to 4 decimals ("+0.0012%"); "-" where `of` is 0.
fn signed_ppm_pct(diff: i64, of: i64) -> String {
    if of == 0 {
        return "-".into();
    }
    let pct = round_ratio(diff as i128 * 100 * 10_000, of as i128, 0);
    format!("{}{}%", if diff >= 0 { "+" } else { "-" }, format_units(pct.abs(), 4))
}

/// Average utilisation (percent, 2 decimals) of utilisation-weighted GPU time over the GPU time
/// that had a utilisation value; no such time is no figure.
fn avg_util(util_gpu_us: i128, known_gpu_us: i128) -> Cell {
    if known_gpu_us > 0 {
        Cell::Dec { units: round_ratio(util_gpu_us, known_gpu_us, 2), decimals: 2 }
    } else {
        Cell::Null
    }
}

/// How a chargeback by a key of each pod was split, for its notes.
fn attribution_note(by: &ChargeBy, attribution: Option<&Attribution>, adds_up: bool) -> String {
    let Some(a) = attribution else {
        return format!("by {by}: no pod's value was read, so every namespace's row is {UNATTRIBUTED}");
    };
    let mut note = format!(
        "by {by}: rows sum to the namespaces' to the unit {}; each namespace's rows split between its pods' values ({} pods with one, {} without: {UNATTRIBUTED}); GPU time a sample measured is its pod's, priced as the namespace's; GPU time charged by request, CPU and memory follow the pods' requests that day; the namespaces' spread follows their keys' costs",
        if adds_up { "OK" } else { "MISMATCH" },
        a.pods_keyed,
        a.pods_unkeyed
    );
    if !a.inferred.is_empty() {
        let hops: Vec<String> = a.inferred.iter().map(|(why, n)| format!("{n} by {why}")).collect();
        note.push_str(&format!("; workloads inferred: {}", hops.join("; ")));
    }
    note
}
