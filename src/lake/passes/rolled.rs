//! A window's sums of one rollup kind (`lake::rollup::Kind`): from each day's stored rollup
//! where it is current and the day's part of the window starts and ends on bucket edges, else
//! by one pass over the day's samples on every core (the same `DaySums` fold the writer ran).

use std::path::PathBuf;
use std::sync::Mutex;

use arrow::array::{RecordBatch, TimestampMillisecondArray};
use chrono::NaiveDate;

use crate::domain::window::Window;
use crate::lake::intern::Interner;
use crate::lake::rollup::DaySums;
use crate::lake::rollup::{self, Kind, Rollup};
use crate::lake::rollup::{BucketError, BUCKET_MS};
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

/// One day's part of a window: the day, its source file and the part `[from, to)` (ms).
#[derive(Debug, Clone)]
pub struct DayPart {
    pub date: NaiveDate,
    pub source: PathBuf,
    pub from: i64,
    pub to: i64,
}

impl DayPart {
    /// Whether a stored rollup can answer this part: both its edges fall on bucket edges.
    pub fn on_bucket_edges(&self) -> bool {
        self.from % BUCKET_MS == 0 && self.to % BUCKET_MS == 0
    }

    /// A rollup batch of the day cut to this part.
    fn cut(&self, batch: RecordBatch) -> RecordBatch {
        let day_ms = self.date.and_time(chrono::NaiveTime::MIN).and_utc().timestamp_millis();
        if self.from == day_ms && self.to == day_ms + DAY_MS {
            batch
        } else {
            buckets_between(&batch, self.from, self.to)
        }
    }
}

/// The days of `kind`'s source table in `window`, in date order.
pub fn day_parts(lake: &Lake, kind: Kind, window: &Window) -> Result<Vec<DayPart>, BucketError> {
    let (first, last) = window.date_bounds();
    let (start_ms, end_ms) = (window.start.timestamp_millis(), window.end.timestamp_millis());
    let mut parts = Vec::new();
    for source in day_files(lake, kind.source(), first, last)? {
        let date = date_of(&source).ok_or_else(|| BucketError::NotADay { path: source.display().to_string() })?;
        let day_ms = date.and_time(chrono::NaiveTime::MIN).and_utc().timestamp_millis();
        parts.push(DayPart { date, source, from: start_ms.max(day_ms), to: end_ms.min(day_ms + DAY_MS) });
    }
    Ok(parts)
}

/// One day's sums with `S`: its stored rollup where current (cut to the part), else one pass
/// over its samples. The batches, and whether they came from the rollup.
pub fn day_sums<S: DaySums>(lake: &Lake, kind: Kind, part: &DayPart) -> Result<(Vec<RecordBatch>, bool), BucketError> {
    if part.on_bucket_edges() {
        match rollup::read_kind(lake, kind, part.date, &part.source) {
            Rollup::Current(batches) => return Ok((batches.into_iter().map(|b| part.cut(b)).collect(), true)),
            Rollup::Missing => {}
            Rollup::Stale(why) => tracing::warn!("not using the {} rollup of {}, reading its samples: {why}", kind.name(), part.date),
        }
    }
    let strings = Mutex::new(Interner::default());
    let parts = fold_files(lake, std::slice::from_ref(&part.source), S::COLUMNS, 1, S::default, |g: &mut S, path, b: RecordBatch| {
        g.add(&strings, path, &b, part.from, part.to)
    })?;
    Ok((vec![S::finish(&parts, &strings.into_inner().expect("interner lock"))], false))
}

/// Sums the rows of `kind`'s source table in `window` with `S`.
pub fn scan<S: DaySums>(lake: &Lake, kind: Kind, window: &Window, threads: usize) -> Result<Sums, BucketError> {
    scan_parts::<S>(lake, kind, window, day_parts(lake, kind, window)?, threads)
}

/// `scan` over the window's days as `day_parts` listed them.
pub fn scan_parts<S: DaySums>(lake: &Lake, kind: Kind, window: &Window, parts: Vec<DayPart>, threads: usize) -> Result<Sums, BucketError> {
    let (start_ms, end_ms) = (window.start.timestamp_millis(), window.end.timestamp_millis());
    let mut out = Sums { batches: Vec::new(), rows: 0, rollup_days: 0, scanned_days: Vec::new() };
    let mut raw: Vec<PathBuf> = Vec::new();
    // Days a rollup could answer.
    let mut candidates: Vec<DayPart> = Vec::new();
    for part in parts {
        if part.on_bucket_edges() {
            candidates.push(part);
        } else {
            out.scanned_days.push(part.date);
            raw.push(part.source);
        }
    }
    for (part, rollup) in candidates.iter().zip(read_rollups(lake, kind, &candidates, threads)) {
        match rollup {
            Rollup::Current(batches) => {
                for batch in batches {
                    let batch = part.cut(batch);
                    out.rows += S::rows_of(&batch);
                    out.batches.push(batch);
                }
                out.rollup_days += 1;
                continue;
            }
            Rollup::Missing => {}
            Rollup::Stale(why) => tracing::warn!("not using the {} rollup of {}, reading its samples: {why}", kind.name(), part.date),
        }
        out.scanned_days.push(part.date);
        raw.push(part.source.clone());
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
fn read_rollups(lake: &Lake, kind: Kind, days: &[DayPart], threads: usize) -> Vec<Rollup> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Rollup>>> = days.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, days.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(part) = days.get(i) else { return };
                *slots[i].lock().expect("rollup slot") = Some(rollup::read_kind(lake, kind, part.date, &part.source));
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
