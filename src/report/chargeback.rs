//! The monthly chargeback: GPU-hours, utilisation, energy, power and cloud cost per
//! namespace, the `__unallocated__` row, and the conservation line (rows sum to the
//! cluster total, checked against an independent scan).

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::prelude::SessionContext;
use serde_json::{Map, Value};

use super::money::{apportion, format_units, round_ratio};
use super::render::{Cell, Report};
use super::{ReportError, Result};
use crate::config::{Config, CostBasis};
use super::columns::window_params;
use crate::engine::run_query;
use crate::queries::Queries;
use crate::timewin::Window;

/// GPU-microseconds per GPU-hour, millijoules per kWh.
const US_PER_HOUR: i128 = 3_600_000_000;
const MJ_PER_KWH: i128 = 3_600_000_000;

/// One namespace's exact quantities, as summed by `queries/chargeback.sql`.
#[derive(Debug, Clone, PartialEq)]
pub struct ChargebackRow {
    pub namespace: String,
    pub team: Option<String>,
    pub gpu_us: i64,
    pub energy_mj: i64,
    pub util_gpu_us: i64,
    /// Exact decimal (units, scale).
    pub cloud_cost: (i128, u32),
    pub power_cost: (i128, u32),
    pub unpriced_gpu_us: i64,
}

#[derive(Debug, Clone)]
pub struct Chargeback {
    pub window: Window,
    pub rows: Vec<ChargebackRow>,
    pub cluster_gpu_us: i64,
    pub cluster_energy_mj: i64,
    pub cluster_rows: i64,
    pub cluster_gpus: i64,
}

fn shape(detail: impl Into<String>) -> ReportError {
    ReportError::Shape { report: "chargeback", detail: detail.into() }
}

fn i64_at(batch: &RecordBatch, name: &str, row: usize) -> Result<i64> {
    let col = batch.column_by_name(name).ok_or_else(|| shape(format!("no column {name}")))?;
    let col = arrow::compute::cast(col, &DataType::Int64).map_err(|e| shape(e.to_string()))?;
    let arr = col.as_primitive::<Int64Type>();
    Ok(if arr.is_null(row) { 0 } else { arr.value(row) })
}

fn decimal_at(batch: &RecordBatch, name: &str, row: usize) -> Result<(i128, u32)> {
    let col = batch.column_by_name(name).ok_or_else(|| shape(format!("no column {name}")))?;
    match col.data_type() {
        DataType::Decimal128(_, s) if *s >= 0 => {
            let arr = col.as_primitive::<arrow::datatypes::Decimal128Type>();
            Ok((if arr.is_null(row) { 0 } else { arr.value(row) }, *s as u32))
        }
        other => Err(shape(format!("{name} is {other}, expected DECIMAL"))),
    }
}

fn str_at(batch: &RecordBatch, name: &str, row: usize) -> Result<Option<String>> {
    let col = batch.column_by_name(name).ok_or_else(|| shape(format!("no column {name}")))?;
    let col = arrow::compute::cast(col, &DataType::Utf8).map_err(|e| shape(e.to_string()))?;
    let arr = col.as_string::<i32>();
    Ok((!arr.is_null(row)).then(|| arr.value(row).to_string()))
}

