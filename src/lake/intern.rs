//! Label strings as small integers for the passes over the lake's files: each batch's
//! dictionary values are looked up once, and rows then carry `u32` ids.

use std::collections::HashMap;

use arrow::array::{Array, AsArray, DictionaryArray, RecordBatch};
use arrow::datatypes::Int32Type;

use super::schema::label_type;

/// The id of a missing (null) label.
pub const NULL_ID: u32 = u32::MAX;

#[derive(Default)]
pub struct Interner {
    ids: HashMap<String, u32>,
    names: Vec<String>,
}

impl Interner {
    pub fn id(&mut self, s: &str) -> u32 {
        if let Some(id) = self.ids.get(s) {
            return *id;
        }
        let id = self.names.len() as u32;
        self.names.push(s.to_string());
        self.ids.insert(s.to_string(), id);
        id
    }

    /// How many names have ids.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn name(&self, id: u32) -> Option<&str> {
        (id != NULL_ID).then(|| self.names[id as usize].as_str())
    }

    /// Global ids for the values of one batch's dictionary column (index by the row's key).
    pub fn map_values(&mut self, dict: &DictionaryArray<Int32Type>) -> Vec<u32> {
        let values = dict.values().as_string::<i32>();
        (0..values.len()).map(|i| if values.is_null(i) { NULL_ID } else { self.id(values.value(i)) }).collect()
    }

    /// Each id's rank among the names in text order, from 1 (`NULL_ID` ranks 0): sorting by
    /// rank sorts by the labels' text.
    pub fn ranks(&self) -> Vec<u32> {
        let mut by_name: Vec<u32> = (0..self.names.len() as u32).collect();
        by_name.sort_by(|a, b| self.names[*a as usize].cmp(&self.names[*b as usize]));
        let mut rank = vec![0u32; self.names.len()];
        for (r, id) in by_name.into_iter().enumerate() {
            rank[id as usize] = r as u32 + 1;
        }
        rank
    }
}

/// The row's id in a dictionary column whose values `ids` mapped.
pub fn row_id(dict: &DictionaryArray<Int32Type>, ids: &[u32], row: usize) -> u32 {
    if dict.is_null(row) {
        NULL_ID
    } else {
        ids[dict.keys().value(row) as usize]
    }
}

/// Why a column of a lake batch cannot be read as a pass needs it.
#[derive(Debug, thiserror::Error)]
pub enum ColumnError {
    #[error("missing")]
    Missing,
    #[error("unexpected type {0}")]
    Type(arrow::datatypes::DataType),
    #[error("cannot be read as labels")]
    Cast(#[source] arrow::error::ArrowError),
}

/// Column `name` of `batch` as the lake's label dictionary (cast if stored otherwise).
pub fn label_column(batch: &RecordBatch, name: &str) -> Result<DictionaryArray<Int32Type>, ColumnError> {
    let c = batch.column_by_name(name).ok_or(ColumnError::Missing)?;
    let c = if c.data_type() == &label_type() { c.clone() } else { arrow::compute::cast(c, &label_type()).map_err(ColumnError::Cast)? };
    Ok(c.as_dictionary::<Int32Type>().clone())
}

/// Column `name` of `batch` as the array type `T`.
pub fn typed_column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> Result<&'a T, ColumnError> {
    let c = batch.column_by_name(name).ok_or(ColumnError::Missing)?;
    c.as_any().downcast_ref::<T>().ok_or_else(|| ColumnError::Type(c.data_type().clone()))
}
