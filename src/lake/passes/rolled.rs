//! A window's sums of one rollup kind (`lake::rollup::Kind`): from each day's stored rollup
//! where it is current and the day's part of the window starts and ends on bucket edges, else
//! by one pass over the day's samples on every core (the same `DaySums` fold the writer ran).

use std::path::PathBuf;
use std::sync::Mutex;

use arrow::array::{RecordBatch, TimestampMillisecondArray};
use chrono::NaiveDate;

use crate::domain::window::Window;
use crate::lake::buckets::{BucketError, BUCKET_MS};
use crate::lake::day_sums::DaySums;
use crate::lake::intern::Interner;
use crate::lake::rollup::{self, Kind, Rollup};
use crate::lake::scan::{day_files, fold_files};
use crate::lake::Lake;

/// The result: the groups (per day, so a group never repeats), and where they came from.
pub struct Sums {
    pub batches: Vec<RecordBatch>,
    /// Source rows summed (read from the samples, or counted by the rollups).
    pub rows: u64,
    /// Days answered by their stored rollup.
    pub rollup_days: usize,
    /// Days whose samples were read: no current rollup, or a window edge inside a bucket.
    pub scanned_days: Vec<NaiveDate>,
}

const DAY_MS: i64 = 86_400_000;

/// Sums the rows of `kind`'s source table in `window` with `S`.
pub fn scan<S: DaySums>(lake: &Lake, kind: Kind, window: &Window, threads: usize) -> Result<Sums, BucketError> {
    let (first, last) = window.date_bounds();
    let (start_ms, end_ms) = (window.start.timestamp_millis(), window.end.timestamp_millis());
    let mut out = Sums { batches: Vec::new(), rows: 0, rollup_days: 0, scanned_days: Vec::new() };
    let mut raw: Vec<PathBuf> = Vec::new();
    // (day, its samples file, the day's part of the window) of days a rollup could answer.
    let mut candidates: Vec<(NaiveDate, PathBuf, i64, i64)> = Vec::new();
    for samples in day_files(lake, kind.source(), first, last)? {
        let date = date_of(&samples).ok_or_else(|| BucketError::NotADay { path: samples.display().to_string() })?;
        let day_ms = date.and_time(chrono::NaiveTime::MIN).and_utc().timestamp_millis();
        // The day's part of the window; a rollup answers it when both edges fall on bucket edges.
        let (from, to) = (start_ms.max(day_ms), end_ms.min(day_ms + DAY_MS));
        if from % BUCKET_MS != 0 || to % BUCKET_MS != 0 {
            out.scanned_days.push(date);
            raw.push(samples);
        } else {
            candidates.push((date, samples, from, to));
        }
    }
    for ((date, samples, from, to), rollup) in candidates.iter().zip(read_rollups(lake, kind, &candidates, threads)) {
        match rollup {
            Rollup::Current(batches) => {
                let day_ms = date.and_time(chrono::NaiveTime::MIN).and_utc().timestamp_millis();
                for batch in batches {
                    let batch = if *from == day_ms && *to == day_ms + DAY_MS { batch } else { buckets_between(&batch, *from, *to) };
                    out.rows += S::rows_of(&batch);
                    out.batches.push(batch);
                }
                out.rollup_days += 1;
                continue;
            }
            Rollup::Missing => {}
            Rollup::Stale(why) => tracing::warn!("not using the {} rollup of {date}, reading its samples: {why}", kind.name()),
        }
        out.scanned_days.push(*date);
        raw.push(samples.clone());
    }
    out.scanned_days.sort();
    if !raw.is_empty() {
        let strings = Mutex::new(Interner::default());
        let parts = fold_files(lake, &raw, S::COLUMNS, threads, S::default, |g: &mut S, path, b: RecordBatch| g.add(&strings, path, &b, start_ms, end_ms))?;
        out.rows += parts.iter().map(|g| g.rows()).sum::<u64>();
        out.batches.push(S::finish(&parts, &strings.into_inner().expect("interner lock")));
    }
    Ok(out)
}

/// The rollups of `days`, read on up to `threads` threads, in order.
fn read_rollups(lake: &Lake, kind: Kind, days: &[(NaiveDate, PathBuf, i64, i64)], threads: usize) -> Vec<Rollup> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Rollup>>> = days.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, days.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((date, samples, _, _)) = days.get(i) else { return };
                *slots[i].lock().expect("rollup slot") = Some(rollup::read_kind(lake, kind, *date, samples));
            });
        }
    });
    slots.into_iter().map(|s| s.into_inner().expect("rollup slot").expect("every day read")).collect()
}

/// The day of a day file, from its `date=` folder.
pub fn date_of(file: &std::path::Path) -> Option<NaiveDate> {
    let dir = file.parent()?.file_name()?.to_str()?;
    NaiveDate::parse_from_str(dir.strip_prefix("date=")?, "%Y-%m-%d").ok()
}

/// The rows of a rollup whose bucket starts in `[from, to)`.
fn buckets_between(batch: &RecordBatch, from: i64, to: i64) -> RecordBatch {
    let bucket = batch.column_by_name("bucket").and_then(|c| c.as_any().downcast_ref::<TimestampMillisecondArray>()).expect("rollup bucket column");
    let keep: arrow::array::BooleanArray = bucket.iter().map(|b| b.map(|b| b >= from && b < to)).collect();
    arrow::compute::filter_record_batch(batch, &keep).expect("filter matches the batch")
}
