//! What a run checks before it writes: the lake's rows a re-collect must not shrink, and a
//! window Prometheus no longer keeps.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, TimestampMillisecondType};
use chrono::NaiveDate;

use super::error::{CollectError, Result};
use super::prometheus::{fmt_ms, PromClient};
use crate::domain::units::UNMEASURED;
use crate::lake::{Lake, Table};

/// Measured GPU rows of a day's part of the window, and how many carry each metric: what a
/// re-collect must not shrink.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Held {
    pub(super) rows: u64,
    pub(super) util: u64,
    pub(super) memory: u64,
    pub(super) energy: u64,
}

impl Held {
    pub(super) fn add(&mut self, b: &RecordBatch, w0: i64, w1: i64) {
        let ts = b.column_by_name("ts").expect("ts").as_primitive::<TimestampMillisecondType>();
        let ns = arrow::compute::cast(b.column_by_name("namespace").expect("namespace"), &DataType::Utf8).expect("cast to utf8");
        let ns = ns.as_string::<i32>();
        let (util, mem, energy) =
            (b.column_by_name("util_pct").expect("util"), b.column_by_name("mem_used_mib").expect("mem"), b.column_by_name("energy_j").expect("energy"));
        for i in 0..b.num_rows() {
            let t = ts.value(i);
            if t < w0 || t >= w1 || (ns.is_valid(i) && ns.value(i) == UNMEASURED) {
                continue;
            }
            self.rows += 1;
            self.util += u64::from(util.is_valid(i));
            self.memory += u64::from(mem.is_valid(i));
            self.energy += u64::from(energy.is_valid(i));
        }
    }

    /// What `new` lacks of `self`, as words; None when nothing.
    pub(super) fn lost_in(&self, new: &Held) -> Option<String> {
        let parts: Vec<String> = [
            ("GPU rows", self.rows, new.rows),
            ("utilisation values", self.util, new.util),
            ("memory values", self.memory, new.memory),
            ("energy values", self.energy, new.energy),
        ]
        .iter()
        .filter(|(_, old, new)| new < old)
        .map(|(what, old, new)| format!("{what} {old} -> {new}"))
        .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// The measured rows the lake holds for `date` within `[w0, w1)` (nothing where no file).
pub(super) fn held_in_lake(lake: &Lake, date: NaiveDate, w0: i64, w1: i64) -> Result<Held> {
    let mut held = Held::default();
    let columns = ["ts", "namespace", "util_pct", "mem_used_mib", "energy_j"];
    let scan = crate::lake::scan::OrderedScan::start(lake, Table::GpuSamples, date, date, &columns).map_err(|e| CollectError::Merge {
        table: Table::GpuSamples.name(),
        date,
        source: e.into(),
    })?;
    for batch in scan {
        let (_, b) = batch.map_err(|e| CollectError::Merge { table: Table::GpuSamples.name(), date, source: e.into() })?;
        held.add(&b, w0, w1);
    }
    Ok(held)
}

/// The rows of `table` (one with a `ts` column) the lake holds for `date` within `[w0, w1)`.
pub(super) fn rows_in_lake(lake: &Lake, table: Table, date: NaiveDate, w0: i64, w1: i64) -> Result<u64> {
    let err = |e: crate::lake::scan::ScanError| CollectError::Merge { table: table.name(), date, source: e.into() };
    let mut rows = 0;
    for batch in crate::lake::scan::OrderedScan::start(lake, table, date, date, &["ts"]).map_err(err)? {
        let (_, b) = batch.map_err(err)?;
        let ts = b.column_by_name("ts").expect("ts").as_primitive::<TimestampMillisecondType>();
        rows += ts.iter().flatten().filter(|t| (w0..w1).contains(t)).count() as u64;
    }
    Ok(rows)
}

/// A window that starts before the server's retention horizon (now minus its
/// `storageRetention`) is refused before anything is fetched: what the server has dropped would
/// come back as nothing, and the lake is then the only copy. Servers that do not state a
/// retention (Thanos Query, Mimir) are not asked twice; the loss guard still holds there.
pub(super) async fn refuse_beyond_retention(client: &PromClient, from: i64, to: i64, step: i64, now_ms: i64) -> Result<()> {
    let Some((keep, text)) = client.retention().await else {
        return Ok(());
    };
    let horizon = now_ms - keep.as_millis().min(i64::MAX as u128) as i64;
    if from >= horizon {
        return Ok(());
    }
    // The first step boundary after the horizon, so the suggested window is on the lake grid.
    let next = horizon.div_euclid(step) * step + step;
    Err(CollectError::BeyondRetention {
        window: format!("{} to {}", fmt_ms(from), fmt_ms(to)),
        server: client.display_base().to_string(),
        retention: text,
        horizon: fmt_ms(horizon),
        next: fmt_ms(next),
    })
}
