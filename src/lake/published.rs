//! What was published, day by day and file by file (`<lake>/_state/published.json`). A file is
//! published atomically, but a day is several files (one per table): a collect killed between
//! two of them leaves a day whose `gpu_samples` is new and whose `pods` is old or absent, which
//! a report would read as fewer pods (no CPU or memory cost, an empty queue) and bill without a
//! word. So a writer marks a day as being written before it replaces any of the day's files
//! ([`Published::begin`]) and records the day's files once all are written
//! ([`Published::record`]); every session checks the lake against the record before it reads a
//! row ([`Published::check`]), and names a day left unfinished, and a day file deleted,
//! replaced or left as a dangling link by hand, instead of reading it as less.
//!
//! A file is compared by its size (one listing per table, no read): a replacement by hand that
//! kept the size to the byte goes unseen, an unfinished rewrite never does (the mark). A lake
//! written before the record has none and is not checked; the first writer that records a day
//! records every day the lake holds then.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::PathBuf;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use super::layout::{DayFile, Lake};
use super::schema::Table;

/// The record's format; a record of another version is refused, not misread.
const VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum PublishedError {
    #[error("{path}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: not a record of published files (version {VERSION})")]
    Corrupt { path: PathBuf, source: serde_json::Error },
    #[error("{path}: record of published files version {found}, this gpuledger reads version {VERSION}")]
    Version { path: PathBuf, found: u32 },
    #[error("recording {path}")]
    Footer { path: PathBuf, source: super::store::FooterError },
}

/// One day file as it was published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    pub bytes: u64,
    pub rows: i64,
}

/// The record: per day, per table name, the file published.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Published {
    version: u32,
    days: BTreeMap<NaiveDate, DayRecord>,
}

/// One day of the record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct DayRecord {
    /// Per table name, the file published.
    files: BTreeMap<String, FileRecord>,
    /// A writer began the day and has not recorded it since: its files may be part old, part
    /// new, whatever their sizes say.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    writing: bool,
}

/// A day file that is not as it was published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub date: NaiveDate,
    pub table: &'static str,
    /// The file, or the link (the file's or its day folder's) that points nowhere.
    pub path: PathBuf,
    pub kind: FindingKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FindingKind {
    /// Published, and gone.
    Missing { was: FileRecord },
    /// Another file than the one published (a rewrite that did not finish its day, or a
    /// replacement by hand).
    Changed { was: FileRecord, bytes: u64 },
    /// A writer began the day and never finished it (`path` is the record).
    Unfinished,
    /// A file no writer recorded (a collect stopped before it finished the day, or a file
    /// copied in by hand).
    Unrecorded { bytes: u64 },
    /// A symbolic link (the file or its day folder) whose target is gone.
    Dangling,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.kind {
            FindingKind::Missing { was } => write!(f, "{path}: missing (published with {} rows, {} bytes)", was.rows, was.bytes),
            FindingKind::Changed { was, bytes } => write!(f, "{path}: {bytes} bytes, not the file published ({} rows, {} bytes)", was.rows, was.bytes),
            FindingKind::Unrecorded { bytes } => write!(f, "{path}: {bytes} bytes never recorded as published"),
            FindingKind::Dangling => write!(f, "{path}: a link to nothing"),
            FindingKind::Unfinished => {
                write!(f, "{}: a collect began writing the day and stopped before it finished (its files may be part old, part new)", self.date)
            }
        }
    }
}

impl Published {
    /// Where the record is: `<lake>/_state/published.json`.
    pub fn path(lake: &Lake) -> PathBuf {
        lake.state_dir().join("published.json")
    }

