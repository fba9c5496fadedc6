//! Step 1's bucket rows merged, before they are priced, across the buckets of a UTC day that the
//! power tariff prices alike.
//!
//! `queries/chargeback_grain.sql` joins each 15-minute bucket row to its `power_tariff` row and
//! then sums the rows per day and per everything the price depends on (the tariff row's values,
//! share and step). A month of 1,024 GPUs is 826,020 bucket rows, but a flat tariff has one
//! rate a day, and a time-of-use tariff a few: the SQL's join and its first sum spent most of
//! step 1 on rows that end up in ~15,000 groups. Here each bucket is replaced by the first
//! bucket of its UTC day whose tariff row holds the same values (its class), and rows that then
//! share every key are summed: the SQL sees one row per class where it saw one per bucket, joins
//! the class's first bucket to the same tariff values, and sums the same integers into the same
//! groups, so the grain is the same to the unit. GPU prices change only at UTC midnights, so the
//! day's earliest bucket (the SQL's `at`) stays in the day and finds the same rate.
//!
//! Used only with the built-in `chargeback_grain.sql` and `cluster_totals.sql` (an override
//! may read the bucket itself), and only where the tariff has one row per bucket.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, TimestampMillisecondArray, UInt32Array};
use arrow::datatypes::{Int32Type, Int64Type, TimestampMillisecondType};
use arrow::error::ArrowError;
use arrow::util::display::array_value_to_string;
use datafusion::prelude::SessionContext;

use crate::domain::units::BUCKET_MS;

const DAY_MS: i64 = 86_400_000;
/// The tariff table's columns that place a row rather than price it.
const PLACE_COLUMNS: [&str; 2] = ["bucket_start", "bucket_end"];

/// Each tariff bucket's class: the first bucket of its UTC day with the same tariff values.
#[derive(Debug, Default)]
pub struct TariffClasses {
    /// The first bucket of the grid.
    from: i64,
    /// Per bucket of the grid from `from` on, in order: the first bucket of its day priced
    /// alike, or `None` where the tariff has no row for it.
    first_alike: Vec<Option<i64>>,
    /// Distinct (day, values) classes.
    pub classes: usize,
}

impl TariffClasses {
    /// The classes of the session's `power_tariff` rows; `None` where the session has no such
    /// table, or it is not one row per bucket (then the rows are priced one bucket at a time).
    pub async fn of_session(ctx: &SessionContext) -> Option<TariffClasses> {
        let batches = ctx.table("power_tariff").await.ok()?.collect().await.ok()?;
        TariffClasses::from_batches(&batches)
    }

    fn from_batches(batches: &[RecordBatch]) -> Option<TariffClasses> {
        let mut rows: Vec<(i64, String)> = Vec::new();
        for b in batches {
            let start = b.column_by_name("bucket_start")?.as_primitive_opt::<TimestampMillisecondType>()?;
            let values: Vec<&ArrayRef> =
                b.schema().fields().iter().zip(b.columns()).filter(|(f, _)| !PLACE_COLUMNS.contains(&f.name().as_str())).map(|(_, c)| c).collect();
            for i in 0..b.num_rows() {
                if start.is_null(i) || start.value(i) % BUCKET_MS != 0 {
                    return None;
                }
                let mut class = String::new();
                for c in &values {
                    // Null and the text "NULL" differ: the validity goes in first.
                    class.push(if c.is_valid(i) { 'v' } else { 'n' });
                    class.push_str(&array_value_to_string(c, i).ok()?);
                    class.push('\u{1f}');
                }
                rows.push((start.value(i), class));
            }
        }
        rows.sort();
        if rows.windows(2).any(|w| w[0].0 == w[1].0) {
            return None;
        }
        let from = rows.first().map_or(0, |r| r.0);
        let slot = |bucket: i64| ((bucket - from) / BUCKET_MS) as usize;
        let mut first: HashMap<(i64, &str), i64> = HashMap::new();
        let mut first_alike = vec![None; rows.last().map_or(0, |r| slot(r.0) + 1)];
        for (bucket, class) in &rows {
            let rep = *first.entry((bucket.div_euclid(DAY_MS), class.as_str())).or_insert(*bucket);
            first_alike[slot(*bucket)] = Some(rep);
        }
        Some(TariffClasses { from, first_alike, classes: first.len() })
    }

    /// The first bucket of `bucket`'s day priced like it (itself where the tariff has no row).
    fn class_of(&self, bucket: i64) -> i64 {
        if bucket < self.from || (bucket - self.from) % BUCKET_MS != 0 {
            return bucket;
        }
        self.first_alike.get(((bucket - self.from) / BUCKET_MS) as usize).copied().flatten().unwrap_or(bucket)
    }

