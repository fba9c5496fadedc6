//! Where lake files live: `<lake>/<table>/date=YYYY-MM-DD/<table>-YYYY-MM-DD.parquet`.
//!
//! One file per table and day, with a name derived from the day alone, so rewriting a day
//! replaces it through one atomic rename and can never leave two copies of a row.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use super::backend::Store;
use super::schema::Table;

/// Suffix of files being written; a crash leaves only these behind and they are never read.
pub const TEMP_SUFFIX: &str = ".parquet.tmp";
/// The rollups' root folder under the lake root (`lake::rollup`: a folder per kind under it).
pub const ROLLUP_ROOT: &str = "_rollups";

/// A day's file of a table as [`Lake::day_files`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DayFile {
    /// Its size in bytes.
    Bytes(u64),
    /// A symbolic link (the file or its day folder) whose target is gone.
    Dangling(PathBuf),
}

#[derive(Debug, Clone)]
pub struct Lake {
    root: PathBuf,
    store: Store,
}

impl Lake {
    /// A lake in a local folder.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Lake { root: root.into(), store: Store::Local }
    }

    #[cfg_attr(not(feature = "s3"), allow(dead_code))]
    pub(crate) fn with_store(root: PathBuf, store: Store) -> Self {
        Lake { root, store }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The lake's own state (`<lake>/_state/`): the collector's checkpoints and lock, and the
    /// record of what was published (`published`).
    pub fn state_dir(&self) -> PathBuf {
        self.root.join("_state")
    }

    pub fn table_dir(&self, table: Table) -> PathBuf {
        self.root.join(table.name())
    }

    pub fn partition_dir(&self, table: Table, date: NaiveDate) -> PathBuf {
        self.table_dir(table).join(format!("date={}", date.format("%Y-%m-%d")))
    }

    pub fn partition_file(&self, table: Table, date: NaiveDate) -> PathBuf {
        self.partition_dir(table, date).join(format!("{}-{}.parquet", table.name(), date.format("%Y-%m-%d")))
    }

    /// The days a table holds, sorted (directory listings are unordered).
    pub fn dates(&self, table: Table) -> io::Result<Vec<NaiveDate>> {
        let mut dates = Vec::new();
        for name in self.list(&self.table_dir(table))? {
            if let Some(d) = name.strip_prefix("date=") {
                if let Ok(date) = NaiveDate::parse_from_str(d, "%Y-%m-%d") {
                    dates.push(date);
                }
            }
        }
        dates.sort();
        Ok(dates)
    }

    /// The file of `table` for each of `dates` as it is now: its size, or the link that points
    /// nowhere (the file, or the day's folder, a symbolic link whose target is gone); a day
    /// without its file is not in the map. Locally each day is looked up; on S3 the table is
    /// one listing.
    pub fn day_files(&self, table: Table, dates: &BTreeSet<NaiveDate>) -> io::Result<BTreeMap<NaiveDate, DayFile>> {
        let mut out = BTreeMap::new();
        match self.store() {
            Store::Local => {
                for &date in dates {
                    let (dir, file) = (self.partition_dir(table, date), self.partition_file(table, date));
                    let dangling = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()) && std::fs::metadata(p).is_err();
                    if dangling(&dir) {
                        out.insert(date, DayFile::Dangling(dir));
                    } else if dangling(&file) {
                        out.insert(date, DayFile::Dangling(file));
                    } else if let Ok(m) = std::fs::metadata(&file) {
                        out.insert(date, DayFile::Bytes(m.len()));
                    }
                }
            }
            #[cfg(feature = "s3")]
            Store::S3(s) => {
                let dir = self.table_dir(table);
                for (rel, size) in s.list_sizes(self.rel(&dir)?)? {
                    let path = dir.join(&rel);
                    let date = rel
                        .iter()
                        .next()
                        .and_then(|d| d.to_str())
                        .and_then(|d| d.strip_prefix("date="))
                        .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok());
                    if let Some(date) = date.filter(|d| dates.contains(d) && path == self.partition_file(table, *d)) {
                        out.insert(date, DayFile::Bytes(size));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Removes temp files left by a writer that was killed; returns how many it removed (none on
    /// object storage, where a file is one PUT and a killed writer leaves nothing).
    pub fn clean_orphans(&self) -> io::Result<usize> {
        let mut dirs = Vec::new();
        for table in Table::ALL {
            dirs.extend(self.dates(table)?.into_iter().map(|d| self.partition_dir(table, d)));
        }
        let rollups = self.root().join(ROLLUP_ROOT);
        for kind in self.list(&rollups)? {
            let kind = rollups.join(kind);
            match self.list(&kind) {
                Ok(days) => dirs.extend(days.into_iter().map(|name| kind.join(name))),
                // A stray file beside the kinds' folders.
                Err(e) if e.kind() == io::ErrorKind::NotADirectory => {}
                Err(e) => return Err(e),
            }
        }
        let mut removed = 0;
        for dir in dirs {
            for name in self.list(&dir)? {
                if name.ends_with(TEMP_SUFFIX) && self.remove(&dir.join(name))? {
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    /// Parquet files under the table's folder that gpuledger did not write (any name or place
    /// other than `date=YYYY-MM-DD/<table>-YYYY-MM-DD.parquet`): a query would read them as the
    /// table's rows. Locally each day folder is listed; on S3 the table in one listing.
    pub fn stray_files(&self, table: Table) -> io::Result<Vec<PathBuf>> {
        let dir = self.table_dir(table);
        let all: Vec<PathBuf> = match self.store() {
            Store::Local => {
                let mut out = Vec::new();
                for name in self.list(&dir)? {
                    let sub = dir.join(&name);
                    if sub.is_dir() {
                        out.extend(self.list(&sub)?.into_iter().map(|n| sub.join(n)));
                    } else {
                        out.push(sub);
                    }
                }
                out
            }
            #[cfg(feature = "s3")]
            Store::S3(s) => s.list_files(self.rel(&dir)?)?.into_iter().map(|p| dir.join(p)).collect(),
        };
        Ok(all
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
            .filter(|p| {
                let date = p.parent().and_then(|d| d.file_name()).and_then(|d| d.to_str()).and_then(|d| d.strip_prefix("date="));
                let date = date.and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok());
                date.is_none_or(|d| *p != self.partition_file(table, d))
            })
            .collect())
    }

    /// The first published file of the lake whose Parquet footer cannot be read, or whose
    /// columns are not its table's (another table's file under this one's name), with why: what
    /// a query that failed reading the lake read (DataFusion's message does not name it).
    pub fn unreadable_file(&self) -> Option<String> {
        for table in Table::ALL {
            let schema = table.schema();
            for path in self.files(table).ok()? {
                let (meta, _) = match self.footer(&path) {
                    Ok(m) => m,
                    Err(e) => return Some(crate::error_chain::chain(&e)),
                };
                let descr = meta.file_metadata().schema_descr();
                let columns: Vec<&str> = descr.root_schema().get_fields().iter().map(|f| f.name()).collect();
                let foreign: Vec<&str> = columns.iter().copied().filter(|c| schema.field_with_name(c).is_err()).collect();
                let missing: Vec<&str> =
                    schema.fields().iter().map(|f| f.name().as_str()).filter(|n| !columns.contains(n) && super::schema::later_column(n).is_none()).collect();
                if !foreign.is_empty() || !missing.is_empty() {
                    return Some(format!(
                        "{}: not a {} file (columns {} are not the table's; {} missing)",
                        path.display(),
                        table.name(),
                        if foreign.is_empty() { "-".into() } else { foreign.join(", ") },
                        if missing.is_empty() { "none".into() } else { missing.join(", ") }
                    ));
                }
            }
        }
        None
    }

    /// Every published Parquet file of the lake, sorted.
    pub fn files(&self, table: Table) -> io::Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        for date in self.dates(table)? {
            let dir = self.partition_dir(table, date);
            files.extend(self.list(&dir)?.into_iter().filter(|n| n.ends_with(".parquet")).map(|n| dir.join(n)));
        }
        Ok(files)
    }
}
