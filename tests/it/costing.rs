//! The costing model against independent truths: a simulated October with MIG slices, a
//! time-sliced GPU, a GPU price change and a time-of-use tariff starting mid-month, priced
//! here from the simulator's exact holding intervals with the tariff written out by hand;
//! re-pricing a past month from the lake; the idle and shared-namespace spread; teams and
//! cost centres; CPU and memory prices; the request-based fallback; the FOCUS export.

use crate::common;
use crate::common::JsonNumber;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use chrono::{Datelike, TimeZone, Timelike};
use serde_json::Value;

use gpuledger::simulate::{SimParams, Simulation};

const H100: &str = "NVIDIA H100 80GB HBM3";
const A100: &str = "NVIDIA A100-SXM4-80GB";
const L4: &str = "NVIDIA L4";

/// Prices with a change inside October: H100 from 6.88 to 5.50 on the 20th, a MIG 3g.40gb
/// instance price, and from the 15th a Berlin night/day tariff (weekends outside the bands
/// keep the flat rate).
const PRICED: &str = r#"
[pricing]
currency = "EUR"
basis = "cloud"
[pricing.power]
price_per_kwh = 0.20
pue = 1.25
carbon_g_per_kwh = 380
timezone = "Europe/Berlin"
[[pricing.power.tariff]]
name = "night"
price_per_kwh = 0.11
hours = "22:00-06:00"
effective_from = "2026-10-15"
[[pricing.power.tariff]]
name = "weekday"
price_per_kwh = 0.27
hours = "06:00-22:00"
days = ["mon", "tue", "wed", "thu", "fri"]
effective_from = "2026-10-15"
[[pricing.gpu]]
model = "NVIDIA H100 80GB HBM3"
price_per_hour = 6.88
effective_from = "2026-01-01"
[[pricing.gpu]]
model = "NVIDIA H100 80GB HBM3"
price_per_hour = 5.50
effective_from = "2026-10-20"
[[pricing.gpu]]
model = "NVIDIA A100-SXM4-80GB"
price_per_hour = 3.67
effective_from = "2026-01-01"
[[pricing.gpu]]
model = "NVIDIA A100-SXM4-80GB"
mig_profile = "3g.40gb"
price_per_hour = 1.90
effective_from = "2026-01-01"
[[pricing.gpu]]
model = "NVIDIA L4"
price_per_hour = 0.80
effective_from = "2026-01-01"
"#;

fn params(days: u32) -> SimParams {
    SimParams {
        gpus: 64,
        days,
        seed: 42,
        step_s: 30,
        start: chrono::NaiveDate::from_ymd_opt(2026, 10, 1).unwrap(),
        warmup_days: 3,
        target_util: 0.75,
        time_sliced: 4,
    }
}

/// October 2026 with a time-sliced GPU: the in-process simulation and the lake the binary
/// wrote for the same parameters.
struct Month {
    sim: Simulation,
    dir: tempfile::TempDir,
}

fn month() -> &'static Month {
    static M: OnceLock<Month> = OnceLock::new();
    M.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        common::run_ok(dir.path(), &["simulate", "--out", "s", "--gpus", "64", "--days", "31", "--start", "2026-10-01", "--time-sliced", "4"]);
        Month { sim: Simulation::run(params(31)).unwrap(), dir }
    })
}

fn write_config(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("[lake]\npath = \"{}\"\n{extra}", month().dir.path().join("s/lake").display())).unwrap();
    path
}

fn chargeback(config: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["--config", config.to_str().unwrap(), "report", "chargeback", "--month", "2026-10", "--format", "json"];
    args.extend_from_slice(extra);
    let out = common::run_ok(month().dir.path(), &args);
    serde_json::from_str(&common::stdout(&out)).unwrap()
}

fn rows_by(report: &Value, key: &str) -> BTreeMap<String, Value> {
    report["rows"].as_array().unwrap().iter().map(|r| (r[key].as_str().unwrap().to_string(), r.clone())).collect()
}