/// Runs the chargeback SQL and the independent cluster-total scan for `window`.
pub async fn compute(ctx: &SessionContext, queries: &Queries, window: &Window) -> Result<Chargeback> {
    let sql = queries.get("chargeback")?;
    let batches = run_query(ctx, "chargeback", &sql, window_params(window)).await?;
    let mut rows = Vec::new();
    for b in &batches {
        for r in 0..b.num_rows() {
            rows.push(ChargebackRow {
                namespace: str_at(b, "namespace", r)?.ok_or_else(|| shape("null namespace"))?,
                team: str_at(b, "team", r)?,
                gpu_us: i64_at(b, "gpu_us", r)?,
                energy_mj: i64_at(b, "energy_mj", r)?,
                util_gpu_us: i64_at(b, "util_gpu_us", r)?,
                cloud_cost: decimal_at(b, "cloud_cost", r)?,
                power_cost: decimal_at(b, "power_cost", r)?,
                unpriced_gpu_us: i64_at(b, "unpriced_gpu_us", r)?,
            });
        }
    }
    rows.sort_by(|a, b| a.namespace.cmp(&b.namespace));

    let sql = queries.get("cluster_totals")?;
    let totals = run_query(ctx, "cluster_totals", &sql, window_params(window)).await?;
    let t = totals.first().filter(|b| b.num_rows() == 1).ok_or_else(|| shape("cluster_totals returned no row"))?;
    Ok(Chargeback {
        window: *window,
        rows,
        cluster_gpu_us: i64_at(t, "gpu_us", 0)?,
        cluster_energy_mj: i64_at(t, "energy_mj", 0)?,
        cluster_rows: i64_at(t, "rows", 0)?,
        cluster_gpus: i64_at(t, "gpus", 0)?,
    })
}

/// Brings exact decimals of differing scales to one scale.
fn rescale(v: (i128, u32), scale: u32) -> i128 {
    v.0 * 10i128.pow(scale - v.1)
}

impl Chargeback {
    pub fn gpu_us_conserved(&self) -> bool {
        self.rows.iter().map(|r| r.gpu_us).sum::<i64>() == self.cluster_gpu_us
    }

    pub fn energy_conserved(&self) -> bool {
        self.rows.iter().map(|r| r.energy_mj).sum::<i64>() == self.cluster_energy_mj
    }

