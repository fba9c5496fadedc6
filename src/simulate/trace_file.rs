//! A public trace's text file, read line by line.

use std::io::{BufRead, BufReader};
use std::path::Path;

/// A trace file's lines, gunzipped where its name ends in `.gz`.
pub fn open_text(path: &Path) -> std::io::Result<Box<dyn BufRead>> {
    let file = std::fs::File::open(path)?;
    Ok(if path.extension().is_some_and(|e| e == "gz") { Box::new(BufReader::new(flate2::read::GzDecoder::new(file))) } else { Box::new(BufReader::new(file)) })
}
