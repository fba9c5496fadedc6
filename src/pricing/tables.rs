//! The config's prices as Arrow tables: GPU (whole and MIG profile), CPU and memory list
//! prices with their validity, and the power tariff resolved onto the 15-minute grid. Money and
//! rates are exact decimals; the SQL joins these once (`queries/views/usage.sql`,
//! `queries/chargeback_grain.sql`).

use std::sync::Arc;

use arrow::array::{Decimal128Array, Float64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use chrono::NaiveDate;

use super::tariff::Tariff;
use crate::config::{Config, RatePrice};
use crate::domain::window::day_start_ms as day_ms;
use crate::lake::schema::{ts_array, ts_field};

type Result<T, E = String> = std::result::Result<T, E>;

/// Money and rates as exact decimals: DECIMAL(18, 6).
pub const PRICE_PRECISION: u8 = 18;
pub const PRICE_SCALE: i8 = 6;

fn to_decimal(v: f64) -> i128 {
    (v * 10f64.powi(PRICE_SCALE as i32)).round() as i128
}

/// The config's prices as tables, so every rollup is a join a finance user can read:
/// `gpu_prices`, `cpu_prices`, `memory_prices` (each row valid on `[effective_from,
/// effective_to)`, so a window spanning a change is priced piecewise), `tariff_bands` (as
/// configured) and `power_tariff` (the tariff resolved onto 15-minute UTC buckets over
/// `days`, the first and last day the lake holds GPU samples for).
pub fn price_tables(config: &Config, days: Option<(NaiveDate, NaiveDate)>) -> Result<Vec<(&'static str, RecordBatch)>> {
    let (bands, grid) = tariff_tables(config, days)?;
    Ok(vec![
        ("gpu_prices", gpu_prices(config)?),
        ("cpu_prices", rates("price_per_core_hour", &config.pricing.cpu)?),
        ("memory_prices", rates("price_per_gib_hour", &config.pricing.memory)?),
        ("tariff_bands", bands),
        ("power_tariff", grid),
    ])
}

/// The `effective_to` of the latest price: open-ended, but inside the nanosecond timestamp range
/// (year 2262) so that comparing it with a nanosecond bucket (`date_bin`) cannot overflow.
fn far_future() -> NaiveDate {
    NaiveDate::from_ymd_opt(2200, 1, 1).expect("valid date")
}

fn dec_array(values: Vec<Option<f64>>) -> Result<Decimal128Array> {
    Decimal128Array::from(values.into_iter().map(|v| v.map(to_decimal)).collect::<Vec<_>>())
        .with_precision_and_scale(PRICE_PRECISION, PRICE_SCALE)
        .map_err(|e| e.to_string())
}

fn dec_type() -> DataType {
    DataType::Decimal128(PRICE_PRECISION, PRICE_SCALE)
}

fn gpu_prices(config: &Config) -> Result<RecordBatch> {
    let mut gpu = config.pricing.gpu.clone();
    gpu.sort_by(|a, b| (&a.model, &a.mig_profile, a.effective_from).cmp(&(&b.model, &b.mig_profile, b.effective_from)));
    let (mut models, mut profiles, mut prices, mut slice, mut from, mut to) = (vec![], vec![], vec![], vec![], vec![], vec![]);
    for (i, p) in gpu.iter().enumerate() {
        let next = gpu
            .get(i + 1)
            .filter(|n| n.model == p.model && n.mig_profile == p.mig_profile)
            .map(|n| n.effective_from)
            .unwrap_or_else(far_future);
        models.push(p.model.clone());
        profiles.push(p.mig_profile.clone());
        prices.push(Some(p.price_per_hour));
        slice.push(p.mig_profile.as_deref().map_or(1.0, |m| crate::domain::mig::mig_share(m, &p.model)));
        from.push(day_ms(p.effective_from));
        to.push(day_ms(next));
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("model", DataType::Utf8, false),
        Field::new("mig_profile", DataType::Utf8, true),
        Field::new("price_per_hour", dec_type(), false),
        Field::new("slice_share", DataType::Float64, false),
        ts_field("effective_from"),
        ts_field("effective_to"),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(models)),
            Arc::new(StringArray::from(profiles)),
            Arc::new(dec_array(prices)?),
            Arc::new(Float64Array::from(slice)),
            Arc::new(ts_array(from)),
            Arc::new(ts_array(to)),
        ],
    )
    .map_err(|e| e.to_string())?;
    Ok(batch)
}

