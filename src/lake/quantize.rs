//! The resolution the lake keeps GPU measurements at, applied by the writer to every
//! `gpu_samples` file whoever wrote the rows (collector, simulator, import).
//!
//! Full-precision floats of noisy gauges cost the lake most of its bytes (on a month of 1,024
//! GPUs, `energy_j` and `power_w` were 77% of `gpu_samples`) and carry nothing the sensors can
//! tell apart: NVML's power reading is accurate to about +-5 W, its energy counter counts
//! millijoules but a step's energy is thousands of joules, and DCGM reports framebuffer use in
//! whole MiB. So the lake keeps:
//! - `energy_j` to 1 J (a 30 s step of a 300 W GPU is 9,000 J, an idle MIG slice's a few hundred;
//!   at most 0.5 J per row, and not always random: a slice idling at a constant power rounds the
//!   same way every step. On the demo month the total moved from 12,647.5747 to 12,647.5744 kWh,
//!   0.002%, against the 0.5% accuracy target);
//! - `power_w` to 0.1 W;
//! - `mem_used_mib` / `mem_total_mib` to 1 MiB.
//!
//! Rounded values repeat, so Parquet's dictionary encoding catches them.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float32Type, Float64Type};
use arrow::error::ArrowError;

use super::schema::Table;

/// Energy is kept to this many joules.
pub const ENERGY_J_RESOLUTION: f64 = 1.0;
/// Power is kept to this many watts.
pub const POWER_W_RESOLUTION: f64 = 0.1;
/// Framebuffer sizes are kept to this many MiB.
pub const MEM_MIB_RESOLUTION: f64 = 1.0;

/// An energy (J) at the lake's resolution, as the writer stores it.
pub fn energy_j(v: f64) -> f64 {
    round_to(v, ENERGY_J_RESOLUTION)
}

fn round_to(v: f64, step: f64) -> f64 {
    if step == 1.0 {
        v.round()
    } else {
        // Divide by the step's inverse (an integer) so 0.1 W steps land on the nearest float.
        let inv = (1.0 / step).round();
        (v * inv).round() / inv
    }
}

fn column(batch: &RecordBatch, name: &str, step: f64) -> Result<Option<(usize, ArrayRef)>, ArrowError> {
    let Ok(idx) = batch.schema().index_of(name) else { return Ok(None) };
    let col = batch.column(idx);
    let rounded: ArrayRef = match col.data_type() {
        DataType::Float64 => Arc::new(col.as_primitive::<Float64Type>().unary::<_, Float64Type>(|v| round_to(v, step))),
        DataType::Float32 => Arc::new(col.as_primitive::<Float32Type>().unary::<_, Float32Type>(|v| round_to(v as f64, step) as f32)),
        other => return Err(ArrowError::SchemaError(format!("{name}: expected a float column, got {other}"))),
    };
    debug_assert_eq!(rounded.len(), col.len());
    Ok(Some((idx, rounded)))
}

/// `batch` with its measurements at the lake's resolution (only `gpu_samples` has any).
pub fn quantize(table: Table, batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    if table != Table::GpuSamples {
        return Ok(batch.clone());
    }
    let mut columns = batch.columns().to_vec();
    for (name, step) in [
        ("energy_j", ENERGY_J_RESOLUTION),
        ("counter_j", ENERGY_J_RESOLUTION),
        ("power_w", POWER_W_RESOLUTION),
        ("mem_used_mib", MEM_MIB_RESOLUTION),
        ("mem_total_mib", MEM_MIB_RESOLUTION),
    ] {
        if let Some((idx, rounded)) = column(batch, name, step)? {
            columns[idx] = rounded;
        }
    }
    RecordBatch::try_new(batch.schema(), columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float32Array, Float64Array};
    use arrow::datatypes::{Field, Schema};

    #[test]
    fn rounds_to_the_lake_resolution_and_keeps_nulls() {
        assert_eq!(round_to(8999.5, 1.0), 9000.0);
        assert_eq!(round_to(-0.4, 1.0), -0.0);
        assert_eq!(round_to(312.349, 0.1) as f32, 312.3f32);
        assert_eq!(round_to(312.35001, 0.1) as f32, 312.4f32);
        let schema = Arc::new(Schema::new(vec![
            Field::new("energy_j", DataType::Float64, true),
            Field::new("power_w", DataType::Float32, true),
            Field::new("util_pct", DataType::Float32, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Float64Array::from(vec![Some(1234.567), None])),
                Arc::new(Float32Array::from(vec![Some(299.96), Some(0.04)])),
                Arc::new(Float32Array::from(vec![Some(37.123), None])),
            ],
        )
        .unwrap();
        let q = quantize(Table::GpuSamples, &batch).unwrap();
        let e = q.column(0).as_primitive::<Float64Type>();
        assert_eq!((e.value(0), e.is_null(1)), (1235.0, true));
        let p = q.column(1).as_primitive::<Float32Type>();
        assert_eq!((p.value(0), p.value(1)), (300.0, 0.0));
        assert_eq!(q.column(2).as_primitive::<Float32Type>().value(0), 37.123f32, "utilisation is kept as measured");
        // Other tables are written as given.
        assert_eq!(quantize(Table::NodeCapacity, &batch).unwrap().column(0).as_primitive::<Float64Type>().value(0), 1234.567);
    }
}
