//! Real GPU utilisation as the simulated pods' own: `simulate --util-trace FILE`.
//!
//! The Alibaba GenAI trace (cluster-trace-v2026-GenAI, `pod_gpu_duty_cycle_anon.csv.gz`:
//! `value,timestamp_anon,container_ip`) holds one utilisation series per container, sampled
//! about every 57 s, with real gaps (up to hours) and two thirds of its samples at exactly 0.
//! Each GPU a pod holds replays one of those series, chosen and phased from the seed, the pod
//! and the GPU: the utilisation at a step is the series' last sample at or before the step's
//! offset into it (a gap holds the value before it, as a reader of the trace must), and a series
//! wraps around at its end. The simulator's step grid is kept: a unit's utilisation is constant
//! over a step, so the ledger, the lake writer and the OpenMetrics writer see the same values.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use super::rng::mix;

pub const GENAI_DUTY_CYCLE_FILE: &str = "pod_gpu_duty_cycle_anon.csv.gz";

#[derive(Debug, thiserror::Error)]
pub enum UtilTraceError {
    #[error("reading utilisation trace {path}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("utilisation trace {path} line {line}: {message}")]
    Parse { path: PathBuf, line: usize, message: String },
    #[error("utilisation trace {path}: no series with two samples or more")]
    Empty { path: PathBuf },
}

/// One container's series: sample offsets (ms from its first sample) and values (percent).
#[derive(Debug, Clone)]
struct Series {
    offsets_ms: Vec<i64>,
    values: Vec<f64>,
    /// Where the series wraps: its last offset plus its median sampling interval.
    period_ms: i64,
}

/// Every usable series of a utilisation trace.
#[derive(Debug, Clone)]
pub struct UtilTrace {
    series: Vec<Series>,
    pub samples: usize,
    pub zero_samples: usize,
}

impl UtilTrace {
    /// Reads the duty-cycle CSV (gzip or plain) at `path`, or `path/pod_gpu_duty_cycle_anon.csv.gz`.
    pub fn read(path: &Path) -> Result<UtilTrace, UtilTraceError> {
        let file_path = if path.is_dir() { path.join(GENAI_DUTY_CYCLE_FILE) } else { path.to_path_buf() };
        let io_err = |source| UtilTraceError::Io { path: file_path.clone(), source };
        let reader = super::trace_file::open_text(&file_path).map_err(io_err)?;
        let parse_err = |line: usize, message: String| UtilTraceError::Parse { path: file_path.clone(), line, message };
        let mut by_container: std::collections::BTreeMap<String, Vec<(i64, f64)>> = Default::default();
        let mut cols = (usize::MAX, usize::MAX, usize::MAX);
        for (i, line) in reader.lines().enumerate() {
            let line = line.map_err(io_err)?;
            let fields: Vec<&str> = line.trim_end().split(',').collect();
            if i == 0 {
                let at = |name: &str| fields.iter().position(|f| *f == name).ok_or_else(|| parse_err(1, format!("no column {name:?} in the header {line:?}")));
                cols = (at("value")?, at("timestamp_anon")?, at("container_ip")?);
                continue;
            }
            if fields.len() <= cols.0.max(cols.1).max(cols.2) {
                return Err(parse_err(i + 1, format!("{} fields, expected at least {}", fields.len(), cols.0.max(cols.1).max(cols.2) + 1)));
            }
            let value: f64 = fields[cols.0].parse().map_err(|_| parse_err(i + 1, format!("value {:?} is not a number", fields[cols.0])))?;
            let ts: f64 = fields[cols.1].parse().map_err(|_| parse_err(i + 1, format!("timestamp_anon {:?} is not a number", fields[cols.1])))?;
            if !value.is_finite() || !ts.is_finite() {
                return Err(parse_err(i + 1, "value and timestamp_anon must be finite".into()));
            }
            by_container.entry(fields[cols.2].to_string()).or_default().push(((ts * 1000.0).round() as i64, value.clamp(0.0, 100.0)));
        }
        let mut series = Vec::new();
        let (mut samples, mut zero_samples) = (0, 0);
        for (_, mut points) in by_container {
            points.sort_by_key(|p| p.0);
            points.dedup_by_key(|p| p.0);
            if points.len() < 2 {
                continue;
            }
            let first = points[0].0;
            let mut gaps: Vec<i64> = points.windows(2).map(|w| w[1].0 - w[0].0).collect();
            gaps.sort_unstable();
            let period_ms = points[points.len() - 1].0 - first + gaps[gaps.len() / 2];
            samples += points.len();
            zero_samples += points.iter().filter(|p| p.1 == 0.0).count();
            series.push(Series { offsets_ms: points.iter().map(|p| p.0 - first).collect(), values: points.iter().map(|p| p.1).collect(), period_ms });
        }
        if series.is_empty() {
            return Err(UtilTraceError::Empty { path: file_path });
        }
        Ok(UtilTrace { series, samples, zero_samples })
    }

    pub fn series_count(&self) -> usize {
        self.series.len()
    }

    /// The utilisation (percent) of the GPU unit `unit` held by pod `pod` at `since_ms` after
    /// the pod started.
    pub fn util(&self, seed: u64, pod: usize, unit: usize, since_ms: i64) -> f64 {
        let h = mix(seed ^ mix(0x7574_696C ^ ((pod as u64) << 20) ^ unit as u64));
        let s = &self.series[(h % self.series.len() as u64) as usize];
        let phase = (mix(h) % s.period_ms as u64) as i64;
        let at = (since_ms.max(0) + phase).rem_euclid(s.period_ms);
        let idx = s.offsets_ms.partition_point(|&o| o <= at);
        s.values[idx.saturating_sub(1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(text: &str) -> (tempfile::TempDir, Result<UtilTrace, UtilTraceError>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("duty.csv");
        std::fs::write(&path, text).unwrap();
        let t = UtilTrace::read(&path);
        (dir, t)
    }

    #[test]
    fn holds_the_last_sample_and_wraps() {
        let (_d, t) = trace("value,timestamp_anon,container_ip\n10,1000,a\n0,1060,a\n50,1120,a\n7,5,lonely\n");
        let t = t.unwrap();
        assert_eq!(t.series_count(), 1, "a series of one sample is left out");
        assert_eq!((t.samples, t.zero_samples), (3, 1));
        // Period 180 s (120 s + the 60 s median interval); find the phase from one reading.
        let s = &t.series[0];
        assert_eq!(s.period_ms, 180_000);
        let values: Vec<f64> = (0..18).map(|k| t.util(1, 2, 3, k * 10_000)).collect();
        // Over one period every value shows for exactly 6 readings of 10 s.
        for v in [10.0, 0.0, 50.0] {
            assert_eq!(values.iter().filter(|&&x| x == v).count(), 6, "{values:?}");
        }
        assert_eq!(t.util(1, 2, 3, 0), t.util(1, 2, 3, 180_000), "wraps at the period");
    }

    #[test]
    fn bad_lines_are_named() {
        let (_d, t) = trace("value,timestamp_anon,container_ip\n10,1000,a\nx,1060,a\n");
        assert!(t.unwrap_err().to_string().contains("line 3: value \"x\""));
        let (_d, t) = trace("util,ts\n");
        assert!(t.unwrap_err().to_string().contains("no column \"value\""));
    }
}