    /// The rows of `batch` (the `gpu_buckets` schema) with each bucket replaced by its class,
    /// and rows then equal on every key summed; rows in the order their group first appears.
    pub fn merge(&self, batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
        let col = |name: &str| batch.column_by_name(name).ok_or_else(|| ArrowError::SchemaError(format!("gpu_buckets without {name}")));
        let labels = ["cluster", "namespace", "node", "gpu_model", "mig_profile"].map(|name| {
            col(name).and_then(|c| {
                c.as_dictionary_opt::<Int32Type>().map(|d| d.keys().clone()).ok_or_else(|| ArrowError::SchemaError(format!("{name} is not a label")))
            })
        });
        let [cluster, ns, node, model, profile] = labels;
        let (cluster, ns, node, model, profile) = (cluster?, ns?, node?, model?, profile?);
        let bucket =
            col("bucket")?.as_primitive_opt::<TimestampMillisecondType>().ok_or_else(|| ArrowError::SchemaError("bucket is not a timestamp".into()))?;
        let share = col("share")?.as_primitive_opt::<arrow::datatypes::Float64Type>().ok_or_else(|| ArrowError::SchemaError("share is not a float".into()))?;
        let step = col("step_s")?.as_primitive_opt::<Int32Type>().ok_or_else(|| ArrowError::SchemaError("step_s is not an int".into()))?;
        let sum_names = ["n", "energy_mj", "util_gpu_us", "util_n"];
        let sums_in: Vec<&Int64Array> = sum_names
            .iter()
            .map(|name| col(name).and_then(|c| c.as_primitive_opt::<Int64Type>().ok_or_else(|| ArrowError::SchemaError(format!("{name} is not an int")))))
            .collect::<Result<_, _>>()?;
        let key_of = |k: &arrow::array::Int32Array, i: usize| if k.is_valid(i) { k.value(i) } else { -1 };

        let mut firsts: Vec<u32> = Vec::new();
        let mut classes: Vec<i64> = Vec::new();
        let mut sums: Vec<[i64; 4]> = Vec::new();
        // Rows come sorted by labels and then bucket, so a label set's rows of the day follow
        // one another: its groups (a few: one per class, share and step) are searched while its
        // rows last, and closed when the labels change. Rows out of that order only make more
        // groups, which the SQL sums anyway.
        let mut labels: Option<[i32; 5]> = None;
        let mut open: Vec<(i64, u64, i32, usize)> = Vec::new();
        for i in 0..batch.num_rows() {
            let row_labels = [key_of(&cluster, i), key_of(&ns, i), key_of(&node, i), key_of(&model, i), key_of(&profile, i)];
            if labels != Some(row_labels) {
                labels = Some(row_labels);
                open.clear();
            }
            let (class, share_bits, step_s) = (self.class_of(bucket.value(i)), share.value(i).to_bits(), step.value(i));
            let at = match open.iter().find(|g| g.0 == class && g.1 == share_bits && g.2 == step_s) {
                Some(g) => g.3,
                None => {
                    firsts.push(i as u32);
                    classes.push(class);
                    sums.push([0; 4]);
                    open.push((class, share_bits, step_s, sums.len() - 1));
                    sums.len() - 1
                }
            };
            for (s, a) in sums[at].iter_mut().zip(&sums_in) {
                *s += a.value(i);
            }
        }
        let take = UInt32Array::from(firsts);
        let schema = batch.schema();
        let columns = schema
            .fields()
            .iter()
            .zip(batch.columns())
            .map(|(f, c)| -> Result<ArrayRef, ArrowError> {
                Ok(match f.name().as_str() {
                    "bucket" => Arc::new(TimestampMillisecondArray::from(classes.clone()).with_timezone("UTC")),
                    name => match sum_names.iter().position(|s| *s == name) {
                        Some(j) => Arc::new(sums.iter().map(|s| s[j]).collect::<Int64Array>()),
                        None => arrow::compute::take(c, &take, None)?,
                    },
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        RecordBatch::try_new(schema, columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Decimal128Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    fn tariff(rows: &[(i64, &str, i128)]) -> RecordBatch {
        let ts = |v: Vec<i64>| Arc::new(TimestampMillisecondArray::from(v).with_timezone("UTC")) as ArrayRef;
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("bucket_start", crate::lake::schema::ts_type(), false),
                Field::new("bucket_end", crate::lake::schema::ts_type(), false),
                Field::new("band", DataType::Utf8, false),
                Field::new("price_per_kwh", DataType::Decimal128(18, 6), false),
            ])),
            vec![
                ts(rows.iter().map(|r| r.0).collect()),
                ts(rows.iter().map(|r| r.0 + BUCKET_MS).collect()),
                Arc::new(StringArray::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
                Arc::new(Decimal128Array::from(rows.iter().map(|r| r.2).collect::<Vec<_>>()).with_precision_and_scale(18, 6).unwrap()),
            ],
        )
        .unwrap()
    }

    #[test]
    fn a_bucket_joins_the_first_of_its_day_with_the_same_band_and_price() {
        let b = |q: i64| q * BUCKET_MS;
        let day = DAY_MS;
        // Day 0: off-peak, peak, off-peak again, and a band of the same price but another name.
        let t = TariffClasses::from_batches(&[tariff(&[
            (b(0), "off", 100),
            (b(1), "peak", 300),
            (b(2), "off", 100),
            (b(3), "shoulder", 100),
            (day, "off", 100),
            (day + b(1), "off", 100),
        ])])
        .unwrap();
        assert_eq!([b(0), b(1), b(0), b(3)].to_vec(), (0..4).map(|q| t.class_of(b(q))).collect::<Vec<_>>());
        // The next day's buckets never join the day before's.
        assert_eq!((day, day), (t.class_of(day), t.class_of(day + b(1))));
        // A bucket with no tariff row stays itself.
        assert_eq!(b(7), t.class_of(b(7)));
        assert_eq!(4, t.classes);
    }

    #[test]
    fn a_tariff_with_two_rows_for_a_bucket_is_not_merged() {
        assert!(TariffClasses::from_batches(&[tariff(&[(0, "off", 100), (0, "peak", 300)])]).is_none());
    }

    #[test]
    fn merged_rows_keep_every_sum_and_key() {
        use arrow::array::{Date32Array, DictionaryArray, Float64Array, Int32Array};
        let t = TariffClasses::from_batches(&[tariff(&[(0, "off", 100), (BUCKET_MS, "peak", 300), (2 * BUCKET_MS, "off", 100)])]).unwrap();
        let names: ArrayRef = Arc::new(StringArray::from(vec!["c", "ns-a", "ns-b", "n1", "H100"]));
        let label = |keys: Vec<Option<i32>>| Arc::new(DictionaryArray::<Int32Type>::try_new(Int32Array::from(keys), Arc::clone(&names)).unwrap()) as ArrayRef;
        // Rows: ns-a at buckets 0, 1, 2 (share 1); ns-a at 2 with share 0.5; no pod at 0 and 2.
        let rows = 6;
        let batch = RecordBatch::try_new(
            crate::lake::rollup::gpu_buckets::schema(),
            vec![
                label(vec![Some(0); rows]),
                label(vec![Some(1), Some(1), Some(1), Some(1), None, None]),
                label(vec![Some(3); rows]),
                label(vec![Some(4); rows]),
                label(vec![None; rows]),
                Arc::new(TimestampMillisecondArray::from(vec![0, BUCKET_MS, 2 * BUCKET_MS, 2 * BUCKET_MS, 0, 2 * BUCKET_MS]).with_timezone("UTC")),
                Arc::new(Date32Array::from(vec![0; rows])),
                Arc::new(Float64Array::from(vec![1.0, 1.0, 1.0, 0.5, 1.0, 1.0])),
                Arc::new(Int32Array::from(vec![30; rows])),
                Arc::new(Int64Array::from(vec![30, 30, 30, 30, 30, 30])),
                Arc::new(Int64Array::from(vec![1, 2, 4, 8, 16, 32])),
                Arc::new(Int64Array::from(vec![100, 200, 400, 800, 1600, 3200])),
                Arc::new(Int64Array::from(vec![30, 29, 28, 27, 26, 25])),
            ],
        )
        .unwrap();
        let m = t.merge(&batch).unwrap();
        // ns-a off-peak (0 + 2), ns-a peak (1), ns-a share 0.5 (2), no pod off-peak (0 + 2).
        assert_eq!(4, m.num_rows());
        let ints = |name: &str| m.column_by_name(name).unwrap().as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(vec![5, 2, 8, 48], ints("energy_mj"));
        assert_eq!(vec![60, 30, 30, 60], ints("n"));
        assert_eq!(vec![500, 200, 800, 4800], ints("util_gpu_us"));
        assert_eq!(vec![58, 29, 27, 51], ints("util_n"));
        let buckets = m.column_by_name("bucket").unwrap().as_primitive::<TimestampMillisecondType>().values().to_vec();
        assert_eq!(vec![0, BUCKET_MS, 0, 0], buckets);
        let ns = m.column_by_name("namespace").unwrap().as_dictionary::<Int32Type>().keys().clone();
        assert_eq!(vec![Some(1), Some(1), Some(1), None], ns.iter().collect::<Vec<_>>());
        // The totals a conservation line reads are unchanged.
        let total = |b: &RecordBatch, name: &str| b.column_by_name(name).unwrap().as_primitive::<Int64Type>().values().iter().sum::<i64>();
        for name in ["n", "energy_mj", "util_gpu_us", "util_n"] {
            assert_eq!(total(&batch, name), total(&m, name), "{name}");
        }
        // Out of label order (ns-a, none, ns-a, ...), rows still merge within each run, keep
        // every sum, and only make more groups.
        let shuffled = arrow::compute::take_record_batch(&batch, &UInt32Array::from(vec![0, 4, 2, 1, 5, 3])).unwrap();
        let m = t.merge(&shuffled).unwrap();
        assert_eq!(6, m.num_rows());
        for name in ["n", "energy_mj", "util_gpu_us", "util_n"] {
            assert_eq!(total(&batch, name), total(&m, name), "{name}");
        }
    }
}
