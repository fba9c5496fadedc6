//! A plan as reports: `plan` (per scenario and namespace), `plan_summary` (per scenario, the
//! pool and the goals), `plan_calibration` (the baseline replay against the record) and
//! `plan_hourly` (per scenario and hour, the pool's allocation and pending demand).

use serde_json::{json, Value};

use super::metrics::Summary;
use super::optimize::{score, Goal};
use super::Plan;
use crate::config::Config;
use crate::domain::units::UNALLOCATED;
use crate::report::{Cell, Report};

fn dec(v: f64, decimals: u32) -> Cell {
    if !v.is_finite() {
        return Cell::Null;
    }
    Cell::Dec { units: (v * 10f64.powi(decimals as i32)).round() as i128, decimals }
}

/// `n` empty cells.
fn nulls(n: usize) -> impl Iterator<Item = Cell> {
    std::iter::repeat_n(Cell::Null, n)
}

fn minutes(s: f64) -> Cell {
    dec(s / 60.0, 1)
}

/// A difference under half a hundredth prints as 0.00, not -0.00.
fn zero_small(d: f64) -> f64 {
    if d.abs() < 0.005 {
        0.0
    } else {
        d
    }
}

/// `(replayed - recorded) / recorded` in percent; NULL where nothing was recorded.
pub fn diff_pct(recorded: f64, replayed: f64) -> Option<f64> {
    (recorded.abs() > 1e-9).then(|| (replayed - recorded) / recorded * 100.0)
}

fn report(name: &str, title: String, columns: &[&str]) -> Report {
    Report {
        name: name.into(),
        title,
        columns: columns.iter().map(|c| c.to_string()).collect(),
        rows: Vec::new(),
        total: None,
        notes: Vec::new(),
        meta: Default::default(),
    }
}

/// The fast-class goal per namespace, as the optimiser scores it.
fn goal_of(plan: &Plan) -> Goal {
    let base = &plan.recorded.setup;
    let fast = super::optimize::fast_namespaces(base, &plan.recorded.jobs, &plan.goals.fast_classes);
    Goal { max_p95_wait_min: plan.goals.max_p95_wait_minutes, fast, floor: vec![0; base.namespaces.len()], max_total: u32::MAX }
}