    /// The lake's record; None for a lake written before it (not checked).
    pub fn load(lake: &Lake) -> Result<Option<Published>, PublishedError> {
        let path = Self::path(lake);
        let bytes = match lake.read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(PublishedError::Io { path, source }),
        };
        let record: Published = serde_json::from_slice(&bytes).map_err(|source| PublishedError::Corrupt { path: path.clone(), source })?;
        if record.version != VERSION {
            return Err(PublishedError::Version { path, found: record.version });
        }
        Ok(Some(record))
    }

    fn save(&self, lake: &Lake) -> Result<(), PublishedError> {
        let path = Self::path(lake);
        let json = serde_json::to_vec_pretty(self).expect("the record serialises");
        lake.publish(&path, |out| out.write_all(&json)).map_err(|source| PublishedError::Io { path, source })
    }

    /// The lake's record, created where there is none with every day the lake holds now (a
    /// lake from before the record is taken as it is). A writer calls this before it writes
    /// a day, so that a day it leaves unfinished is one the record does not have.
    pub fn open(lake: &Lake) -> Result<Published, PublishedError> {
        if let Some(record) = Self::load(lake)? {
            return Ok(record);
        }
        let mut record = Published { version: VERSION, days: BTreeMap::new() };
        for date in lake_dates(lake)? {
            record.days.insert(date, DayRecord { files: Self::read_day(lake, date)?, writing: false });
        }
        record.save(lake)?;
        Ok(record)
    }

    /// Marks `date` as being written, before a writer replaces any of its files: until
    /// [`record`](Self::record) clears the mark, the day is named as unfinished whatever its
    /// files are.
    pub fn begin(lake: &Lake, date: NaiveDate) -> Result<(), PublishedError> {
        let mut record = Self::open(lake)?;
        record.days.entry(date).or_default().writing = true;
        record.save(lake)
    }

    /// A writer that failed (a full disk) before it replaced any of `date`'s files: the day is
    /// published as it was, its mark cleared. Where any of its files differs from its record
    /// (the writer got further), the mark stays and sessions keep naming the day.
    pub fn abandon(lake: &Lake, date: NaiveDate) -> Result<bool, PublishedError> {
        let mut record = Self::open(lake)?;
        let Some(day) = record.days.get_mut(&date).filter(|d| d.writing) else { return Ok(true) };
        day.writing = false;
        let untouched = record.check_days(lake, &std::collections::BTreeSet::from([date]))?.is_empty();
        if untouched {
            // A day no writer had published before leaves no entry.
            if record.days.get(&date).is_some_and(|d| d.files.is_empty()) {
                record.days.remove(&date);
            }
            record.save(lake)?;
        }
        Ok(untouched)
    }

    /// Records `dates` as the lake holds them now (after a writer has written all their files)
    /// and returns what that changed in the record: what was accepted in place of what was
    /// published.
    pub fn record(lake: &Lake, dates: impl IntoIterator<Item = NaiveDate>) -> Result<Vec<Finding>, PublishedError> {
        let mut record = Self::open(lake)?;
        let dates: std::collections::BTreeSet<NaiveDate> = dates.into_iter().collect();
        let before = record.check_days(lake, &dates)?;
        for &date in &dates {
            let files = Self::read_day(lake, date)?;
            if files.is_empty() {
                record.days.remove(&date);
            } else {
                record.days.insert(date, DayRecord { files, writing: false });
            }
        }
        record.save(lake)?;
        Ok(before)
    }

    /// Every day file of the lake that is not as its record says, in date order; none for a
    /// lake without a record.
    pub fn check(lake: &Lake) -> Result<Vec<Finding>, PublishedError> {
        match Self::load(lake)? {
            Some(record) => record.check_days(lake, &record.all_dates(lake)?),
            None => Ok(Vec::new()),
        }
    }

    /// The days of the record and of the lake's folders.
    fn all_dates(&self, lake: &Lake) -> Result<std::collections::BTreeSet<NaiveDate>, PublishedError> {
        let mut dates = lake_dates(lake)?;
        dates.extend(self.days.keys().copied());
        Ok(dates)
    }

    fn check_days(&self, lake: &Lake, dates: &std::collections::BTreeSet<NaiveDate>) -> Result<Vec<Finding>, PublishedError> {
        let mut findings: Vec<Finding> = dates
            .iter()
            .filter(|d| self.days.get(d).is_some_and(|r| r.writing))
            .map(|&date| Finding { date, table: "*", path: Self::path(lake), kind: FindingKind::Unfinished })
            .collect();
        for table in Table::ALL {
            let now = lake.day_files(table, dates).map_err(|source| PublishedError::Io { path: lake.table_dir(table), source })?;
            for &date in dates {
                let was = self.days.get(&date).and_then(|d| d.files.get(table.name())).copied();
                let file = lake.partition_file(table, date);
                let kind = match (was, now.get(&date)) {
                    (None, None) => continue,
                    (Some(was), None) => FindingKind::Missing { was },
                    (_, Some(DayFile::Dangling(link))) => {
                        findings.push(Finding { date, table: table.name(), path: link.clone(), kind: FindingKind::Dangling });
                        continue;
                    }
                    (Some(was), Some(DayFile::Bytes(bytes))) if was.bytes != *bytes => FindingKind::Changed { was, bytes: *bytes },
                    (Some(_), Some(DayFile::Bytes(_))) => continue,
                    (None, Some(DayFile::Bytes(bytes))) => FindingKind::Unrecorded { bytes: *bytes },
                };
                findings.push(Finding { date, table: table.name(), path: file, kind });
            }
        }
        findings.sort_by_key(|f| f.date);
        Ok(findings)
    }

    /// The day's files as they are: size, and rows from each footer.
    fn read_day(lake: &Lake, date: NaiveDate) -> Result<BTreeMap<String, FileRecord>, PublishedError> {
        let mut files = BTreeMap::new();
        for table in Table::ALL {
            let path = lake.partition_file(table, date);
            let dir = lake.partition_dir(table, date);
            if lake.existing(&dir, vec![path.clone()]).map_err(|source| PublishedError::Io { path: dir, source })?.is_empty() {
                continue;
            }
            let (meta, bytes) = lake.footer(&path).map_err(|source| PublishedError::Footer { path: path.clone(), source })?;
            files.insert(table.name().to_string(), FileRecord { bytes, rows: meta.file_metadata().num_rows() });
        }
        Ok(files)
    }
}

