//! The chargeback as a FinOps FOCUS 1.2 export: one row per namespace (or team, cost
//! centre, cluster, or a key of each pod: workload, queue, label, `--by`), GPU model (and MIG profile) and UTC day, plus CPU and memory rows where
//! those are priced. FOCUS columns first, in the specification's order, then `x_`
//! extensions. Costs come from the same detail rows as the chargeback, with the idle /
//! shared-namespace spread split over each namespace's rows, so BilledCost sums to the
//! chargeback's total_cost.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde_json::{Map, Value};

use super::chargeback::{
    Attribution, ChargeBy, Chargeback, Quantities, MJ_PER_KWH, RAW_PER_UNIT, UNALLOCATED, UNASSIGNED, UNATTRIBUTED, UNMEASURED, US_PER_HOUR,
};
use super::render::{Cell, Report};
use crate::config::{Config, CostBasis};
use crate::domain::money::{apportion, round_ratio};
use crate::domain::window::Window;

/// Mandatory and conditional FOCUS 1.2 columns gpuledger fills (or leaves null), in order.
pub const FOCUS_COLUMNS: [&str; 50] = [
    "AvailabilityZone",
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingAccountType",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "CapacityReservationId",
    "CapacityReservationStatus",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountQuantity",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "CommitmentDiscountUnit",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceId",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "ServiceSubcategory",
    "SkuId",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
];

pub const EXTENSION_COLUMNS: [&str; 12] = [
    "x_Cluster",
    "x_Namespaces",
    "x_Team",
    "x_CostCentre",
    "x_GpuModel",
    "x_MigProfile",
    "x_EnergyKwh",
    "x_PowerCost",
    "x_CloudCost",
    "x_CarbonKg",
    "x_IdleShareCost",
    "x_RequestBased",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Gpu,
    Cpu,
    Memory,
}

/// One export row before rounding: exact quantities and raw money.
#[derive(Debug, Default, Clone)]
struct Line {
    members: Vec<String>,
    team: Option<String>,
    cost_centre: Option<String>,
    /// GPU-us, core-us or GiB-us.
    quantity: i128,
    energy_mj: i128,
    list: i128,
    power: i128,
    cloud: i128,
    carbon_mg: i128,
    spread: i128,
    request_based: bool,
}

fn basis_cost(kind: Kind, q: &Quantities, basis: CostBasis) -> i128 {
    match (kind, basis) {
        (Kind::Gpu, CostBasis::Cloud) => q.gpu_cost,
        (Kind::Gpu, CostBasis::Power) => q.power_cost,
        (Kind::Cpu, CostBasis::Cloud) => q.cpu_cost,
        (Kind::Memory, CostBasis::Cloud) => q.memory_cost,
        (_, CostBasis::Power) => 0,
    }
}