pub fn reports(plan: &Plan, config: &Config) -> Vec<Report> {
    let label = plan.window.label();
    let currency = &config.pricing.currency;
    let base = &plan.recorded.setup;
    let basis = config.pricing.basis.name();
    let basis_cost = |power: f64, cloud: f64| config.pricing.basis.pick(power, cloud);
    let calibration = calibration(plan, config);
    let cal_line = calibration.notes.first().cloned().unwrap_or_default();

    // Per scenario and namespace.
    let mut per_ns = report(
        "plan",
        format!("Plan {label}: the recorded demand replayed under each scenario (baseline first)"),
        &[
            "scenario",
            "namespace",
            "priority_class",
            "quota_gpus",
            "pods",
            "started",
            "pending_at_end",
            "wait_p50_min",
            "wait_p95_min",
            "wait_max_min",
            "pending_gpu_hours",
            "gpu_hours",
            "preemptions",
            "energy_kwh",
            "power_cost",
            "cloud_cost",
            "total_cost",
        ],
    );
    for sc in &plan.scenarios {
        let s = &sc.setup;
        for (i, ns) in sc.summary.namespaces.iter().enumerate() {
            if ns.pods == 0 && ns.gpu_hours == 0.0 && ns.pending_at_end == 0 && s.quota[i].is_none() {
                continue;
            }
            let class = s.class_override[i]
                .or_else(|| plan.recorded.jobs.iter().find(|j| j.ns == i).map(|j| j.class))
                .map_or(String::new(), |c| s.classes[c].name.clone());
            let quota = match s.quota[i] {
                Some(q) => Cell::Int(q as i64),
                None => match s.shared_quotas.iter().find(|g| g.members.contains(&i)) {
                    Some(g) => Cell::Str(format!("{} (team {})", g.hard, g.name)),
                    None => Cell::Null,
                },
            };
            per_ns.rows.push(vec![
                Cell::Str(sc.name.clone()),
                Cell::Str(s.namespaces[i].clone()),
                Cell::Str(class),
                quota,
                Cell::Int(ns.pods as i64),
                Cell::Int(ns.started as i64),
                Cell::Int(ns.pending_at_end as i64),
                minutes(ns.wait_p50_s),
                minutes(ns.wait_p95_s),
                minutes(ns.wait_max_s),
                dec(ns.pending_gpu_hours, 1),
                dec(ns.gpu_hours, 1),
                Cell::Int(ns.preemptions as i64),
                dec(ns.energy_kwh, 1),
                dec(ns.power_cost, 2),
                dec(ns.cloud_cost, 2),
                dec(basis_cost(ns.power_cost, ns.cloud_cost), 2),
            ]);
        }
        let unalloc = sc.summary.pool_hours() - sc.summary.gpu_hours();
        per_ns.rows.push(vec![Cell::Str(sc.name.clone()), Cell::Str(UNALLOCATED.into())]);
        let row = per_ns.rows.last_mut().expect("just pushed");
        // No class, quota, pods, waits or pending demand: GPU-hours and cost only.
        row.extend(nulls(9));
        row.extend([dec(unalloc, 1), Cell::Null]);
        let idle = &sc.summary.idle;
        row.extend([dec(idle.energy_kwh, 1), dec(idle.power_cost, 2), dec(idle.cloud_cost, 2), dec(basis_cost(idle.power_cost, idle.cloud_cost), 2)]);
    }
    per_ns.notes.push(cal_line.clone());
    per_ns.notes.push(format!(
        "cost in {currency}, GPUs only, before any idle or shared spread; total_cost is the {basis} cost (pricing.basis). cloud_cost: GPU-hours x the configured price per GPU model (and MIG profile). energy_kwh: GPU-hours x the kWh per GPU-hour the namespace's pods drew on that model in the recorded month (as charged; __unallocated__: that model's idle GPUs); power_cost: energy x PUE {} x the tariff of each 15 minutes. Each scenario's gpu_hours add up to its pool's GPU-hours, its cloud_cost to the pool's price",
        config.pricing.power.pue
    ));
    per_ns.notes.extend(plan.recorded.notes.iter().cloned());

    // Per scenario.
    let goal = goal_of(plan);
    let mut summary = report(
        "plan_summary",
        format!("Plan {label}: each scenario against the baseline"),
        &[
            "scenario",
            "pool_gpus",
            "quota_total",
            "gpu_hours",
            "allocated_pct",
            "unallocated_pct",
            "pending_gpu_hours",
            "worst_fast_p95_min",
            "fast_over_goal_min",
            "mean_p95_min",
            "preemptions",
            "energy_kwh",
            "power_cost",
            "cloud_cost",
            "total_cost",
            "unallocated_cost",
        ],
    );
    for sc in &plan.scenarios {
        let s = &sc.summary;
        let sc_score = score(&goal, s);
        let worst = s.namespaces.iter().enumerate().filter(|(i, _)| goal.fast[*i]).map(|(_, n)| n.wait_p95_s).fold(0.0, f64::max);
        let power = s.namespaces.iter().map(|n| n.power_cost).sum::<f64>() + s.idle.power_cost;
        let cloud = s.namespaces.iter().map(|n| n.cloud_cost).sum::<f64>() + s.idle.cloud_cost;
        summary.rows.push(vec![
            Cell::Str(sc.name.clone()),
            dec(super::scenario::pool_gpus(&sc.setup), 2),
            Cell::Int(sc.setup.quota.iter().flatten().map(|&q| q as i64).sum()),
            dec(s.gpu_hours(), 1),
            dec(100.0 - s.unallocated_pct(), 2),
            dec(s.unallocated_pct(), 2),
            dec(s.namespaces.iter().map(|n| n.pending_gpu_hours).sum(), 1),
            minutes(worst),
            dec(sc_score.over_goal_min, 1),
            dec(sc_score.mean_p95_min, 1),
            Cell::Int(s.namespaces.iter().map(|n| n.preemptions as i64).sum()),
            dec(s.namespaces.iter().map(|n| n.energy_kwh).sum::<f64>() + s.idle.energy_kwh, 1),
            dec(power, 2),
            dec(cloud, 2),
            dec(basis_cost(power, cloud), 2),
            dec(basis_cost(s.idle.power_cost, s.idle.cloud_cost), 2),
        ]);
    }
    summary.notes.push(format!(
        "goal: p95 wait of the {} classes at most {} min (fast_over_goal_min: minutes over it, summed over their namespaces); then the least unallocated share",
        plan.goals.fast_classes.join(", "),
        plan.goals.max_p95_wait_minutes
    ));
    if let Some(o) = &plan.optimized {
        let better = o.score < o.baseline_score;
        summary.notes.push(format!(
            "optimized: {} replays in {:.1} s; {} (over goal {:.1} -> {:.1} min, unallocated {:.2}% -> {:.2}%, mean p95 {:.1} -> {:.1} min)",
            o.replays,
            o.seconds,
            if better { "beats the baseline on the goals" } else { "no split found that beats the baseline" },
            o.baseline_score.over_goal_min,
            o.score.over_goal_min,
            o.baseline_score.unallocated_pct,
            o.score.unallocated_pct,
            o.baseline_score.mean_p95_min,
            o.score.mean_p95_min
        ));
        summary.meta.insert("optimized_beats_baseline".into(), Value::Bool(better));
    }
    summary.notes.push(cal_line);
    summary.meta.insert("scenarios".into(), json!(plan.scenarios.iter().map(|s| s.name.clone()).collect::<Vec<_>>()));

    // Per scenario and hour.
    let mut hourly = report(
        "plan_hourly",
        format!("Plan {label}: the pool's allocation and pending demand by hour"),
        &["scenario", "hour", "pool_gpus", "allocated_gpus", "allocated_pct", "pending_gpus"],
    );
    let mut push_hours = |name: &str, s: &Summary| {
        for (h, pool) in s.pool_by_hour.iter().enumerate() {
            let alloc = s.allocated_by_hour[h];
            hourly.rows.push(vec![
                Cell::Str(name.to_string()),
                Cell::Time(base.from + h as i64 * 3_600_000),
                dec(*pool, 2),
                dec(alloc, 2),
                dec(if *pool > 0.0 { alloc / pool * 100.0 } else { 0.0 }, 2),
                dec(s.pending_by_hour.get(h).copied().unwrap_or(0.0), 2),
            ]);
        }
    };
    push_hours("recorded", &plan.recorded_summary);
    for sc in &plan.scenarios {
        push_hours(&sc.name, &sc.summary);
    }
    vec![per_ns, summary, calibration, hourly]
}

