//! Quota review: per namespace, the GPU quota (its ResourceQuota, else `[quotas]` in the
//! config) against the whole GPUs it held (average, p95 and peak over time), its pending
//! demand and the hours it spent at the quota, with a recommendation and its reason.
//!
//! The rules, in order:
//! - **raise** when the namespace sat at its quota for at least 10% of the window while on
//!   average at least one GPU's worth of its pods waited: suggest quota + the average pending;
//! - **lower** when its p95 use is at most half the quota and it never reached the quota:
//!   suggest max(peak, 1.2 x p95), rounded up;
//! - **keep** otherwise;
//! - **set** a quota where there is none.

use std::collections::BTreeMap;

use datafusion::prelude::SessionContext;
use serde_json::Map;

use super::columns::{ints, strs};
use super::render::{Cell, Report};
use super::Result;
use crate::config::Config;
use crate::domain::money::{format_units, round_ratio};
use crate::domain::window::Window;
use crate::lake::rollup::{self};
use crate::lake::rollup::{NamespaceGpus, PendingSums};
use crate::queries::Queries;

/// One namespace's use: seconds spent holding each number of whole GPUs.
#[derive(Debug, Default, Clone)]
pub struct Usage {
    pub histogram: BTreeMap<i64, i64>,
    pub pending_gpu_s: i64,
    pub quota: Option<(i64, &'static str)>,
}

impl Usage {
    /// GPU-seconds held.
    pub fn gpu_seconds(&self) -> i64 {
        self.histogram.iter().map(|(g, s)| g * s).sum()
    }

    /// The smallest GPU count held at or below which `p` of the window's time falls.
    pub fn percentile(&self, window_s: i64, p: f64) -> i64 {
        let held: i64 = self.histogram.values().sum();
        let mut acc = window_s - held; // time at 0 GPUs
        let target = (p * window_s as f64).ceil() as i64;
        if acc >= target {
            return 0;
        }
        for (g, s) in &self.histogram {
            acc += s;
            if acc >= target {
                return *g;
            }
        }
        self.peak()
    }

    pub fn peak(&self) -> i64 {
        self.histogram.keys().next_back().copied().unwrap_or(0)
    }