/// Every day any table of the lake has a folder for.
fn lake_dates(lake: &Lake) -> Result<std::collections::BTreeSet<NaiveDate>, PublishedError> {
    let mut dates = std::collections::BTreeSet::new();
    for table in Table::ALL {
        dates.extend(lake.dates(table).map_err(|source| PublishedError::Io { path: lake.table_dir(table), source })?);
    }
    Ok(dates)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lake::write_partition;

    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, d).unwrap()
    }

    fn write(lake: &Lake, table: Table, date: NaiveDate) {
        write_partition(lake, table, date, &arrow::array::RecordBatch::new_empty(table.schema())).unwrap();
    }

    fn quotas(lake: &Lake, date: NaiveDate, rows: usize) {
        use crate::lake::rows::{QuotaRow, QuotasBuilder};
        let mut b = QuotasBuilder::new();
        for i in 0..rows {
            b.push(&QuotaRow { ts: i as i64, namespace: "ns", resource: "requests.nvidia.com/gpu", hard: Some(8.0), used: Some(i as f64) });
        }
        write_partition(lake, Table::Quotas, date, &b.finish()).unwrap();
    }

    /// A lake without the record is not checked, and the first record takes the lake as it is.
    /// Then every way a day file can differ from what was published is named, and recording the
    /// day again accepts it and says what it accepted.
    #[test]
    fn every_day_file_not_as_published_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let lake = Lake::new(tmp.path());
        write(&lake, Table::Pods, day(1));
        quotas(&lake, day(1), 3);
        assert_eq!(Published::check(&lake).unwrap(), vec![]);
        assert!(Published::load(&lake).unwrap().is_none());
        Published::open(&lake).unwrap();
        assert_eq!(Published::check(&lake).unwrap(), vec![]);

        // Day 2 half-written (a collect killed between its files): never recorded.
        quotas(&lake, day(2), 1);
        let found = Published::check(&lake).unwrap();
        assert!(matches!(&found[..], [Finding { table: "quotas", kind: FindingKind::Unrecorded { .. }, .. }]), "{found:?}");
        assert!(Published::record(&lake, [day(2)]).unwrap().len() == 1);
        assert_eq!(Published::check(&lake).unwrap(), vec![]);

        // Day 1's quotas rewritten with other rows (the day's other files not yet), its pods deleted.
        quotas(&lake, day(1), 40);
        std::fs::remove_file(lake.partition_file(Table::Pods, day(1))).unwrap();
        let found = Published::check(&lake).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().any(|f| matches!(f, Finding { table: "pods", kind: FindingKind::Missing { was: FileRecord { rows: 0, .. } }, .. })), "{found:?}");
        assert!(
            found.iter().any(|f| matches!(f, Finding { table: "quotas", kind: FindingKind::Changed { was: FileRecord { rows: 3, .. }, .. }, .. })),
            "{found:?}"
        );
        let text: Vec<String> = found.iter().map(|f| f.to_string()).collect();
        assert!(
            text.iter().any(|t| t.ends_with(
                "pods/date=2026-11-01/pods-2026-11-01.parquet: missing (published with 0 rows, 1234 bytes)"
                    .replace("1234", &was_bytes(&found, "pods"))
                    .as_str()
            )),
            "{text:?}"
        );

        // A day file that is a link to nothing.
        let gaps = lake.partition_file(Table::Gaps, day(2));
        std::fs::create_dir_all(gaps.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("nowhere.parquet"), &gaps).unwrap();
        let found = Published::check(&lake).unwrap();
        assert!(found.iter().any(|f| f.table == "gaps" && f.kind == FindingKind::Dangling && f.path == gaps), "{found:?}");
        // A day folder that is a link to nothing.
        std::fs::create_dir_all(lake.table_dir(Table::NodeCapacity)).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("gone"), lake.partition_dir(Table::NodeCapacity, day(3))).unwrap();
        let found = Published::check(&lake).unwrap();
        assert!(
            found.iter().any(|f| f.table == "node_capacity" && f.kind == FindingKind::Dangling && f.path == lake.partition_dir(Table::NodeCapacity, day(3))),
            "{found:?}"
        );

        // Recording the days again accepts them as they are, and says what changed.
        std::fs::remove_file(&gaps).unwrap();
        std::fs::remove_file(lake.partition_dir(Table::NodeCapacity, day(3))).unwrap();
        let accepted = Published::record(&lake, [day(1), day(2), day(3)]).unwrap();
        assert_eq!(accepted.len(), 2, "{accepted:?}");
        assert_eq!(Published::check(&lake).unwrap(), vec![]);
        // A byte-identical rewrite is no finding.
        quotas(&lake, day(1), 40);
        assert_eq!(Published::check(&lake).unwrap(), vec![]);
        // Unless the writer stopped before it finished the day: begun, never recorded.
        Published::begin(&lake, day(1)).unwrap();
        quotas(&lake, day(1), 40);
        let found = Published::check(&lake).unwrap();
        assert!(matches!(&found[..], [Finding { kind: FindingKind::Unfinished, .. }]), "{found:?}");
        assert!(found[0].to_string().starts_with("2026-11-01: a collect began writing the day and stopped"), "{}", found[0]);
        Published::record(&lake, [day(1)]).unwrap();
        assert_eq!(Published::check(&lake).unwrap(), vec![]);
    }

    fn was_bytes(found: &[Finding], table: &str) -> String {
        found
            .iter()
            .find_map(|f| match f.kind {
                FindingKind::Missing { was } if f.table == table => Some(was.bytes.to_string()),
                _ => None,
            })
            .unwrap()
    }

    #[test]
    fn a_record_of_another_version_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let lake = Lake::new(tmp.path());
        std::fs::create_dir_all(lake.state_dir()).unwrap();
        std::fs::write(lake.state_dir().join("published.json"), r#"{"version": 9, "days": {}}"#).unwrap();
        assert!(matches!(Published::check(&lake), Err(PublishedError::Version { found: 9, .. })));
        std::fs::write(lake.state_dir().join("published.json"), "{").unwrap();
        assert!(matches!(Published::check(&lake), Err(PublishedError::Corrupt { .. })));
    }
}
