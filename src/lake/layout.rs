//! Where lake files live: `<lake>/<table>/date=YYYY-MM-DD/<table>-YYYY-MM-DD.parquet`.
//!
//! One file per table and day, with a name derived from the day alone, so rewriting a day
//! replaces it through one atomic rename and can never leave two copies of a row.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use super::schema::Table;

/// Suffix of files being written; a crash leaves only these behind and they are never read.
pub const TEMP_SUFFIX: &str = ".parquet.tmp";

#[derive(Debug, Clone)]
pub struct Lake {
    root: PathBuf,
}

impl Lake {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Lake { root: root.into() }
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
        let dir = self.table_dir(table);
        let mut dates = Vec::new();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(dates),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            if let Some(d) = name.strip_prefix("date=") {
                if let Ok(date) = NaiveDate::parse_from_str(d, "%Y-%m-%d") {
                    dates.push(date);
                }
            }
        }
        dates.sort();
        Ok(dates)
    }

    /// Removes temp files left by a writer that was killed; returns how many it removed.
    pub fn clean_orphans(&self) -> io::Result<usize> {
        let mut dirs = Vec::new();
        for table in Table::ALL {
            dirs.extend(self.dates(table)?.into_iter().map(|d| self.partition_dir(table, d)));
        }
        let rollups = super::rollup::dir(self);
        match fs::read_dir(&rollups) {
            Ok(entries) => {
                for entry in entries {
                    dirs.push(entry?.path());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut removed = 0;
        for dir in dirs.into_iter().filter(|d| d.is_dir()) {
            for entry in fs::read_dir(&dir)? {
                let path = entry?.path();
                if path.to_string_lossy().ends_with(TEMP_SUFFIX) {
                    fs::remove_file(&path)?;
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
            let mut day: Vec<PathBuf> = fs::read_dir(self.partition_dir(table, date))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
                .collect();
            day.sort();
            files.extend(day);
        }
        Ok(files)
    }
}