fn num(v: &Value) -> f64 {
    v.number().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The tariff, written out here independently of gpuledger's resolver: price per kWh.
fn tariff_at(ms: i64) -> f64 {
    let t = chrono_tz::Europe::Berlin.timestamp_millis_opt(ms).unwrap();
    if t.date_naive() < chrono::NaiveDate::from_ymd_opt(2026, 10, 15).unwrap() {
        return 0.20;
    }
    let h = t.hour();
    if !(6..22).contains(&h) {
        0.11
    } else if t.weekday().num_days_from_monday() < 5 {
        0.27
    } else {
        0.20
    }
}

/// Price per hour of a unit's whole share at `ms`.
fn gpu_price(unit: &gpuledger::simulate::cluster::Unit, ms: i64) -> f64 {
    let oct20 = chrono::Utc.with_ymd_and_hms(2026, 10, 20, 0, 0, 0).unwrap().timestamp_millis();
    match (unit.model.name, unit.mig_profile) {
        (H100, _) if ms >= oct20 => 5.50,
        (H100, _) => 6.88,
        // 1.90 per 3g.40gb instance-hour; the instance is 3/7 of the GPU.
        (A100, Some("3g.40gb")) => 1.90 / (3.0 / 7.0),
        (A100, _) => 3.67,
        (L4, _) => 0.80,
        (m, _) => panic!("unpriced model {m}"),
    }
}

fn close(got: f64, want: f64, rel: f64, what: &str) {
    let err = if want.abs() < 1e-9 { got.abs() } else { (got - want).abs() / want.abs() };
    assert!(err <= rel, "{what}: {got} vs {want} (relative error {err:.5})");
}

#[test]
fn chargeback_matches_the_ledger_with_price_and_tariff_changes_mig_and_time_slicing() {
    let m = month();
    let cfg = write_config(m.dir.path(), "priced.toml", PRICED);
    let report = chargeback(&cfg, &[]);
    let rows = rows_by(&report, "namespace");
    let ledger = m.sim.ledger();
    let model = m.sim.signals();
    let priced = gpuledger::simulate::ledger::priced(&m.sim.cluster, &m.sim.namespaces, &m.sim.schedule, &model, m.sim.params.window_ms(), gpu_price, |ms| {
        tariff_at(ms) * 1.25
    });

    // The scenario has what it must: MIG slices and the time-sliced GPU held by pods.
    assert!(m.sim.cluster.units.iter().any(|u| u.mig_profile == Some("3g.40gb")));
    let sliced: Vec<usize> = (0..m.sim.cluster.units.len()).filter(|&u| m.sim.cluster.units[u].time_sliced).collect();
    assert_eq!(sliced.len(), 4, "one GPU offered as 4 replicas");
    let shared_pods = sliced.iter().map(|&u| m.sim.schedule.occupancy[u].len()).sum::<usize>();
    assert!(shared_pods >= 20, "pods time-sliced the shared GPU: {shared_pods}");

    let mut worst = (0.0f64, String::new());
    for (ns, truth) in &ledger.namespaces {
        let r = rows.get(ns).unwrap_or_else(|| panic!("no chargeback row for {ns}"));
        let (cloud, power) = priced[ns];
        for (what, got, want) in [
            ("GPU-hours", num(&r["gpu_hours"]), truth.gpu_hours),
            ("energy kWh", num(&r["energy_kwh"]), truth.energy_kwh),
            ("cloud cost", num(&r["gpu_cost"]), cloud),
            ("power cost", num(&r["power_cost"]), power),
            ("carbon kg", num(&r["carbon_kg"]), truth.energy_kwh * 1.25 * 0.380),
        ] {
            close(got, want, 0.005, &format!("{ns} {what}"));
            let err = (got - want).abs() / want.abs().max(1e-9);
            if err > worst.0 {
                worst = (err, format!("{ns} {what}: {got} vs {want}"));
            }
        }
    }
    eprintln!("worst relative error against the ledger: {:.4}% ({})", worst.0 * 100.0, worst.1);

    // The prices did change inside the month: at the old H100 price and a flat 0.20 the
    // month would cost visibly more.
    let flat = gpuledger::simulate::ledger::priced(
        &m.sim.cluster,
        &m.sim.namespaces,
        &m.sim.schedule,
        &model,
        m.sim.params.window_ms(),
        |u, _| gpu_price(u, 0),
        |_| 0.20 * 1.25,
    );
    let got: f64 = rows.values().map(|r| num(&r["gpu_cost"])).sum();
    let unchanged: f64 = flat.values().map(|v| v.0).sum();
    assert!(unchanged - got > 1000.0, "the H100 price cut is in the bill: {got} vs {unchanged}");
    // Exact conservation and a cost reconciliation line.
    let c = &report["conservation"];
    assert_eq!(c["rows_gpu_us"], c["cluster_gpu_us"]);
    assert_eq!(c["rows_energy_mj"], c["cluster_energy_mj"]);
    assert_eq!(c["cost_conserved"], true);
    let total: f64 = rows.values().map(|r| num(&r["total_cost"])).sum();
    close(total, num(&report["total"]["total_cost"]), 1e-9, "rows sum to the total row");
}

#[test]
fn tariff_bands_and_prices_are_tables_a_query_can_join() {
    let m = month();
    let cfg = write_config(m.dir.path(), "priced-sql.toml", PRICED);
    let sql = "SELECT band, COUNT(*) AS buckets, MIN(price_per_kwh) AS price FROM power_tariff \
               WHERE bucket_start >= TIMESTAMP '2026-10-01T00:00:00Z' AND bucket_start < TIMESTAMP '2026-11-01T00:00:00Z' GROUP BY band ORDER BY band";
    let out = common::run_ok(m.dir.path(), &["--config", cfg.to_str().unwrap(), "query", sql, "--format", "csv"]);
    let (_, rows) = common::parse_csv(&common::stdout(&out));
    // Count the 15-minute buckets of each band here, with the hand-written tariff.
    let mut want: BTreeMap<String, usize> = BTreeMap::new();
    let start = chrono::Utc.with_ymd_and_hms(2026, 10, 1, 0, 0, 0).unwrap().timestamp_millis();
    for i in 0..(31 * 96) {
        let p = tariff_at(start + i * 900_000);
        let oct15 = start + i * 900_000 >= chrono_tz::Europe::Berlin.with_ymd_and_hms(2026, 10, 15, 0, 0, 0).unwrap().timestamp_millis();
        let band = match (oct15, p) {
            (false, _) => "flat",
            (true, 0.11) => "night",
            (true, 0.27) => "weekday",
            _ => "flat",
        };
        *want.entry(band.to_string()).or_default() += 1;
    }
    let got: BTreeMap<String, usize> = rows.iter().map(|r| (r[0].clone(), r[1].parse().unwrap())).collect();
    assert_eq!(got, want, "bands per 15-minute bucket, DST change on 25 October included");
}

#[test]
fn repricing_a_past_month_needs_only_the_config() {
    let m = month();
    let lake = m.dir.path().join("s/lake");
    let before = common::tree(&lake);
    let a = chargeback(&write_config(m.dir.path(), "a.toml", ""), &[]);
    let cut = "[[pricing.gpu]]\nmodel = \"NVIDIA H100 80GB HBM3\"\nprice_per_hour = 4.00\neffective_from = \"2026-01-01\"\n\
               [[pricing.gpu]]\nmodel = \"NVIDIA A100-SXM4-80GB\"\nprice_per_hour = 3.67\n[[pricing.gpu]]\nmodel = \"NVIDIA L4\"\nprice_per_hour = 0.80\n";
    let b = chargeback(&write_config(m.dir.path(), "b.toml", cut), &[]);
    assert_eq!(common::tree(&lake), before, "re-pricing reads the lake and never writes it");
    // The difference per namespace is its H100 hours x (6.88 - 4.00), from the by-model report.
    let out = common::run_ok(
        m.dir.path(),
        &["--config", m.dir.path().join("a.toml").to_str().unwrap(), "report", "chargeback-models", "--month", "2026-10", "--format", "json"],
    );
    let models: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let mut h100: BTreeMap<String, f64> = BTreeMap::new();
    for r in models["rows"].as_array().unwrap().iter().filter(|r| r["gpu_model"] == H100) {
        *h100.entry(r["namespace"].as_str().unwrap().into()).or_default() += num(&r["gpu_hours"]);
    }
    let (ra, rb) = (rows_by(&a, "namespace"), rows_by(&b, "namespace"));
    let mut checked = 0;
    for (ns, row) in &ra {
        let want = h100.get(ns).copied().unwrap_or(0.0) * (6.88 - 4.00);
        let got = num(&row["gpu_cost"]) - num(&rb[ns]["gpu_cost"]);
        assert!((got - want).abs() <= 0.02, "{ns}: re-priced by {got}, expected {want}");
        checked += usize::from(want > 100.0);
        assert_eq!(row["gpu_hours"], rb[ns]["gpu_hours"], "{ns}: same hours");
    }
    assert!(checked >= 2, "namespaces with H100 time: {checked}");
}

#[test]
fn idle_and_shared_spread_move_cost_exactly() {
    let m = month();
    let separate = chargeback(&write_config(m.dir.path(), "sep.toml", ""), &[]);
    let sep = rows_by(&separate, "namespace");
    let idle_cost = num(&sep["__unallocated__"]["cloud_cost"]);
    let cluster_total = num(&separate["total"]["total_cost"]);
    assert!(idle_cost > 1000.0);

    let prop = chargeback(&write_config(m.dir.path(), "prop.toml", "[pricing]\nidle_policy = \"proportional\"\n"), &[]);
    let p = rows_by(&prop, "namespace");
    close(num(&prop["total"]["total_cost"]), cluster_total, 1e-12, "proportional keeps the total");
    assert_eq!(num(&p["__unallocated__"]["total_cost"]), 0.0);
    close(num(&p["__unallocated__"]["idle_cost"]), -idle_cost, 1e-12, "unallocated gives all of its cost");
    let tenants_cost: f64 = sep.iter().filter(|(k, _)| *k != "__unallocated__").map(|(_, r)| num(&r["cloud_cost"])).sum();
    for (ns, r) in sep.iter().filter(|(k, _)| *k != "__unallocated__") {
        let want = idle_cost * num(&r["cloud_cost"]) / tenants_cost;
        assert!((num(&p[ns]["idle_cost"]) - want).abs() <= 0.011, "{ns}: idle share {} vs {want}", p[ns]["idle_cost"]);
    }

    let owner = chargeback(&write_config(m.dir.path(), "owner.toml", "[pricing]\nidle_policy = \"owner:platform\"\n"), &[]);
    let o = rows_by(&owner, "namespace");
    close(num(&o["platform"]["total_cost"]), idle_cost, 1e-12, "owner takes the idle cost");
    close(num(&owner["total"]["total_cost"]), cluster_total, 1e-12, "owner keeps the total");

    let shared =
        chargeback(&write_config(m.dir.path(), "shared.toml", "[pricing]\nshared_namespaces = [\"team-inference\"]\nshared_policy = \"proportional\"\n"), &[]);
    let s = rows_by(&shared, "namespace");
    assert_eq!(num(&s["team-inference"]["total_cost"]), 0.0);
    assert_eq!(num(&s["__unallocated__"]["idle_cost"]), 0.0, "idle stays separate");
    close(num(&shared["total"]["total_cost"]), cluster_total, 1e-12, "shared spread keeps the total");
    let moved: f64 = s.iter().filter(|(k, _)| *k != "team-inference").map(|(_, r)| num(&r["idle_cost"])).sum();
    close(moved, num(&sep["team-inference"]["cloud_cost"]), 1e-9, "team-inference's cost landed on the others");
}

#[test]
fn teams_and_cost_centres_from_namespace_labels_and_config() {
    let m = month();
    // No [teams]: teams and cost centres come from kube_namespace_labels in the lake.
    let cfg = write_config(m.dir.path(), "labels.toml", "");
    let by_ns = rows_by(&chargeback(&cfg, &[]), "namespace");
    for spec in &m.sim.namespaces {
        assert_eq!(by_ns[spec.name]["team"], spec.team, "{} team from its label", spec.name);
        assert_eq!(by_ns[spec.name]["cost_centre"], spec.cost_centre());
    }
    for (by, key) in [("team", "team"), ("cost-centre", "cost_centre")] {
        let grouped = rows_by(&chargeback(&cfg, &["--by", by]), key);
        let mut want: BTreeMap<String, f64> = BTreeMap::new();
        for (ns, r) in &by_ns {
            let k = if ns == "__unallocated__" { ns.clone() } else { r[key].as_str().unwrap().to_string() };
            *want.entry(k).or_default() += num(&r["gpu_hours"]);
        }
        assert_eq!(grouped.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "--by {by} groups");
        for (k, hours) in &want {
            close(num(&grouped[k]["gpu_hours"]), *hours, 1e-6, &format!("--by {by} {k}"));
        }
    }
    // The config wins over a label.
    let cfg = write_config(m.dir.path(), "teams.toml", "[teams]\nteam-llm = { team = \"llm\", cost_centre = \"cc-9\" }\n");
    let rows = rows_by(&chargeback(&cfg, &[]), "namespace");
    assert_eq!(rows["team-llm"]["team"], "llm");
    assert_eq!(rows["team-llm"]["cost_centre"], "cc-9");
    assert_eq!(rows["team-vision"]["team"], "perception", "others keep their labels");
}

#[test]
fn cpu_and_memory_requests_are_priced_piecewise() {
    let m = month();
    let cfg = write_config(
        m.dir.path(),
        "cpu.toml",
        "[[pricing.cpu]]\nprice_per_hour = 0.04\neffective_from = \"2026-01-01\"\n[[pricing.cpu]]\nprice_per_hour = 0.05\neffective_from = \"2026-10-16\"\n\
         [[pricing.memory]]\nprice_per_hour = 0.005\neffective_from = \"2026-01-01\"\n",
    );
    let rows = rows_by(&chargeback(&cfg, &[]), "namespace");
    let (ws, we) = m.sim.params.window_ms();
    let change = chrono::Utc.with_ymd_and_hms(2026, 10, 16, 0, 0, 0).unwrap().timestamp_millis();
    let mut want: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for pod in &m.sim.schedule.pods {
        let Some(start) = pod.started else { continue };
        let (s, e) = (start.max(ws), pod.finished.unwrap_or(we).min(we));
        if s >= e {
            continue;
        }
        let h = |a: i64, b: i64| (b.min(e) - a.max(s)).max(0) as f64 / 3.6e6;
        let w = want.entry(m.sim.namespaces[pod.ns].name).or_default();
        w.0 += pod.cpu_request * (h(s, change) * 0.04 + h(change, e) * 0.05);
        w.1 += pod.mem_request_bytes as f64 / 1073741824.0 * h(s, e) * 0.005;
    }
    for (ns, (cpu, mem)) in want {
        close(num(&rows[ns]["cpu_cost"]), cpu, 0.001, &format!("{ns} CPU cost"));
        close(num(&rows[ns]["memory_cost"]), mem, 0.001, &format!("{ns} memory cost"));
        let sum = num(&rows[ns]["gpu_cost"]) + num(&rows[ns]["cpu_cost"]) + num(&rows[ns]["memory_cost"]);
        assert!((num(&rows[ns]["cloud_cost"]) - sum).abs() <= 0.011, "{ns}: cloud = GPU + CPU + memory");
    }
}

#[test]
fn focus_export_has_the_columns_types_and_totals() {
    let m = month();
    // The priced month, with the idle cost spread so the export carries x_IdleShareCost.
    let cfg = write_config(m.dir.path(), "focus.toml", &PRICED.replace("basis = \"cloud\"", "basis = \"cloud\"\nidle_policy = \"proportional\""));
    let c = cfg.to_str().unwrap();
    let charge = chargeback(&cfg, &[]);
    let out = common::run_ok(m.dir.path(), &["--config", c, "report", "focus", "--month", "2026-10", "--format", "csv"]);
    let text = common::stdout(&out);
    let (header, rows) = common::parse_csv(&text);
    let mandatory = [
        "BilledCost",
        "BillingAccountId",
        "BillingAccountName",
        "BillingCurrency",
        "BillingPeriodEnd",
        "BillingPeriodStart",
        "ChargeCategory",
        "ChargeClass",
        "ChargeDescription",
        "ChargePeriodEnd",
        "ChargePeriodStart",
        "ConsumedQuantity",
        "ConsumedUnit",
        "ContractedCost",
        "EffectiveCost",
        "InvoiceIssuerName",
        "ListCost",
        "PricingQuantity",
        "PricingUnit",
        "ProviderName",
        "PublisherName",
        "ResourceId",
        "ResourceName",
        "ResourceType",
        "ServiceCategory",
        "ServiceName",
        "SubAccountId",
        "SubAccountName",
        "Tags",
    ];
    for col in mandatory {
        assert!(header.iter().any(|h| h == col), "FOCUS column {col} present");
    }
    let first_ext = header.iter().position(|h| h.starts_with("x_")).unwrap();
    assert!(header[first_ext..].iter().all(|h| h.starts_with("x_")), "extensions come after the FOCUS columns");
    for ext in ["x_GpuModel", "x_EnergyKwh", "x_Cluster", "x_IdleShareCost"] {
        assert!(header.iter().any(|h| h == ext), "{ext}");
    }
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let iso = |s: &str| s.len() == 20 && s.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(s).is_ok();
    let (mut billed, mut keys) = (0.0, std::collections::BTreeSet::new());
    for r in &rows {
        for c in ["BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"] {
            assert!(iso(&r[col(c)]), "{c} is UTC ISO 8601: {}", r[col(c)]);
        }
        assert_eq!(r[col("BillingPeriodStart")], "2026-10-01T00:00:00Z");
        assert_eq!(r[col("BillingPeriodEnd")], "2026-11-01T00:00:00Z");
        let d = &r[col("BilledCost")];
        assert!(!d.contains('e') && !d.contains('E') && d.parse::<f64>().is_ok(), "plain decimal: {d}");
        assert_eq!(r[col("BillingCurrency")], "EUR");
        assert_eq!(r[col("ChargeCategory")], "Usage");
        assert!(serde_json::from_str::<serde_json::Map<String, Value>>(&r[col("Tags")]).is_ok(), "Tags is a JSON object");
        billed += r[col("BilledCost")].parse::<f64>().unwrap();
        assert!(
            keys.insert((r[col("SubAccountId")].clone(), r[col("x_GpuModel")].clone(), r[col("x_MigProfile")].clone(), r[col("ChargePeriodStart")].clone())),
            "one row per namespace, model and day"
        );
    }
    // Rows at 6 decimals, largest-remainder rounded: their sum rounds to the chargeback's total.
    assert!(
        ((billed * 100.0).round() / 100.0 - num(&charge["total"]["total_cost"])).abs() < 1e-6,
        "BilledCost {billed} adds up to the chargeback's total_cost {}",
        charge["total"]["total_cost"]
    );
    // Per namespace, within a cent of the chargeback's rows (the export keeps 6 decimals).
    let by_ns = rows_by(&charge, "namespace");
    for (ns, r) in &by_ns {
        let sum: f64 = rows.iter().filter(|x| &x[col("SubAccountId")] == ns).map(|x| x[col("BilledCost")].parse::<f64>().unwrap()).sum();
        assert!((sum - num(&r["total_cost"])).abs() <= 0.01, "{ns}: FOCUS {sum} vs chargeback {}", r["total_cost"]);
    }
    // 7 namespaces x (3 models + 2 MIG profiles, where used) x 31 days.
    assert!(rows.len() > 31 * 6, "daily rows: {}", rows.len());

    // Parquet: the same rows, decimals as DECIMAL and instants as UTC timestamps.
    common::run_ok(m.dir.path(), &["--config", c, "report", "focus", "--month", "2026-10", "--format", "parquet", "-o", "focus.parquet"]);
    let file = std::fs::File::open(m.dir.path().join("focus.parquet")).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let schema = reader.schema().clone();
    assert!(matches!(schema.field_with_name("BilledCost").unwrap().data_type(), arrow::datatypes::DataType::Decimal128(_, 6)));
    assert!(
        matches!(schema.field_with_name("ChargePeriodStart").unwrap().data_type(), arrow::datatypes::DataType::Timestamp(_, Some(tz)) if tz.as_ref() == "UTC")
    );
    let n: usize = reader.build().unwrap().map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(n, rows.len());

    // The FinOps validator, where it is installed (CI installs it).
    let validator = std::env::var("GPULEDGER_FOCUS_VALIDATOR").ok().map(PathBuf::from).filter(|p| p.exists());
    let Some(validator) = validator else {
        assert!(
            std::env::var("GPULEDGER_REQUIRE_FOCUS_VALIDATOR").is_err(),
            "GPULEDGER_REQUIRE_FOCUS_VALIDATOR is set but GPULEDGER_FOCUS_VALIDATOR names no program"
        );
        eprintln!("skipping focus-validator: set GPULEDGER_FOCUS_VALIDATOR to its path (pip install focus-validator)");
        return;
    };
    let csv = m.dir.path().join("focus.csv");
    std::fs::write(&csv, &text).unwrap();
    let failures = run_validator(&validator, &csv);
    assert_eq!(failures, vec!["BillingCurrency_IsCurrencyCode".to_string()], "only the rule that needs the network fails");
    // A broken export fails it: the validator really checks.
    let broken = text.replacen(&format!(",{},", rows[0][col("BilledCost")]), ",,", 1);
    std::fs::write(&csv, broken).unwrap();
    assert!(run_validator(&validator, &csv).iter().any(|f| f.starts_with("BilledCost")), "a missing BilledCost is caught");
}

/// Runs focus-validator 1.0 with the overrides of `tests/focus/validator-overrides.yaml` and
/// returns the rules that failed.
fn run_validator(validator: &Path, csv: &Path) -> Vec<String> {
    let xml = csv.with_extension("xml");
    let overrides = common::repo_root().join("tests/focus/validator-overrides.yaml");
    let status = std::process::Command::new(validator)
        .args(["--data-file", csv.to_str().unwrap(), "--validate-version", "1.0", "--output-type", "unittest", "--output-destination", xml.to_str().unwrap()])
        .args(["--override-file", overrides.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success(), "focus-validator ran");
    let report = std::fs::read_to_string(&xml).unwrap();
    let tests: usize = report.split("tests=\"").nth(1).and_then(|s| s.split('"').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(tests >= 100, "the validator checked its rule set: {tests} checks");
    let mut failed = Vec::new();
    for case in report.split("<testcase ").skip(1) {
        let body = case.split("</testcase>").next().unwrap_or(case);
        if body.contains("<failure") || body.contains("<error") {
            failed.push(case.split("name=\"").nth(1).and_then(|s| s.split(" ::").next()).unwrap_or("?").to_string());
        }
    }
    failed.sort();
    failed.dedup();
    failed
}

#[test]
fn request_based_fallback_for_a_node_without_pod_mapping() {
    use arrow::array::{Array, AsArray, RecordBatch};
    let dir = tempfile::tempdir().unwrap();
    common::run_ok(dir.path(), &["simulate", "--out", "s", "--gpus", "24", "--days", "3", "--start", "2026-10-01"]);
    let sim = Simulation::run(SimParams { gpus: 24, time_sliced: 0, ..params(3) }).unwrap();
    let ledger = sim.ledger();
    let lake = gpuledger::lake::Lake::new(dir.path().join("s/lake"));
    // gpu-node-01's DCGM exporter loses its pod mapping: no namespace, pod or container.
    let node = "gpu-node-01";
    for date in lake.dates(gpuledger::lake::Table::GpuSamples).unwrap() {
        let b = gpuledger::lake::reader::read_partition(&lake, gpuledger::lake::Table::GpuSamples, date).unwrap().unwrap();
        let nodes = arrow::compute::cast(b.column_by_name("node").unwrap(), &arrow::datatypes::DataType::Utf8).unwrap();
        let on_node: Vec<bool> = (0..b.num_rows()).map(|i| nodes.as_string::<i32>().value(i) == node).collect();
        let mut columns = b.columns().to_vec();
        for name in ["namespace", "pod", "container"] {
            let i = b.schema().index_of(name).unwrap();
            let keep = arrow::array::BooleanArray::from(on_node.iter().map(|x| !x).collect::<Vec<_>>());
            columns[i] = arrow::compute::nullif(&columns[i], &arrow::compute::not(&keep).unwrap()).unwrap();
            assert!(columns[i].null_count() >= b.column(i).null_count());
        }
        let b = RecordBatch::try_new(b.schema(), columns).unwrap();
        gpuledger::lake::write_partition(&lake, gpuledger::lake::Table::GpuSamples, date, &b).unwrap();
        // Written as a collect writes a day: recorded as published once written.
        gpuledger::lake::published::Published::record(&lake, [date]).unwrap();
    }
    let out = common::run_ok(dir.path(), &["--lake", "s/lake", "report", "chargeback", "--from", "2026-10-01", "--to", "2026-10-04", "--format", "json"]);
    let report: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    let rows = rows_by(&report, "namespace");
    let c = &report["conservation"];
    assert_eq!(c["rows_gpu_us"], c["cluster_gpu_us"], "still conserved");
    assert_eq!(c["rows_energy_mj"], c["cluster_energy_mj"]);
    assert_eq!(report["request_based"], true);
    // The namespaces that ran on the node are flagged; their GPU-hours still match the ledger.
    let on_node: std::collections::BTreeSet<&str> = sim
        .schedule
        .pods
        .iter()
        .filter(|p| p.node.map(|n| sim.cluster.nodes[n].name.as_str()) == Some(node) && p.started.is_some())
        .map(|p| sim.namespaces[p.ns].name)
        .collect();
    assert!(!on_node.is_empty());
    for (ns, truth) in ledger.namespaces.iter().filter(|(_, t)| t.gpu_hours > 0.0) {
        let r = &rows[ns];
        let flagged = r["request_based"] == "yes";
        assert_eq!(flagged, on_node.contains(ns.as_str()) || (ns == "__unallocated__" && num(&r["request_based_gpu_hours"]) > 0.0), "{ns} flag");
        if truth.gpu_hours > 5.0 {
            close(num(&r["gpu_hours"]), truth.gpu_hours, 0.005, &format!("{ns} GPU-hours with the fallback"));
        }
    }
    assert!(report["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("request-based")));
}

/// The chargeback by workload on a month with CPU and memory prices (one change mid-month), the
/// idle cost spread proportionally and a shared namespace spread onto the others: every column
/// of the total line equals the namespace chargeback's to the cent; each workload's CPU and
/// memory cost is its own pods' requests x running time x the price of the day (the
/// simulator's pods, independently), and every namespace's rows by workload add up to it.
#[test]
fn chargeback_by_workload_keeps_every_cent_and_charges_each_workload_its_requests() {
    let m = month();
    let cfg = write_config(
        m.dir.path(),
        "by-workload.toml",
        "[pricing]\nidle_policy = \"proportional\"\nshared_namespaces = [\"team-inference\"]\nshared_policy = \"proportional\"\n\
         [[pricing.cpu]]\nprice_per_hour = 0.04\neffective_from = \"2026-01-01\"\n[[pricing.cpu]]\nprice_per_hour = 0.05\neffective_from = \"2026-10-16\"\n\
         [[pricing.memory]]\nprice_per_hour = 0.005\neffective_from = \"2026-01-01\"\n",
    );
    let by_ns = chargeback(&cfg, &[]);
    let by_workload = chargeback(&cfg, &["--by", "workload"]);
    for column in ["gpu_hours", "energy_kwh", "power_cost", "gpu_cost", "cpu_cost", "memory_cost", "cloud_cost", "idle_cost", "total_cost"] {
        assert_eq!(by_workload["total"][column], by_ns["total"][column], "total {column}");
    }
    let rows = rows_by(&by_workload, "workload");
    let (ws, we) = m.sim.params.window_ms();
    let owners = gpuledger::simulate::owners::all(&m.sim.namespaces, &m.sim.schedule.pods, (ws, we));
    let change = chrono::Utc.with_ymd_and_hms(2026, 10, 16, 0, 0, 0).unwrap().timestamp_millis();
    let mut want: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (pod, owner) in m.sim.schedule.pods.iter().zip(&owners) {
        let Some(start) = pod.started else { continue };
        let (s, e) = (start.max(ws), pod.finished.unwrap_or(we).min(we));
        if s >= e {
            continue;
        }
        let h = |a: i64, b: i64| (b.min(e) - a.max(s)).max(0) as f64 / 3.6e6;
        let w = want.entry(owner.workload_key()).or_default();
        w.0 += pod.cpu_request * (h(s, change) * 0.04 + h(change, e) * 0.05);
        w.1 += pod.mem_request_bytes as f64 / 1073741824.0 * h(s, e) * 0.005;
    }
    for (workload, (cpu, mem)) in &want {
        let row = rows.get(workload).unwrap_or_else(|| panic!("{workload} has no row"));
        assert!((num(&row["cpu_cost"]) - cpu).abs() <= cpu * 0.001 + 0.011, "{workload}: CPU cost {} vs {cpu}", row["cpu_cost"]);
        assert!((num(&row["memory_cost"]) - mem).abs() <= mem * 0.001 + 0.011, "{workload}: memory cost {} vs {mem}", row["memory_cost"]);
    }
    // The shared namespace's and the idle cost moved onto workloads, none lost.
    let idle: f64 = rows.values().map(|r| num(&r["idle_cost"])).sum();
    assert!(idle.abs() < 0.5, "the spread moves cost between rows, {idle} in all");
    assert!(rows.values().any(|r| num(&r["idle_cost"]) > 1.0), "workloads carry a share of the idle and shared cost");
    let note = by_workload["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).find(|n| n.starts_with("by workload:")).unwrap();
    assert!(note.contains("to the unit OK"), "{note}");

    // The FOCUS export by workload: each SubAccount's lines (per model, profile and day, CPU and
    // memory apart) bill what its chargeback row bills, spread included, and the lines sum to
    // the chargeback's total.
    let out =
        common::run_ok(m.dir.path(), &["--config", cfg.to_str().unwrap(), "report", "focus", "--month", "2026-10", "--format", "csv", "--by", "workload"]);
    let (header, lines) = common::parse_csv(&common::stdout(&out));
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let mut billed: BTreeMap<String, f64> = BTreeMap::new();
    let mut kinds: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for l in &lines {
        assert_eq!(l[col("SubAccountId")], l[col("SubAccountName")]);
        *billed.entry(l[col("SubAccountName")].clone()).or_default() += l[col("BilledCost")].parse::<f64>().unwrap();
        kinds.entry(l[col("SubAccountName")].clone()).or_default().insert(l[col("ConsumedUnit")].clone());
    }
    assert_eq!(billed.keys().collect::<Vec<_>>(), rows.keys().collect::<Vec<_>>(), "one SubAccount per workload row");
    for (workload, row) in &rows {
        let (got, want) = (billed[workload], num(&row["total_cost"]));
        assert!((got - want).abs() < 0.006, "{workload}: FOCUS bills {got}, the chargeback {want}");
    }
    let total: f64 = billed.values().sum();
    assert!((total - num(&by_workload["total"]["total_cost"])).abs() < 0.006, "FOCUS {total} vs {}", by_workload["total"]["total_cost"]);
    let priced_pods = kinds.values().filter(|k| k.contains("GPU-Hours") && k.contains("Core-Hours") && k.contains("GiB-Hours")).count();
    assert!(priced_pods > 10, "workloads with GPU, CPU and memory lines: {priced_pods}");
    // `report KIND --by KEY`'s stderr, refused with exit 2.
    let refused = |kind: &str, by: &str| -> String {
        let o = common::bin()
            .current_dir(m.dir.path())
            .args(["--config", cfg.to_str().unwrap(), "report", kind, "--month", "2026-10", "--by", by])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(2), "{err}");
        err
    };
    // A report that does not take a key of each pod yet says so (exit 2), naming those that do.
    let err = refused("heatmap", "workload");
    assert!(
        err.contains("report heatmap does not group by workload") && err.contains("taken by chargeback, chargeback-models, idle, queue, events and focus"),
        "{err}"
    );
    // Nor does a key a namespace maps to go where it is not honoured.
    let err = refused("idle", "team");
    assert!(err.contains("report idle does not group by team") && err.contains("taken by chargeback and focus"), "{err}");

    // By model: each workload's rows over its GPU models add up to its chargeback row's GPU
    // time and cost (at the rows' rounding), and the total is the namespace chargeback's.
    let models = |extra: &[&str]| -> Value {
        let mut args = vec!["--config", cfg.to_str().unwrap(), "report", "chargeback-models", "--month", "2026-10", "--format", "json"];
        args.extend_from_slice(extra);
        serde_json::from_str(&common::stdout(&common::run_ok(m.dir.path(), &args))).unwrap()
    };
    let (by_model, by_model_ns) = (models(&["--by", "workload"]), models(&[]));
    for column in ["gpu_hours", "gpu_cost"] {
        assert_eq!(by_model["total"][column], by_model_ns["total"][column], "by workload and model, the same total {column}");
    }
    let mut per: BTreeMap<String, (f64, f64, usize)> = BTreeMap::new();
    for r in by_model["rows"].as_array().unwrap() {
        let e = per.entry(r["workload"].as_str().unwrap().to_string()).or_default();
        *e = (e.0 + num(&r["gpu_hours"]), e.1 + num(&r["gpu_cost"]), e.2 + 1);
        assert!(!r["namespaces"].as_str().unwrap().is_empty());
    }
    for (w, (h, c, n)) in &per {
        let row = &rows[w];
        assert!((h - num(&row["gpu_hours"])).abs() <= 0.0001 * (*n as f64 + 1.0), "{w}: {h} GPU-h by model vs {}", row["gpu_hours"]);
        assert!((c - num(&row["gpu_cost"])).abs() <= 0.01 * (*n as f64 + 1.0), "{w}: {c} by model vs {}", row["gpu_cost"]);
    }
    assert!(per.values().any(|p| p.2 > 1), "a workload on more than one GPU model or MIG profile");
}