    pub fn to_report(&self, config: &Config) -> Report {
        let currency = &config.pricing.currency;
        let n = self.rows.len();
        let gpu_us: Vec<i128> = self.rows.iter().map(|r| r.gpu_us as i128).collect();
        let energy: Vec<i128> = self.rows.iter().map(|r| r.energy_mj as i128).collect();
        let scale = self.rows.iter().flat_map(|r| [r.cloud_cost.1, r.power_cost.1]).max().unwrap_or(0);
        let denom = 10i128.pow(scale);
        let cloud: Vec<i128> = self.rows.iter().map(|r| rescale(r.cloud_cost, scale)).collect();
        let power: Vec<i128> = self.rows.iter().map(|r| rescale(r.power_cost, scale)).collect();
        let total_src = match config.pricing.basis {
            CostBasis::Cloud => &cloud,
            CostBasis::Power => &power,
        };
        let (hours, hours_total) = apportion(&gpu_us, US_PER_HOUR, 4);
        let (kwh, kwh_total) = apportion(&energy, MJ_PER_KWH, 4);
        let (cloud_c, cloud_total) = apportion(&cloud, denom, 2);
        let (power_c, power_total) = apportion(&power, denom, 2);
        let (total_c, total_total) = apportion(total_src, denom, 2);
        let share_basis: i128 = gpu_us.iter().sum::<i128>().max(1);
        let (share, share_total) = apportion(&gpu_us.iter().map(|g| g * 100).collect::<Vec<_>>(), share_basis, 2);

        let dec = |units: i128, decimals: u32| Cell::Dec { units, decimals };
        let mut rows = Vec::with_capacity(n);
        for (i, r) in self.rows.iter().enumerate() {
            let util = if r.gpu_us > 0 { round_ratio(r.util_gpu_us as i128, r.gpu_us as i128, 2) } else { 0 };
            let team = r.team.clone().or_else(|| config.team_of(&r.namespace).map(str::to_string));
            rows.push(vec![
                Cell::Str(r.namespace.clone()),
                team.map_or(Cell::Null, Cell::Str),
                dec(hours[i], 4),
                dec(util, 2),
                dec(kwh[i], 4),
                dec(power_c[i], 2),
                dec(cloud_c[i], 2),
                dec(total_c[i], 2),
                dec(share[i], 2),
            ]);
        }
        let util_all: i128 = self.rows.iter().map(|r| r.util_gpu_us as i128).sum();
        let total = vec![
            Cell::Str("total".into()),
            Cell::Null,
            dec(hours_total, 4),
            dec(round_ratio(util_all, share_basis, 2), 2),
            dec(kwh_total, 4),
            dec(power_total, 2),
            dec(cloud_total, 2),
            dec(total_total, 2),
            dec(share_total, 2),
        ];

        let rows_gpu_us: i64 = self.rows.iter().map(|r| r.gpu_us).sum();
        let rows_energy: i64 = self.rows.iter().map(|r| r.energy_mj).sum();
        let check = |ok: bool| if ok { "OK" } else { "MISMATCH" };
        let cluster_hours = round_ratio(self.cluster_gpu_us as i128, US_PER_HOUR, 4);
        let cluster_kwh = round_ratio(self.cluster_energy_mj as i128, MJ_PER_KWH, 4);
        let mut notes = vec![
            format!(
                "conservation: GPU-hours rows {} = cluster {} ({} GPU-us vs {}) {}; energy rows {} kWh = cluster {} kWh ({} mJ vs {}) {}",
                format_units(hours_total, 4),
                format_units(cluster_hours, 4),
                rows_gpu_us,
                self.cluster_gpu_us,
                check(self.gpu_us_conserved()),
                format_units(kwh_total, 4),
                format_units(cluster_kwh, 4),
                rows_energy,
                self.cluster_energy_mj,
                check(self.energy_conserved()),
            ),
            format!(
                "window {} to {}; {} GPUs, {} samples; total_cost = {} cost in {currency}; power at {} {currency}/kWh x PUE {}",
                self.window.start.to_rfc3339(),
                self.window.end.to_rfc3339(),
                self.cluster_gpus,
                self.cluster_rows,
                match config.pricing.basis {
                    CostBasis::Cloud => "cloud",
                    CostBasis::Power => "power",
                },
                config.pricing.power.price_per_kwh,
                config.pricing.power.pue,
            ),
        ];
        let unpriced: i64 = self.rows.iter().map(|r| r.unpriced_gpu_us).sum();
        if unpriced > 0 {
            notes.push(format!(
                "warning: {} GPU-hours ran on GPU models with no [[pricing.gpu]] entry and carry no cloud cost",
                format_units(round_ratio(unpriced as i128, US_PER_HOUR, 4), 4)
            ));
        }

        let mut meta = Map::new();
        meta.insert("window_start".into(), Value::String(self.window.start.to_rfc3339()));
        meta.insert("window_end".into(), Value::String(self.window.end.to_rfc3339()));
        meta.insert("currency".into(), Value::String(currency.clone()));
        let mut cons = Map::new();
        cons.insert("rows_gpu_us".into(), Value::from(rows_gpu_us));
        cons.insert("cluster_gpu_us".into(), Value::from(self.cluster_gpu_us));
        cons.insert("rows_energy_mj".into(), Value::from(rows_energy));
        cons.insert("cluster_energy_mj".into(), Value::from(self.cluster_energy_mj));
        cons.insert("gpu_hours_conserved".into(), Value::Bool(self.gpu_us_conserved()));
        cons.insert("energy_conserved".into(), Value::Bool(self.energy_conserved()));
        meta.insert("conservation".into(), Value::Object(cons));

        Report {
            name: "chargeback".into(),
            title: format!("GPU chargeback {}", self.window.label()),
            columns: ["namespace", "team", "gpu_hours", "avg_util_pct", "energy_kwh", "power_cost", "cloud_cost", "total_cost", "share_pct"]
                .map(String::from)
                .to_vec(),
            rows,
            total: Some(total),
            notes,
            meta,
        }
    }
}
