//! Where lake files live: `<lake>/<table>/date=YYYY-MM-DD/<table>-YYYY-MM-DD.parquet`.
//!
//! One file per table and day, with a name derived from the day alone, so rewriting a day
//! replaces it through one atomic rename and can never leave two copies of a row.

use std::io;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use super::schema::Table;
use super::store::Store;

/// Suffix of files being written; a crash leaves only these behind and they are never read.
pub const TEMP_SUFFIX: &str = ".parquet.tmp";

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

    pub fn table_dir(&self, table: Table) -> PathBuf {
        self.root.join(table.name())
    }

    pub fn partition_dir(&self, table: Table, date: NaiveDate) -> PathBuf {
        self.table_dir(table).join(format!("date={}", date.format("%Y-%m-%d")))
    }

    pub fn partition_file(&self, table: Table, date: NaiveDate) -> PathBuf {
        self.partition_dir(table, date)
            .join(format!("{}-{}.parquet", table.name(), date.format("%Y-%m-%d")))
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

    /// Removes temp files left by a writer that was killed; returns how many it removed (none on
    /// object storage, where a file is one PUT and a killed writer leaves nothing).
    pub fn clean_orphans(&self) -> io::Result<usize> {
        let mut dirs = Vec::new();
        for table in Table::ALL {
            dirs.extend(self.dates(table)?.into_iter().map(|d| self.partition_dir(table, d)));
        }
        let rollups = super::rollup::dir(self);
        dirs.extend(self.list(&rollups)?.into_iter().map(|name| rollups.join(name)));
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
