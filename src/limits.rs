//! What one query may take: rows and bytes of a result, disk for spilling, and the size of a
//! string a function may build. The memory pool bounds operators (sorts, joins, aggregates); it
//! does not see a result being collected or a value that `repeat('x', 1e9)` allocates, so
//! those are bounded here.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray};
use arrow::datatypes::{DataType, FieldRef, Int64Type};
use datafusion::common::{exec_err, Result as DfResult, ScalarValue};
use datafusion::logical_expr::{ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature};

/// The caps on an ad hoc query's result (`engine.max_result_rows`, `engine.max_result_bytes`),
/// carried in the session's config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResultLimits {
    pub rows: u64,
    pub bytes: u64,
}

impl Default for ResultLimits {
    fn default() -> Self {
        ResultLimits { rows: 10_000_000, bytes: 256 << 20 }
    }
}

/// Counts a result as it streams; the first batch past a cap is an error naming the key.
#[derive(Debug, Default)]
pub struct ResultMeter {
    pub rows: u64,
    pub bytes: u64,
}

impl ResultMeter {
    pub fn add(&mut self, limits: &ResultLimits, rows: usize, bytes: usize) -> Result<(), String> {
        self.rows += rows as u64;
        self.bytes += bytes as u64;
        if self.rows > limits.rows {
            return Err(format!("the result has more than engine.max_result_rows = {} rows; add a LIMIT or an aggregate, or raise the key", limits.rows));
        }
        if self.bytes > limits.bytes {
            return Err(format!(
                "the result is larger than engine.max_result_bytes = {} MiB; select fewer columns or rows, or raise the key",
                limits.bytes >> 20
            ));
        }
        Ok(())
    }
}

/// `repeat(s, n)` (|s| x n bytes per row: the one built-in of this build whose output size its
/// arguments choose; `lpad`/`rpad` are not compiled in), first checking the bytes it would
/// build against `max_bytes`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct BoundedRepeat {
    inner: Arc<ScalarUDF>,
    max_bytes: u64,
}

fn lengths(arg: &ColumnarValue, rows: usize) -> DfResult<Vec<u64>> {
    Ok(match arg {
        ColumnarValue::Scalar(s) => {
            let len = match s {
                ScalarValue::Utf8(v) | ScalarValue::LargeUtf8(v) | ScalarValue::Utf8View(v) => v.as_ref().map_or(0, |s| s.len()),
                _ => 0,
            };
            vec![len as u64; rows.max(1)]
        }
        ColumnarValue::Array(a) => {
            let lens: ArrayRef = arrow::compute::kernels::length::length(a.as_ref())?;
            let lens = arrow::compute::cast(&lens, &DataType::Int64)?;
            lens.as_primitive::<Int64Type>().iter().map(|v| v.unwrap_or(0).max(0) as u64).collect()
        }
    })
}

fn counts(arg: &ColumnarValue, rows: usize) -> DfResult<Vec<u64>> {
    Ok(match arg {
        ColumnarValue::Scalar(s) => {
            let n = match s.cast_to(&DataType::Int64)? {
                ScalarValue::Int64(Some(n)) => n.max(0) as u64,
                _ => 0,
            };
            vec![n; rows.max(1)]
        }
        ColumnarValue::Array(a) => {
            let a = arrow::compute::cast(a, &DataType::Int64)?;
            a.as_primitive::<Int64Type>().iter().map(|v| v.unwrap_or(0).max(0) as u64).collect()
        }
    })
}

impl ScalarUDFImpl for BoundedRepeat {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.number_rows;
        let total: u64 = match args.args.as_slice() {
            [s, n] => lengths(s, rows)?.iter().zip(counts(n, rows)?).map(|(l, n)| l.saturating_mul(n)).fold(0u64, u64::saturating_add),
            _ => 0,
        };
        if total > self.max_bytes {
            return exec_err!(
                "{}() would build {} MiB of text in one batch, over the limit of {} MiB (a quarter of engine.memory_limit)",
                self.inner.name(),
                total >> 20,
                self.max_bytes >> 20
            );
        }
        self.inner.invoke_with_args(args)
    }
}

/// `repeat` bounded to `max_bytes` per call, to register over the built-in.
pub fn bounded_repeat(max_bytes: u64) -> ScalarUDF {
    ScalarUDF::new_from_impl(BoundedRepeat { inner: datafusion::functions::string::repeat(), max_bytes })
}

/// Hands memory the process has freed back to the system (glibc keeps it in its arenas, so a
/// large phase's peak would stay the process's size for the phases after it). For the plan,
/// between reading a month of pods and replaying it, and for `run`, between its reports.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the arenas to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meter_stops_at_either_cap() {
        let limits = ResultLimits { rows: 10, bytes: 1 << 20 };
        let mut m = ResultMeter::default();
        assert!(m.add(&limits, 10, 1000).is_ok());
        assert!(m.add(&limits, 1, 0).unwrap_err().contains("engine.max_result_rows = 10"));
        let mut m = ResultMeter::default();
        assert!(m.add(&limits, 1, 2 << 20).unwrap_err().contains("engine.max_result_bytes = 1 MiB"));
    }
}
