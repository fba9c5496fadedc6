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

type Result<T, E = PricingError> = std::result::Result<T, E>;

/// A price table that could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PricingError {
    #[error("price table {table}")]
    Table { table: &'static str, source: arrow::error::ArrowError },
}

fn table_error(table: &'static str) -> impl FnOnce(arrow::error::ArrowError) -> PricingError {
    move |source| PricingError::Table { table, source }
}

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
        ("gpu_rates", gpu_rates(config)?),
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
        .map_err(table_error("prices"))
}

fn dec_type() -> DataType {
    DataType::Decimal128(PRICE_PRECISION, PRICE_SCALE)
}

fn gpu_prices(config: &Config) -> Result<RecordBatch> {
    let (mut models, mut profiles, mut prices, mut slice, mut from, mut to) = (vec![], vec![], vec![], vec![], vec![], vec![]);
    for p in price_spans(config) {
        models.push(p.model.to_string());
        profiles.push(p.mig_profile.map(str::to_string));
        prices.push(Some(p.price_per_hour));
        slice.push(p.mig_profile.map_or(1.0, |m| crate::domain::mig::mig_share(m, p.model)));
        from.push(day_ms(p.from));
        to.push(day_ms(p.to));
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
    .map_err(table_error("gpu_prices"))?;
    Ok(batch)
}

/// One configured price of a model (whole GPU or one MIG profile) on `[from, to)`.
struct PriceSpan<'a> {
    model: &'a str,
    mig_profile: Option<&'a str>,
    price_per_hour: f64,
    from: NaiveDate,
    to: NaiveDate,
}

/// The configured GPU prices as spans: each price holds until the next price of the same
/// model and profile.
fn price_spans(config: &Config) -> Vec<PriceSpan<'_>> {
    let mut gpu: Vec<_> = config.pricing.gpu.iter().collect();
    gpu.sort_by(|a, b| (&a.model, &a.mig_profile, a.effective_from).cmp(&(&b.model, &b.mig_profile, b.effective_from)));
    gpu.iter()
        .enumerate()
        .map(|(i, p)| PriceSpan {
            model: &p.model,
            mig_profile: p.mig_profile.as_deref(),
            price_per_hour: p.price_per_hour,
            from: p.effective_from,
            to: gpu.get(i + 1).filter(|n| n.model == p.model && n.mig_profile == p.mig_profile).map_or_else(far_future, |n| n.effective_from),
        })
        .collect()
}