/// The export keyed by `by`; a key of each pod (`ChargeBy::is_per_pod`) needs the namespaces'
/// rows split between their pods' keys (`attribution`), else every namespace's lines are
/// `__unattributed__`'s.
pub fn build(cb: &Chargeback, config: &Config, window: &Window, by: &ChargeBy, attribution: Option<&Attribution>) -> Report {
    let basis = config.pricing.basis;
    let special = |ns: &str| ns == UNALLOCATED || ns == UNMEASURED;
    // Each namespace's spread (by a key of each pod: each of its keys' part of it, as the
    // chargeback splits it), per (cluster, namespace, key); the key is "" but by such a key.
    let mut spreads: BTreeMap<(String, String, String), i128> = BTreeMap::new();
    for n in cb.namespaces(config) {
        match attribution {
            Some(a) if !special(&n.namespace) => {
                for (k, _, s) in a.parts(&n, basis) {
                    spreads.insert((n.cluster.clone(), n.namespace.clone(), k), s);
                }
            }
            _ => {
                let sub = if by.is_per_pod() && !special(&n.namespace) { UNATTRIBUTED.to_string() } else { String::new() };
                spreads.insert((n.cluster.clone(), n.namespace.clone(), sub), n.spread);
            }
        }
    }

    // Each namespace's lines (GPU per model/profile/day; CPU and memory per day), per cluster
    // and key: (cluster, sub-account, day, kind, model, profile).
    type Key = (String, String, NaiveDate, Kind, String, String);
    let mut per_ns: BTreeMap<(String, String, String), Vec<(Key, Line)>> = BTreeMap::new();
    let mut add_lines = |cluster: &str, ns: &str, sub: &str, model: &Option<String>, profile: &Option<String>, date: &str, q: &Quantities| {
        let date: NaiveDate = date.parse().unwrap_or_default();
        let owner = cb.owner(config, ns);
        let mut kinds = Vec::new();
        if model.is_some() {
            kinds.push((Kind::Gpu, q.gpu_us as i128, q.gpu_cost));
        } else {
            if q.core_us > 0 {
                kinds.push((Kind::Cpu, q.core_us as i128, q.cpu_cost));
            }
            if q.gib_us > 0 {
                kinds.push((Kind::Memory, q.gib_us as i128, q.memory_cost));
            }
        }
        for (kind, quantity, list) in kinds {
            let gpu = kind == Kind::Gpu;
            let line = Line {
                members: vec![ns.to_string()],
                team: owner.team.clone(),
                cost_centre: owner.cost_centre.clone(),
                quantity,
                energy_mj: if gpu { q.energy_mj as i128 } else { 0 },
                list: basis_cost(kind, q, basis),
                power: if gpu { q.power_cost } else { 0 },
                cloud: list,
                carbon_mg: if gpu { q.carbon_mg } else { 0 },
                spread: 0,
                request_based: gpu && q.request_based_gpu_us > 0,
            };
            let key = (cluster.to_string(), String::new(), date, kind, model.clone().unwrap_or_default(), profile.clone().unwrap_or_default());
            per_ns.entry((cluster.to_string(), ns.to_string(), sub.to_string())).or_default().push((key, line));
        }
    };
    for r in &cb.detail {
        match attribution {
            // Split by key: the rows' parts below.
            Some(_) if !special(&r.namespace) => {}
            _ => {
                let sub = if by.is_per_pod() && !special(&r.namespace) { UNATTRIBUTED } else { "" };
                add_lines(&r.cluster, &r.namespace, sub, &r.gpu_model, &r.mig_profile, &r.date, &r.q);
            }
        }
    }
    if let Some(a) = attribution {
        for ((cluster, ns, model, profile, date), parts) in &a.per_row {
            for (k, q) in parts {
                add_lines(cluster, ns, k, model, profile, date, q);
            }
        }
    }
    // Namespaces (or keys) that only receive a spread (an owner with no usage) get one GPU-less line.
    for ((cluster, ns, sub), s) in &spreads {
        let at = (cluster.clone(), ns.clone(), sub.clone());
        if *s != 0 && !per_ns.contains_key(&at) {
            let owner = cb.owner(config, ns);
            let key = (cluster.clone(), String::new(), window.start.date_naive(), Kind::Gpu, String::new(), String::new());
            per_ns.entry(at).or_default().push((key, Line { members: vec![ns.clone()], team: owner.team, cost_centre: owner.cost_centre, ..Line::default() }));
        }
    }
    // The spread, split over each namespace's (or key's) lines by their cost (else GPU time,
    // else evenly).
    for (at, lines) in per_ns.iter_mut() {
        let amount = spreads.get(at).copied().unwrap_or(0);
        if amount == 0 {
            continue;
        }
        let mut weights: Vec<i128> = lines.iter().map(|(_, l)| round_ratio(l.list.max(0), RAW_PER_UNIT, 2)).collect();
        if weights.iter().sum::<i128>() <= 0 {
            weights = lines.iter().map(|(k, l)| if k.3 == Kind::Gpu { l.quantity / 360_000 } else { 0 }).collect();
        }
        if weights.iter().sum::<i128>() <= 0 {
            weights = vec![1; lines.len()];
        }
        for ((_, l), part) in lines.iter_mut().zip(crate::domain::money::split(amount, &weights)) {
            l.spread += part;
        }
    }
    // Group by the sub-account (namespace, team, cost centre or a key of each pod).
    let mut grouped: BTreeMap<Key, Line> = BTreeMap::new();
    for ((cluster, ns, sub), lines) in per_ns {
        for (mut key, l) in lines {
            key.1 = match by {
                ChargeBy::Namespace => ns.clone(),
                ChargeBy::Cluster => cluster.clone(),
                _ if special(&ns) => ns.clone(),
                ChargeBy::Team => l.team.clone().unwrap_or_else(|| UNASSIGNED.into()),
                ChargeBy::CostCentre => l.cost_centre.clone().unwrap_or_else(|| UNASSIGNED.into()),
                // A key of each pod: the key the lines were split to.
                _ => sub.clone(),
            };
            let g = grouped.entry(key).or_insert_with(|| Line { team: l.team.clone(), cost_centre: l.cost_centre.clone(), ..Line::default() });
            for m in &l.members {
                if !g.members.contains(m) {
                    g.members.push(m.clone());
                }
            }
            if g.team != l.team {
                g.team = None;
            }
            if g.cost_centre != l.cost_centre {
                g.cost_centre = None;
            }
            g.quantity += l.quantity;
            g.energy_mj += l.energy_mj;
            g.list += l.list;
            g.power += l.power;
            g.cloud += l.cloud;
            g.carbon_mg += l.carbon_mg;
            g.spread += l.spread;
            g.request_based |= l.request_based;
        }
    }

    let lines: Vec<(&Key, &Line)> = grouped.iter().collect();
    let col = |f: &dyn Fn(&Line) -> i128| -> Vec<i128> { lines.iter().map(|(_, l)| f(l)).collect() };
    let money = |v: Vec<i128>| apportion(&v, RAW_PER_UNIT, 6).0;
    let billed = money(col(&|l| l.list + l.spread));
    let list = money(col(&|l| l.list));
    let power = money(col(&|l| l.power));
    let cloud = money(col(&|l| l.cloud));
    let spread = money(col(&|l| l.spread));
    let quantity = apportion(&col(&|l| l.quantity), US_PER_HOUR, 6).0;
    let kwh = apportion(&col(&|l| l.energy_mj), MJ_PER_KWH, 6).0;
    let carbon = apportion(&col(&|l| l.carbon_mg), RAW_PER_UNIT * 1_000, 6).0;
    let carbon_on = config.pricing.power.carbon_g_per_kwh.is_some();

    let f = &config.focus;
    let currency = &config.pricing.currency;
    let ms = |d: NaiveDate| d.and_hms_opt(0, 0, 0).expect("midnight").and_utc().timestamp_millis();
    let (w_start, w_end) = (window.start.timestamp_millis(), window.end.timestamp_millis());
    let s = |v: &str| Cell::Str(v.to_string());
    let dec6 = |units: i128| Cell::Dec { units, decimals: 6 };
    let mut rows = Vec::with_capacity(lines.len());
    for (i, ((cluster, account, date, kind, model, profile), l)) in lines.iter().enumerate() {
        // The data's cluster; rows without a configured cluster label keep `focus.cluster`.
        let cluster = if cluster == crate::domain::units::DEFAULT_CLUSTER { &f.cluster } else { cluster };
        let (unit, service, resource_type, what) = match kind {
            Kind::Gpu if !profile.is_empty() => ("GPU-Hours", "GPU compute", "MIG instance", format!("GPU time on {model} MIG {profile}")),
            Kind::Gpu if model.is_empty() => ("GPU-Hours", "GPU compute", "GPU", "share of idle and shared GPU cost".to_string()),
            Kind::Gpu => ("GPU-Hours", "GPU compute", "GPU", format!("GPU time on {model}")),
            Kind::Cpu => ("Core-Hours", "CPU compute", "CPU", "CPU cores requested by GPU pods".to_string()),
            Kind::Memory => ("GiB-Hours", "Memory", "Memory", "memory requested by GPU pods".to_string()),
        };
        let resource = [
            cluster.as_str(),
            account.as_str(),
            match kind {
                Kind::Gpu => model.as_str(),
                Kind::Cpu => "cpu",
                Kind::Memory => "memory",
            },
            profile.as_str(),
        ]
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("/");
        let mut tags = Map::new();
        if let Some(t) = &l.team {
            tags.insert("team".into(), Value::String(t.clone()));
        }
        if let Some(c) = &l.cost_centre {
            tags.insert("cost_centre".into(), Value::String(c.clone()));
        }
        let day_start = ms(*date).max(w_start);
        let day_end = (ms(*date) + 86_400_000).min(w_end);
        let description = format!("{what} in {} {account}", by.column().replace('_', " "));
        let mut row = vec![
            Cell::Null,                          // AvailabilityZone
            dec6(billed[i]),                     // BilledCost
            s(&f.billing_account_id),            // BillingAccountId
            s(&f.billing_account_name),          // BillingAccountName
            s("Internal chargeback"),            // BillingAccountType
            s(currency),                         // BillingCurrency
            Cell::Time(w_end),                   // BillingPeriodEnd
            Cell::Time(w_start),                 // BillingPeriodStart
            Cell::Null,                          // CapacityReservationId
            Cell::Null,                          // CapacityReservationStatus
            s("Usage"),                          // ChargeCategory
            Cell::Null,                          // ChargeClass
            s(&description),                     // ChargeDescription
            s("Usage-Based"),                    // ChargeFrequency
            Cell::Time(day_end),                 // ChargePeriodEnd
            Cell::Time(day_start),               // ChargePeriodStart
            Cell::Null,                          // CommitmentDiscountCategory
            Cell::Null,                          // CommitmentDiscountId
            Cell::Null,                          // CommitmentDiscountName
            Cell::Null,                          // CommitmentDiscountQuantity
            Cell::Null,                          // CommitmentDiscountStatus
            Cell::Null,                          // CommitmentDiscountType
            Cell::Null,                          // CommitmentDiscountUnit
            dec6(quantity[i]),                   // ConsumedQuantity
            s(unit),                             // ConsumedUnit
            dec6(billed[i]),                     // ContractedCost
            Cell::Null,                          // ContractedUnitPrice
            dec6(billed[i]),                     // EffectiveCost
            Cell::Null,                          // InvoiceId
            s(&f.invoice_issuer_name),           // InvoiceIssuerName
            dec6(list[i]),                       // ListCost
            Cell::Null,                          // ListUnitPrice
            s("Standard"),                       // PricingCategory
            dec6(quantity[i]),                   // PricingQuantity
            s(unit),                             // PricingUnit
            s(&f.provider_name),                 // ProviderName
            s(&f.publisher_name),                // PublisherName
            Cell::Null,                          // RegionId
            Cell::Null,                          // RegionName
            s(&resource),                        // ResourceId
            s(&resource),                        // ResourceName
            s(resource_type),                    // ResourceType
            s("Compute"),                        // ServiceCategory
            s(service),                          // ServiceName
            s("Containers"),                     // ServiceSubcategory
            Cell::Null,                          // SkuId
            Cell::Null,                          // SkuPriceId
            s(account),                          // SubAccountId
            s(account),                          // SubAccountName
            s(&Value::Object(tags).to_string()), // Tags
        ];
        row.extend([
            s(cluster),
            s(&l.members.join(" ")),
            l.team.clone().map_or(Cell::Null, Cell::Str),
            l.cost_centre.clone().map_or(Cell::Null, Cell::Str),
            if model.is_empty() { Cell::Null } else { s(model) },
            if profile.is_empty() { Cell::Null } else { s(profile) },
            dec6(kwh[i]),
            dec6(power[i]),
            dec6(cloud[i]),
            if carbon_on { dec6(carbon[i]) } else { Cell::Null },
            dec6(spread[i]),
            s(if l.request_based { "true" } else { "false" }),
        ]);
        rows.push(row);
    }
    let columns: Vec<String> = FOCUS_COLUMNS.iter().chain(EXTENSION_COLUMNS.iter()).map(|c| c.to_string()).collect();
    let mut meta = Map::new();
    meta.insert("focus_version".into(), Value::String("1.2".into()));
    Report {
        name: "focus".into(),
        title: format!("FOCUS 1.2 export {}", window.label()),
        columns,
        rows,
        total: None,
        notes: vec![format!(
            "FOCUS 1.2: one row per {} x GPU model x day (CPU and memory rows where priced); BilledCost = EffectiveCost = ContractedCost = {} cost plus the idle / shared spread (x_IdleShareCost), in {currency}",
            by.column().replace('_', " "),
            basis.name()
        )],
        meta,
    }
}