/// The baseline replay against the record, per namespace, and the pool's allocation by hour.
pub fn calibration(plan: &Plan, config: &Config) -> Report {
    let label = plan.window.label();
    let basis = config.pricing.basis;
    // The cost charged (the chargeback, GPUs only, before spreads) and the baseline's, on the basis.
    let charged = |ns: &str| basis.pick(&plan.recorded.charged.power_cost, &plan.recorded.charged.gpu_cost).get(ns).copied().unwrap_or(0.0);
    let replayed = |n: &super::metrics::NsSummary| basis.pick(n.power_cost, n.cloud_cost);
    let rec = &plan.recorded_summary;
    let base = &plan.scenarios[0].summary;
    let mut r = report(
        "plan_calibration",
        format!("Plan {label}: calibration, the baseline replay against what was recorded"),
        &[
            "namespace",
            "gpu_hours_recorded",
            "gpu_hours_replayed",
            "gpu_hours_diff_pct",
            "wait_p50_min_recorded",
            "wait_p50_min_replayed",
            "wait_p95_min_recorded",
            "wait_p95_min_replayed",
            "wait_p95_diff_pct",
            "pending_gpu_hours_recorded",
            "pending_gpu_hours_replayed",
            "preemptions_recorded",
            "preemptions_replayed",
            "cost_charged",
            "cost_replayed",
            "cost_diff_pct",
        ],
    );
    let pct = |v: Option<f64>| v.map_or(Cell::Null, |v| dec(v, 2));
    let mut worst_gpu: f64 = 0.0;
    // Relative differences of waits shorter than ten steps say little (a tick is 100% of one):
    // those are stated in minutes.
    let long_wait_s = 10.0 * plan.recorded.setup.step as f64 / 1000.0;
    let mut worst_p95: f64 = 0.0;
    let mut worst_cost: f64 = 0.0;
    let mut worst_short_min: f64 = 0.0;
    let mut long_waits = 0;
    for (i, name) in plan.recorded.setup.namespaces.iter().enumerate() {
        let (a, b) = (&rec.namespaces[i], &base.namespaces[i]);
        if a.pods == 0 && a.gpu_hours == 0.0 && b.gpu_hours == 0.0 {
            continue;
        }
        let g = diff_pct(a.gpu_hours, b.gpu_hours);
        let w = diff_pct(a.wait_p95_s, b.wait_p95_s);
        let (cost_charged, cost_replayed) = (charged(name), replayed(b));
        let c = diff_pct(cost_charged, cost_replayed);
        worst_gpu = worst_gpu.max(g.unwrap_or(0.0).abs());
        worst_cost = worst_cost.max(c.unwrap_or(0.0).abs());
        if a.wait_p95_s >= long_wait_s {
            long_waits += 1;
            worst_p95 = worst_p95.max(w.unwrap_or(0.0).abs());
        } else {
            worst_short_min = worst_short_min.max((b.wait_p95_s - a.wait_p95_s).abs() / 60.0);
        }
        r.rows.push(vec![
            Cell::Str(name.clone()),
            dec(a.gpu_hours, 1),
            dec(b.gpu_hours, 1),
            pct(g),
            minutes(a.wait_p50_s),
            minutes(b.wait_p50_s),
            minutes(a.wait_p95_s),
            minutes(b.wait_p95_s),
            pct(w),
            dec(a.pending_gpu_hours, 1),
            dec(b.pending_gpu_hours, 1),
            Cell::Int(a.preemptions as i64),
            Cell::Int(b.preemptions as i64),
            dec(cost_charged, 2),
            dec(cost_replayed, 2),
            pct(c),
        ]);
    }
    // The GPU-time no pod held, on both sides: every GPU of the pool is charged.
    let idle_replayed = basis.pick(base.idle.power_cost, base.idle.cloud_cost);
    let total_charged: f64 = plan.recorded.setup.namespaces.iter().map(|n| charged(n)).sum::<f64>() + charged(UNALLOCATED);
    let total_replayed: f64 = base.namespaces.iter().map(replayed).sum::<f64>() + idle_replayed;
    let cost_total = diff_pct(total_charged, total_replayed);
    r.rows.push(vec![
        Cell::Str(UNALLOCATED.into()),
        dec(rec.pool_hours() - rec.gpu_hours(), 1),
        dec(base.pool_hours() - base.gpu_hours(), 1),
        pct(diff_pct(rec.pool_hours() - rec.gpu_hours(), base.pool_hours() - base.gpu_hours())),
    ]);
    let row = r.rows.last_mut().expect("just pushed");
    row.extend(nulls(9));
    row.extend([dec(charged(UNALLOCATED), 2), dec(idle_replayed, 2), pct(diff_pct(charged(UNALLOCATED), idle_replayed))]);
    let total = diff_pct(rec.gpu_hours(), base.gpu_hours()).map(zero_small);
    // The rows above add up to it: the pool's GPU-hours and every GPU's cost.
    r.total = Some(vec![
        Cell::Str("total".into()),
        dec(rec.pool_hours(), 1),
        dec(base.pool_hours(), 1),
        pct(diff_pct(rec.pool_hours(), base.pool_hours()).map(zero_small)),
        Cell::Null,
        Cell::Null,
        Cell::Null,
        Cell::Null,
        Cell::Null,
        dec(rec.namespaces.iter().map(|n| n.pending_gpu_hours).sum(), 1),
        dec(base.namespaces.iter().map(|n| n.pending_gpu_hours).sum(), 1),
        Cell::Int(rec.namespaces.iter().map(|n| n.preemptions as i64).sum()),
        Cell::Int(base.namespaces.iter().map(|n| n.preemptions as i64).sum()),
        dec(total_charged, 2),
        dec(total_replayed, 2),
        pct(cost_total),
    ]);
    // Allocation by hour: mean and largest absolute difference, in points of the pool.
    let (mut sum, mut max, mut n) = (0.0, 0.0f64, 0.0);
    for (h, pool) in rec.pool_by_hour.iter().enumerate() {
        if *pool > 0.0 {
            let d = (base.allocated_by_hour[h] - rec.allocated_by_hour[h]).abs() / pool * 100.0;
            sum += d;
            max = max.max(d);
            n += 1.0;
        }
    }
    let mean = if n > 0.0 { sum / n } else { 0.0 };
    let waits = if long_waits > 0 {
        format!("p95 wait within {worst_p95:.1}% (where it is {} min or more; shorter ones within {worst_short_min:.1} min)", long_wait_s / 60.0)
    } else {
        format!("no p95 wait of {} min or more, p95 waits within {worst_short_min:.1} min", long_wait_s / 60.0)
    };
    r.notes.push(format!(
        "calibration: the baseline replay delivers {:.2}% of the recorded GPU-hours ({}{:.2}%); per namespace GPU-hours within {:.2}%, {waits}; pool allocation by hour within {:.2} points on average ({:.2} at most); {} cost {:.2}% of the charged ({}), per namespace within {:.2}%",
        100.0 + total.unwrap_or(0.0),
        if total.unwrap_or(0.0) >= 0.0 { "+" } else { "" },
        total.unwrap_or(0.0),
        worst_gpu,
        mean,
        max,
        basis.name(),
        100.0 + cost_total.map(zero_small).unwrap_or(0.0),
        basis.pick("energy from DCGM's counters x PUE x tariff", "GPU-hours x price"),
        worst_cost
    ));
    r.meta.insert("cost_diff_pct".into(), json!(cost_total.map(zero_small).unwrap_or(0.0)));
    r.meta.insert("worst_namespace_cost_diff_pct".into(), json!(worst_cost));
    r.meta.insert("gpu_hours_diff_pct".into(), json!(total.unwrap_or(0.0)));
    r.meta.insert("worst_namespace_gpu_hours_diff_pct".into(), json!(worst_gpu));
    r.meta.insert("worst_namespace_p95_wait_diff_pct".into(), json!(worst_p95));
    r.meta.insert("worst_short_p95_wait_diff_min".into(), json!(worst_short_min));
    r.meta.insert("allocation_by_hour_mean_abs_diff_points".into(), json!(mean));
    r
}