/// `gpu_rates`: the one resolved GPU price table that every priced query joins once (the
/// chargeback's `queries/views/gpu_bucket_time.sql`, `queries/views/usage.sql`). A row prices
/// GPU rows of `model` on `[effective_from, effective_to)`:
/// - a MIG profile's own price (`mig_profile` set): per instance-hour, so the row's GPU time is
///   divided by `unit_share` (the profile's share of the GPU) before it is priced;
/// - the whole-GPU price (`mig_profile` NULL, `unit_share` 1): whole GPUs, and MIG slices of a
///   profile not in `own_price_profiles` (`,a,b,`: the profiles with their own price over the
///   whole row), which pay their share of the GPU price. Whole-GPU rows are cut where a
///   profile's price starts or ends, so that list holds over each row.
///
/// The join is `r.model = x.gpu_model AND x.ts in [effective_from, effective_to) AND
/// (r.mig_profile = x.mig_profile OR (r.mig_profile IS NULL AND strpos(r.own_price_profiles,
/// concat(',', x.mig_profile, ',')) = 0))`: at most one row matches. Since a profile has its
/// own row over a date exactly when the whole-GPU row of that date lists it, the same rate is
/// the profile's own row where one matches, else the whole-GPU row: two equality joins, as
/// `queries/chargeback_grain.sql` finds it.
fn gpu_rates(config: &Config) -> Result<RecordBatch> {
    let spans = price_spans(config);
    let mut rows: Vec<(&str, Option<&str>, f64, f64, NaiveDate, NaiveDate, Option<String>)> = Vec::new();
    for s in &spans {
        let Some(profile) = s.mig_profile else {
            // Cut the whole-GPU span where any of the model's profile prices starts or ends.
            let own: Vec<&PriceSpan> = spans.iter().filter(|o| o.model == s.model && o.mig_profile.is_some()).collect();
            let mut cuts: Vec<NaiveDate> = own.iter().flat_map(|o| [o.from, o.to]).filter(|d| *d > s.from && *d < s.to).collect();
            cuts.extend([s.from, s.to]);
            cuts.sort();
            cuts.dedup();
            for piece in cuts.windows(2) {
                let mut priced: Vec<&str> = own.iter().filter(|o| o.from <= piece[0] && piece[1] <= o.to).filter_map(|o| o.mig_profile).collect();
                priced.sort();
                priced.dedup();
                let list = if priced.is_empty() { ",".to_string() } else { format!(",{},", priced.join(",")) };
                rows.push((s.model, None, s.price_per_hour, 1.0, piece[0], piece[1], Some(list)));
            }
            continue;
        };
        rows.push((s.model, Some(profile), s.price_per_hour, crate::domain::mig::mig_share(profile, s.model), s.from, s.to, None));
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("model", DataType::Utf8, false),
        Field::new("mig_profile", DataType::Utf8, true),
        Field::new("price_per_hour", dec_type(), false),
        Field::new("unit_share", DataType::Float64, false),
        ts_field("effective_from"),
        ts_field("effective_to"),
        Field::new("own_price_profiles", DataType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
            Arc::new(StringArray::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
            Arc::new(dec_array(rows.iter().map(|r| Some(r.2)).collect())?),
            Arc::new(Float64Array::from(rows.iter().map(|r| r.3).collect::<Vec<_>>())),
            Arc::new(ts_array(rows.iter().map(|r| day_ms(r.4)).collect())),
            Arc::new(ts_array(rows.iter().map(|r| day_ms(r.5)).collect())),
            Arc::new(StringArray::from(rows.iter().map(|r| r.6.clone()).collect::<Vec<_>>())),
        ],
    )
    .map_err(table_error("gpu_rates"))?;
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
    .map_err(table_error("cpu_prices/memory_prices"))?;
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
    .map_err(table_error("power_tariff"))?;
    let bands = batch;

    // The resolved grid over the days the lake holds GPU samples for.
    let tariff = Tariff::from_config(p);
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
    .map_err(table_error("power_tariff"))?;
    Ok((bands, batch))
}

#[cfg(test)]
mod tests {
    use arrow::array::{Array, TimestampMillisecondArray};

    use super::*;
    use crate::config::GpuPrice;

    fn price(model: &str, profile: Option<&str>, per_hour: f64, from: &str) -> GpuPrice {
        GpuPrice { model: model.into(), mig_profile: profile.map(str::to_string), price_per_hour: per_hour, effective_from: from.parse().unwrap() }
    }

    /// (model, profile, price in millionths, unit share, from day, to day, own-price list) per row.
    fn rows(config: &Config) -> Vec<(String, Option<String>, i128, f64, String, String, Option<String>)> {
        let b = gpu_rates(config).unwrap();
        let s = |i: usize| b.column(i).as_any().downcast_ref::<StringArray>().unwrap().clone();
        let t = |i: usize| b.column(i).as_any().downcast_ref::<TimestampMillisecondArray>().unwrap().clone();
        let (model, profile, list, from, to) = (s(0), s(1), s(6), t(4), t(5));
        let price = b.column(2).as_any().downcast_ref::<Decimal128Array>().unwrap().clone();
        let unit = b.column(3).as_any().downcast_ref::<Float64Array>().unwrap().clone();
        let day = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap().date_naive().to_string();
        (0..b.num_rows())
            .map(|i| {
                let opt = |a: &StringArray| (!a.is_null(i)).then(|| a.value(i).to_string());
                (model.value(i).to_string(), opt(&profile), price.value(i), unit.value(i), day(from.value(i)), day(to.value(i)), opt(&list))
            })
            .collect()
    }

    #[test]
    fn whole_gpu_rates_are_cut_where_a_profile_price_starts_and_list_it() {
        let mut config = Config::default();
        config.pricing.gpu = vec![
            price("A100", None, 2.0, "2026-01-01"),
            price("A100", None, 3.0, "2026-01-20"),
            price("A100", Some("3g.40gb"), 1.25, "2026-01-10"),
            price("A100", Some("1g.10gb"), 0.5, "2026-01-10"),
            price("A100", Some("1g.10gb"), 0.75, "2026-01-15"),
            price("H100", None, 4.0, "2026-01-01"),
        ];
        let got = rows(&config);
        let own = Some(",1g.10gb,3g.40gb,".to_string());
        let whole = |p: i128, from: &str, to: &str, list: Option<String>| ("A100".to_string(), None, p, 1.0, from.to_string(), to.to_string(), list);
        let expected = vec![
            whole(2_000_000, "2026-01-01", "2026-01-10", Some(",".into())),
            whole(2_000_000, "2026-01-10", "2026-01-15", own.clone()),
            whole(2_000_000, "2026-01-15", "2026-01-20", own.clone()),
            whole(3_000_000, "2026-01-20", "2200-01-01", own.clone()),
            ("A100".into(), Some("1g.10gb".into()), 500_000, 1.0 / 7.0, "2026-01-10".into(), "2026-01-15".into(), None),
            ("A100".into(), Some("1g.10gb".into()), 750_000, 1.0 / 7.0, "2026-01-15".into(), "2200-01-01".into(), None),
            ("A100".into(), Some("3g.40gb".into()), 1_250_000, 3.0 / 7.0, "2026-01-10".into(), "2200-01-01".into(), None),
            ("H100".into(), None, 4_000_000, 1.0, "2026-01-01".into(), "2200-01-01".into(), Some(",".into())),
        ];
        let mut got_sorted = got.clone();
        got_sorted.sort_by(|a, b| (&a.0, &a.1, &a.4).cmp(&(&b.0, &b.1, &b.4)));
        assert_eq!(got_sorted, expected, "rows as built: {got:?}");
    }
}