    pub fn seconds_at_or_over(&self, limit: i64) -> i64 {
        self.histogram.range(limit..).map(|(_, s)| s).sum()
    }
}

/// (recommendation, suggested quota, reason).
pub fn recommend(u: &Usage, window_s: i64) -> (&'static str, Option<i64>, String) {
    let avg_centi = round_ratio(u.gpu_seconds() as i128 * 100, window_s.max(1) as i128, 0) as i64;
    let pending_centi = round_ratio(u.pending_gpu_s as i128 * 100, window_s.max(1) as i128, 0) as i64;
    let (p95, peak) = (u.percentile(window_s, 0.95), u.peak());
    let f = |centi: i64| format_units(centi as i128, 2);
    let Some((quota, _)) = u.quota else {
        let suggest = (p95 * 6 + 4) / 5.max(peak).max(1);
        return ("set", Some(suggest), format!("no GPU quota; p95 use {p95}, peak {peak} GPUs"));
    };
    let at_quota = u.seconds_at_or_over(quota);
    let at_pct = round_ratio(at_quota as i128 * 100, window_s.max(1) as i128, 0) as i64;
    if at_pct >= 10 && pending_centi >= 100 {
        let suggest = quota + (pending_centi + 99) / 100;
        return ("raise", Some(suggest), format!("at its quota of {quota} for {at_pct}% of the time while {} GPUs waited on average", f(pending_centi)));
    }
    if p95 * 2 <= quota && peak < quota {
        let suggest = (p95 * 6 + 4) / 5.max(peak).max(1);
        return ("lower", Some(suggest), format!("p95 use {p95} and peak {peak} of a quota of {quota}: {} GPUs idle on average", f(quota * 100 - avg_centi)));
    }
    ("keep", Some(quota), format!("p95 use {p95} of {quota}, at quota {at_pct}% of the time, {} GPUs pending on average", f(pending_centi)))
}

pub async fn usage(ctx: &SessionContext, queries: &Queries, config: &Config, window: &Window) -> Result<BTreeMap<String, Usage>> {
    let mut out: BTreeMap<String, Usage> = BTreeMap::new();
    for b in &super::rolled::query::<NamespaceGpus>(ctx, queries, "quota_use", rollup::NAMESPACE_GPUS, window).await? {
        let r = "quota_use";
        let (ns, gpus, secs) = (strs(r, b, "namespace")?, ints(r, b, "gpus")?, ints(r, b, "seconds")?);
        for i in 0..b.num_rows() {
            *out.entry(ns[i].clone().unwrap_or_default()).or_default().histogram.entry(gpus[i].unwrap_or(0)).or_default() += secs[i].unwrap_or(0);
        }
    }
    for b in &super::rolled::query::<PendingSums>(ctx, queries, "quota_limits", rollup::PENDING_BUCKETS, window).await? {
        let r = "quota_limits";
        let (ns, hard, pending) = (strs(r, b, "namespace")?, ints(r, b, "hard")?, ints(r, b, "pending_gpu_s")?);
        for i in 0..b.num_rows() {
            let u = out.entry(ns[i].clone().unwrap_or_default()).or_default();
            u.pending_gpu_s = pending[i].unwrap_or(0);
            u.quota = hard[i].map(|h| (h, "ResourceQuota"));
        }
    }
    for (ns, q) in &config.quotas {
        let u = out.entry(ns.clone()).or_default();
        if u.quota.is_none() {
            u.quota = Some((*q as i64, "config"));
        }
    }
    Ok(out)
}

pub async fn build(ctx: &SessionContext, queries: &Queries, config: &Config, window: &Window) -> Result<Report> {
    let usage = usage(ctx, queries, config, window).await?;
    let window_s = window.seconds();
    let dec = |centi: i128| Cell::Dec { units: centi, decimals: 2 };
    let mut rows = Vec::new();
    for (ns, u) in &usage {
        let (rec, suggest, reason) = recommend(u, window_s);
        rows.push(vec![
            Cell::Str(ns.clone()),
            u.quota.map_or(Cell::Null, |(q, _)| Cell::Int(q)),
            u.quota.map_or(Cell::Str("none".into()), |(_, src)| Cell::Str(src.into())),
            dec(round_ratio(u.gpu_seconds() as i128 * 100, window_s.max(1) as i128, 0)),
            Cell::Int(u.percentile(window_s, 0.95)),
            Cell::Int(u.peak()),
            dec(round_ratio(u.pending_gpu_s as i128 * 100, window_s.max(1) as i128, 0)),
            u.quota.map_or(Cell::Null, |(q, _)| Cell::Dec { units: round_ratio(u.seconds_at_or_over(q) as i128, 3600, 2), decimals: 2 }),
            Cell::Str(rec.into()),
            suggest.map_or(Cell::Null, Cell::Int),
            Cell::Str(reason),
        ]);
    }
    Ok(Report {
        name: "quota".into(),
        title: format!("GPU quota review {}", window.label()),
        columns: [
            "namespace",
            "quota_gpus",
            "quota_source",
            "avg_gpus",
            "p95_gpus",
            "peak_gpus",
            "avg_pending_gpus",
            "hours_at_quota",
            "recommendation",
            "suggested_quota",
            "reason",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        total: None,
        notes: vec![
            "whole GPUs (nvidia.com/gpu) held over time; MIG slices are other resources and not counted against the GPU quota".into(),
            "raise: at quota >= 10% of the time with >= 1 GPU pending on average; lower: p95 <= half the quota and never at it; keep otherwise".into(),
        ],
        meta: Map::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(h: &[(i64, i64)], pending: i64, quota: Option<i64>) -> Usage {
        Usage { histogram: h.iter().copied().collect(), pending_gpu_s: pending, quota: quota.map(|q| (q, "config")) }
    }

    #[test]
    fn percentiles_and_recommendations() {
        // 100 s window: 0 GPUs for 50 s, 2 for 40 s, 8 for 10 s.
        let u = usage(&[(2, 40), (8, 10)], 0, Some(8));
        assert_eq!(u.percentile(100, 0.5), 0);
        assert_eq!(u.percentile(100, 0.9), 2);
        assert_eq!(u.percentile(100, 0.95), 8);
        assert_eq!(u.gpu_seconds(), 160);
        assert_eq!(recommend(&u, 100).0, "keep", "it reached its quota");
        let quiet = usage(&[(2, 100)], 0, Some(8));
        let (rec, suggest, reason) = recommend(&quiet, 100);
        assert_eq!((rec, suggest), ("lower", Some(3)));
        assert!(reason.contains("p95 use 2"), "{reason}");
        let busy = usage(&[(4, 50), (8, 50)], 250, Some(8));
        let (rec, suggest, _) = recommend(&busy, 100);
        assert_eq!((rec, suggest), ("raise", Some(11)));
        assert_eq!(recommend(&usage(&[(1, 10)], 0, None), 100).0, "set");
    }
}