fn rates(column: &str, rates: &[RatePrice]) -> Result<RecordBatch> {
    let mut rates = rates.to_vec();
    rates.sort_by_key(|r| r.effective_from);
    let to: Vec<i64> = (0..rates.len()).map(|i| day_ms(rates.get(i + 1).map_or_else(far_future, |n| n.effective_from))).collect();
    let schema = Arc::new(Schema::new(vec![Field::new(column, dec_type(), false), ts_field("effective_from"), ts_field("effective_to")]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(dec_array(rates.iter().map(|r| Some(r.price_per_hour)).collect())?),
            Arc::new(ts_array(rates.iter().map(|r| day_ms(r.effective_from)).collect())),
            Arc::new(ts_array(to)),
        ],
    )
    .map_err(|e| e.to_string())?;
    Ok(batch)
}

fn tariff_tables(config: &Config, days: Option<(NaiveDate, NaiveDate)>) -> Result<(RecordBatch, RecordBatch)> {
    let p = &config.pricing.power;
    // The bands as configured, for people reading the tariff.
    let schema = Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("price_per_kwh", dec_type(), false),
        Field::new("hours", DataType::Utf8, false),
        Field::new("days", DataType::Utf8, false),
        Field::new("timezone", DataType::Utf8, false),
        Field::new("effective_from", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(p.tariff.iter().map(|b| b.name.clone()).collect::<Vec<_>>())),
            Arc::new(dec_array(p.tariff.iter().map(|b| Some(b.price_per_kwh)).collect())?),
            Arc::new(StringArray::from(p.tariff.iter().map(|b| b.hours.clone()).collect::<Vec<_>>())),
            Arc::new(StringArray::from(p.tariff.iter().map(|b| b.days.join(",")).collect::<Vec<_>>())),
            Arc::new(StringArray::from(vec![p.timezone.clone(); p.tariff.len()])),
            Arc::new(StringArray::from(p.tariff.iter().map(|b| b.effective_from.to_string()).collect::<Vec<_>>())),
        ],
    )
    .map_err(|e| e.to_string())?;
    let bands = batch;

    // The resolved grid over the days the lake holds GPU samples for.
    let tariff = Tariff::from_config(p)?;
    let grid = match days {
        Some((first, last)) => tariff.grid(day_ms(first), day_ms(last) + 86_400_000),
        None => Vec::new(),
    };
    let n = grid.len();
    let schema = Arc::new(Schema::new(vec![
        ts_field("bucket_start"),
        ts_field("bucket_end"),
        Field::new("band", DataType::Utf8, false),
        Field::new("price_per_kwh", dec_type(), false),
        Field::new("pue", dec_type(), false),
        Field::new("carbon_g_per_kwh", dec_type(), true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(ts_array(grid.iter().map(|(t, _)| *t).collect())),
            Arc::new(ts_array(grid.iter().map(|(t, _)| t + crate::domain::units::BUCKET_MS).collect())),
            Arc::new(StringArray::from(grid.iter().map(|(_, r)| r.band.clone()).collect::<Vec<_>>())),
            Arc::new(dec_array(grid.iter().map(|(_, r)| Some(r.price_per_kwh)).collect())?),
            Arc::new(dec_array(vec![Some(p.pue); n])?),
            Arc::new(dec_array(vec![p.carbon_g_per_kwh; n])?),
        ],
    )
    .map_err(|e| e.to_string())?;
    Ok((bands, batch))
}
