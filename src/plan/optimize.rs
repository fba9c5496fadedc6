//! `plan --optimize`: quotas that meet the stated goals, found by repeated replays.
//!
//! A candidate split is scored, best first, by: how far the fast classes' p95 waits are over
//! the goal (summed over their namespaces, minutes), then the pool's unallocated share, then
//! the pods' mean p95 wait. The search starts from the recorded quotas and tries moving quota
//! between namespaces (and raising one while the total stays under `max_quota_total`), in
//! steps that halve when no move helps, never taking a namespace under its guaranteed quota;
//! candidates of one round are replayed on both cores.

use super::metrics::{summarize_outcome, Summary};
use super::model::{replay, Job, Setup};
use super::prices::Prices;

/// A split's score; lower is better, compared in order.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Score {
    pub over_goal_min: f64,
    pub unallocated_pct: f64,
    pub mean_p95_min: f64,
}

#[derive(Debug, Clone)]
pub struct Goal {
    pub max_p95_wait_min: f64,
    /// Per namespace: whether its pods are of a fast class (the goal applies to it).
    pub fast: Vec<bool>,
    /// Per namespace: the least quota the search may give it.
    pub floor: Vec<u32>,
    pub max_total: u32,
}

/// Per namespace: whether its pods are of one of `fast_classes` (after any class override).
pub fn fast_namespaces(base: &Setup, jobs: &[Job], fast_classes: &[String]) -> Vec<bool> {
    let mut fast = vec![false; base.namespaces.len()];
    for j in jobs {
        let class = base.class_override[j.ns].unwrap_or(j.class);
        fast[j.ns] |= fast_classes.contains(&base.classes[class].name);
    }
    fast
}

pub fn score(goal: &Goal, s: &Summary) -> Score {
    let mut over = 0.0;
    let (mut sum, mut n) = (0.0, 0.0);
    for (i, ns) in s.namespaces.iter().enumerate() {
        let p95 = ns.wait_p95_s / 60.0;
        if goal.fast[i] {
            over += (p95 - goal.max_p95_wait_min).max(0.0);
        }
        if ns.started > 0 {
            sum += p95 * ns.started as f64;
            n += ns.started as f64;
        }
    }
    // Rounded so that replays that differ by noise do not count as better.
    let r = |x: f64, d: f64| (x * d).round() / d;
    Score { over_goal_min: r(over, 100.0), unallocated_pct: r(s.unallocated_pct(), 100.0), mean_p95_min: r(if n > 0.0 { sum / n } else { 0.0 }, 100.0) }
}

pub struct Found {
    pub setup: Setup,
    pub summary: Summary,
    pub score: Score,
    pub baseline_score: Score,
    pub replays: usize,
}

fn with_quotas(base: &Setup, q: &[Option<u32>]) -> Setup {
    let mut s = base.clone();
    s.quota = q.to_vec();
    s
}

/// Searches quotas for the namespaces in `tunable` (the others keep theirs).
pub fn search(base: &Setup, jobs: &[Job], prices: &Prices, goal: &Goal, tunable: &[usize], max_replays: usize) -> Found {
    let evaluate = |q: &[Option<u32>]| -> (Summary, Score) {
        let setup = with_quotas(base, q);
        let sum = summarize_outcome(&setup, &replay(&setup, jobs), prices);
        let sc = score(goal, &sum);
        (sum, sc)
    };
    let mut current: Vec<Option<u32>> = base.quota.clone();
    for &i in tunable {
        let q = current[i].unwrap_or(0).max(goal.floor[i]);
        current[i] = Some(q);
    }
    let (mut best_sum, mut best) = evaluate(&current);
    let baseline_score = score(goal, &summarize_outcome(base, &replay(base, jobs), prices));
    let mut replays = 2;
    let total = |q: &[Option<u32>]| tunable.iter().map(|&i| q[i].unwrap_or(0)).sum::<u32>();
    let pool = super::scenario::pool_gpus(base).round() as u32;
    let mut step = (pool / 16).max(1);
    while replays < max_replays {
        let mut candidates: Vec<Vec<Option<u32>>> = Vec::new();
        for &b in tunable {
            for &a in tunable {
                if a == b {
                    continue;
                }
                let (qa, qb) = (current[a].unwrap_or(0), current[b].unwrap_or(0));
                if qa >= goal.floor[a] + step {
                    let mut c = current.clone();
                    c[a] = Some(qa - step);
                    c[b] = Some(qb + step);
                    candidates.push(c);
                }
            }
            if total(&current) + step <= goal.max_total {
                let mut c = current.clone();
                c[b] = Some(current[b].unwrap_or(0) + step);
                candidates.push(c);
            }
        }
        candidates.truncate(max_replays.saturating_sub(replays));
        if candidates.is_empty() {
            break;
        }
        replays += candidates.len();
        let results = evaluate_all(&candidates, &evaluate);
        let winner = results
            .into_iter()
            .enumerate()
            .filter(|(_, (_, s))| s.partial_cmp(&best) == Some(std::cmp::Ordering::Less))
            .min_by(|x, y| x.1 .1.partial_cmp(&y.1 .1).unwrap_or(std::cmp::Ordering::Equal));
        match winner {
            Some((i, (sum, sc))) => {
                current = candidates[i].clone();
                best = sc;
                best_sum = sum;
            }
            None if step > 1 => step /= 2,
            None => break,
        }
    }
    Found { setup: with_quotas(base, &current), summary: best_sum, score: best, baseline_score, replays }
}

/// Replays the candidates on two threads (the machine's cores), results in order.
fn evaluate_all<F>(candidates: &[Vec<Option<u32>>], evaluate: &F) -> Vec<(Summary, Score)>
where
    F: Fn(&[Option<u32>]) -> (Summary, Score) + Sync,
{
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let chunk = candidates.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = candidates.chunks(chunk).map(|part| scope.spawn(move || part.iter().map(|c| evaluate(c)).collect::<Vec<_>>())).collect();
        handles.into_iter().flat_map(|h| h.join().expect("a replay thread panicked")).collect()
    })
}
