//! The replay: a model of kube-scheduler's binding loop on a pool of nodes, with ResourceQuota
//! admission (per namespace, per team, per GPU model, and Kueue-style borrowing within a
//! cohort), priority preemption and time-window policies. It is the simulator's scheduler
//! (`simulate/scheduler.rs`) driven by recorded demand instead of random arrivals: a binding
//! pass at every step tick, highest priority first then oldest, best-fit placement (the
//! acceptable node left with the fewest free units), and a high-priority pod that does not fit
//! evicting the fewest lower-priority pods of one node, whose controller re-creates them for
//! the work left.
//!
//! Ticks where nothing can change (no arrival, completion, window or node boundary) are
//! skipped, and the pods pending through them are counted in one go, so a month replays in a
//! number of passes close to its number of events.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

pub use super::setup::*;
use super::state::*;

/// Replays `jobs` (sorted by `created`) under `setup`.
pub fn replay(setup: &Setup, jobs: &[Job]) -> Outcome {
    replay_ticks(setup, jobs, true)
}

/// The replay; `skip`: jump over ticks where nothing can change (false runs a pass at every
/// tick, as the simulator does: the tests check both give the same).
fn replay_ticks(setup: &Setup, jobs: &[Job], skip: bool) -> Outcome {
    let nns = setup.namespaces.len();
    let nmodels = setup.models.len();
    let mut cohort_of = vec![None; nns];
    let mut cohort_nominal = vec![0u32; setup.cohorts.len()];
    for (c, cohort) in setup.cohorts.iter().enumerate() {
        for &(ns, limit) in &cohort.members {
            cohort_of[ns] = Some((c, limit));
            cohort_nominal[c] += setup.quota[ns].unwrap_or(0);
        }
    }
    let mut shared_of = vec![Vec::new(); nns];
    for (g, q) in setup.shared_quotas.iter().enumerate() {
        for &ns in &q.members {
            shared_of[ns].push(g);
        }
    }
    let mut s = State {
        skip,
        setup,
        jobs,
        free: setup.nodes.iter().map(|n| n.units.iter().map(|g| g.count).collect()).collect(),
        group_of: setup.nodes.iter().map(|n| (0..setup.resources.len()).map(|r| n.units.iter().position(|g| g.resource == r)).collect()).collect(),
        nodes_with: (0..setup.resources.len())
            .map(|r| (0..setup.nodes.len()).filter(|&i| setup.nodes[i].units.iter().any(|g| g.resource == r)).collect())
            .collect(),
        avail: vec![false; setup.nodes.len()],
        max_free: vec![vec![0; nmodels]; setup.resources.len()],
        epoch: 1,
        freed_units_at: vec![vec![0; nmodels]; setup.resources.len()],
        freed_quota_at: vec![0; nns],
        boundary_at: 0,
        related: (0..nns)
            .map(|ns| {
                let mut r = vec![ns];
                for q in setup.shared_quotas.iter().filter(|q| q.members.contains(&ns)) {
                    r.extend(q.members.iter().copied());
                }
                for c in setup.cohorts.iter().filter(|c| c.members.iter().any(|m| m.0 == ns)) {
                    r.extend(c.members.iter().map(|m| m.0));
                }
                r.sort_unstable();
                r.dedup();
                r
            })
            .collect(),
        tried_at: Vec::with_capacity(jobs.len()),
        bucket_of: Vec::with_capacity(jobs.len()),
        buckets: (0..3 * nns * setup.resources.len() * REQ_CLASSES).map(|_| Bucket::default()).collect(),
        fresh: Vec::new(),
        on_node: vec![Vec::new(); setup.nodes.len()],
        used: vec![0; nns],
        used_model: vec![vec![0; nmodels]; nns],
        used_shared: vec![0; setup.shared_quotas.len()],
        used_cohort: vec![0; setup.cohorts.len()],
        cohort_of,
        shared_of,
        cohort_nominal,
        pods: Vec::with_capacity(jobs.len() + jobs.len() / 8),
        left: Vec::with_capacity(jobs.len()),
        attempt: Vec::with_capacity(jobs.len()),
        ends: BinaryHeap::new(),
        live: Vec::with_capacity(jobs.len()),
        pending: BTreeSet::new(),
        pending_sum: vec![0; nns],
        later: BinaryHeap::new(),
    };
    let hours = ((setup.to - setup.from + 3_599_999) / 3_600_000).max(0) as usize;
    let mut out = Outcome { pending_gpu_s: vec![0; nns], pending_by_hour: vec![vec![0; hours]; nns], ..Default::default() };

    // The first attempt of every job is pod `job`.
    for (j, job) in jobs.iter().enumerate() {
        s.new_pod(j, job.created, job.run, 0);
    }
    s.start_pass(setup.from);
    // Pods running when the window opened go back where they ran.
    let mut next_job = 0;
    let mut arrivals: Vec<usize> = Vec::with_capacity(jobs.len());
    for (j, job) in jobs.iter().enumerate() {
        match &job.carried {
            Some(c) => {
                let node = setup.nodes.iter().position(|n| n.name == c.node);
                match node.filter(|&n| s.free_of(n, job.resource) >= job.count && setup.nodes[n].units.iter().any(|g| g.resource == job.resource)) {
                    Some(n) => s.bind_at(j, n, c.scheduled, c.started),
                    None => {
                        out.carried_requeued += 1;
                        // Its work left from the window's start, queued again at the start.
                        let done = (setup.from - c.started).max(0);
                        s.left[j] = job.run.map(|r| (r - done).max(0));
                        arrivals.push(j);
                    }
                }
            }
            None => arrivals.push(j),
        }
    }
    arrivals.sort_by_key(|&j| (jobs[j].created.max(setup.from), j));

    let boundaries = policy_boundaries(setup);
    let mut bi = 0;
    let mut t = setup.from;
    let mut changed = true;
    let mut availability_changed = false;
    while t < setup.to {
        // 1. Completions up to this tick free their units.
        while let Some(&Reverse((end, pod))) = s.ends.peek() {
            if end > t {
                break;
            }
            s.ends.pop();
            if s.live[pod].is_some() && s.pods[pod].finished.is_none() {
                s.finish(pod, end);
                changed = true;
            }
        }
        // 2. Arrivals up to this tick.
        while next_job < arrivals.len() && jobs[arrivals[next_job]].created <= t {
            s.enqueue(arrivals[next_job]);
            next_job += 1;
            changed = true;
        }
        while let Some(&Reverse((created, pod))) = s.later.peek() {
            if created > t {
                break;
            }
            s.later.pop();
            s.enqueue(pod);
            changed = true;
        }
        while bi < boundaries.len() && boundaries[bi] <= t {
            // A node leaving the pool ends the pods on it (nothing was recorded of them after).
            let b = boundaries[bi];
            for node in 0..setup.nodes.len() {
                if setup.nodes[node].available_to == b {
                    for pod in s.on_node[node].clone() {
                        s.finish(pod, b);
                    }
                }
            }
            bi += 1;
            changed = true;
            s.epoch += 1;
            s.boundary_at = s.epoch;
            availability_changed = true;
        }
        // 3. The binding pass.
        if (changed || !skip) && !s.pending.is_empty() {
            out.passes += 1;
            if availability_changed {
                s.start_pass(t);
                availability_changed = false;
            }
            // An eviction frees more than the evicting pod may take: the next tick looks again.
            changed = pass(&mut s, t);
        } else {
            changed = false;
        }
        // 4. The next tick where anything can change; pods pending until then are counted.
        let mut next = setup.to;
        let up = |x: Ms| setup.from + ((x - setup.from).max(0) + setup.step - 1) / setup.step * setup.step;
        if let Some(&j) = arrivals.get(next_job) {
            next = next.min(up(jobs[j].created));
        }
        if let Some(&Reverse((c, _))) = s.later.peek() {
            next = next.min(up(c));
        }
        if let Some(&Reverse((e, _))) = s.ends.peek() {
            next = next.min(up(e));
        }
        if let Some(&b) = boundaries.get(bi) {
            next = next.min(up(b));
        }
        let next = if skip { next.max(t + setup.step) } else { t + setup.step };
        count_pending(&s, &mut out, setup, t, next.min(setup.to));
        t = next;
    }
    out.pods = s.pods;
    out
}

/// One binding pass at `t`, in priority order; says whether it evicted anyone.
///
/// The every-tick replay (`skip` off, the tests' reference) looks at every pending pod. The
/// optimised one looks only at the pods that can bind: those queued since the last pass, and
/// those left pending by a cause that has come free since (their bucket's units, quota or a
/// boundary): the others would fail exactly as before.
fn pass(s: &mut State<'_>, t: Ms) -> bool {
    let setup = s.setup;
    let mut evicted = false;
    // Within one pass units are only taken (an eviction gives some back and clears this):
    // a request that found no node fails for any request as large of the same kind.
    let mut no_room: Vec<(usize, usize, u32)> = Vec::new();
    let mut no_victims: Vec<(usize, usize, u32, i64)> = Vec::new();
    let mut keys: Vec<Key> = if s.skip {
        s.gather(None)
    } else {
        s.fresh.clear();
        s.pending.iter().copied().collect()
    };
    let mut next = 0;
    while next < keys.len() {
        let key = keys[next];
        next += 1;
        let pod = key.2;
        let (ns, resource, req) = (s.pods[pod].ns, s.pods[pod].resource, s.pods[pod].count);
        if let Some(w) = &setup.windows[ns] {
            if !w.allows(t) {
                s.stick(pod, Blocked::Window);
                continue;
            }
        }
        if resource == GPU_RESOURCE && !s.quota_admits(ns, req) {
            s.stick(pod, Blocked::Quota);
            continue;
        }
        let mut node = None;
        if !no_room.iter().any(|&(n, r, q)| n == ns && r == resource && req >= q) {
            node = s.place(pod, t);
            if node.is_none() {
                no_room.push((ns, resource, req));
            }
        }
        let class = s.class_of(pod);
        if node.is_none() && setup.preemption && setup.classes[class].preempts {
            let value = setup.classes[class].value;
            if !no_victims.iter().any(|&(n, r, q, v)| n == ns && r == resource && req >= q && value <= v) {
                match s.victims(pod, t) {
                    Some(victims) => {
                        for v in victims {
                            s.preempt(v, t);
                        }
                        evicted = true;
                        if s.skip {
                            // What the eviction freed may let later pods in the order bind.
                            let mut more = s.gather(Some(key));
                            more.extend_from_slice(&keys[next..]);
                            more.sort_unstable();
                            more.dedup();
                            keys = more;
                            next = 0;
                        }
                        no_room.clear();
                        no_victims.clear();
                        node = s.place(pod, t);
                    }
                    None => no_victims.push((ns, resource, req, value)),
                }
            }
        }
        match node {
            Some(n) => {
                s.unstick(pod);
                s.pending.remove(&key);
                s.pending_sum[ns] -= req as i64;
                s.bind(pod, n, t);
            }
            None => s.stick(pod, Blocked::Room),
        }
    }
    evicted
}

/// Ticks `[t, next)` all see the same pending pods.
fn count_pending(s: &State<'_>, out: &mut Outcome, setup: &Setup, t: Ms, next: Ms) {
    if s.pending.is_empty() || next <= t {
        return;
    }
    let mut a = t;
    while a < next {
        let hour = ((a - setup.from) / 3_600_000) as usize;
        let hour_end = setup.from + (hour as i64 + 1) * 3_600_000;
        let b = next.min(hour_end);
        let ticks = (b - a + setup.step - 1) / setup.step;
        let step_s = setup.step / 1000;
        for (ns, &sum) in s.pending_sum.iter().enumerate() {
            if sum != 0 {
                out.pending_gpu_s[ns] += sum * ticks * step_s;
                if let Some(h) = out.pending_by_hour[ns].get_mut(hour) {
                    *h += sum * ticks * step_s;
                }
            }
        }
        a += ticks * setup.step;
    }
}

/// Instants a pass must run at even when no pod came or went: node arrivals and departures,
/// and, where a namespace has a time window, every quarter hour (windows are in 15-minute
/// steps).
fn policy_boundaries(setup: &Setup) -> Vec<Ms> {
    let mut b: Vec<Ms> = Vec::new();
    for n in &setup.nodes {
        b.push(n.available_from);
        b.push(n.available_to);
    }
    if setup.windows.iter().any(Option::is_some) {
        let q = 900_000;
        let mut x = setup.from - setup.from.rem_euclid(q);
        while x < setup.to {
            b.push(x);
            x += q;
        }
    }
    b.retain(|&x| x > setup.from && x < setup.to);
    b.sort_unstable();
    b.dedup();
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Ms = 60_000;

    /// One node of `gpus` whole GPUs, namespaces `a` (class low) and `b` (class high, preempts).
    fn setup(gpus: u32, minutes: i64) -> Setup {
        Setup {
            from: 0,
            to: minutes * MIN,
            step: MIN,
            models: vec!["GPU".into()],
            resources: vec!["nvidia.com/gpu".into()],
            nodes: vec![NodeSpec {
                name: "n1".into(),
                model: 0,
                units: vec![UnitGroup { resource: 0, count: gpus, share: 1.0 }],
                available_from: 0,
                available_to: minutes * MIN,
            }],
            classes: vec![Class { name: "low".into(), value: 0, preempts: false }, Class { name: "high".into(), value: 1000, preempts: true }],
            namespaces: vec!["a".into(), "b".into()],
            class_override: vec![None, None],
            quota: vec![None, None],
            model_quota: vec![vec![None], vec![None]],
            shared_quotas: vec![],
            cohorts: vec![],
            affinity: vec![vec![true], vec![true]],
            windows: vec![None, None],
            preemption: true,
        }
    }

    fn job(ns: usize, class: usize, count: u32, created_min: i64, run_min: i64) -> Job {
        Job {
            ns,
            name: format!("p{created_min}-{ns}"),
            class,
            resource: 0,
            count,
            created: created_min * MIN,
            delays: vec![0],
            run: Some(run_min * MIN),
            end_reason: Some("Completed".into()),
            carried: None,
        }
    }

    fn times(p: &PodOutcome) -> (Option<Ms>, Option<Ms>) {
        (p.scheduled.map(|t| t / 1000), p.finished.map(|t| t / 1000))
    }

    /// The hand-worked case below, priced: a tariff of 0.10, 0.20, 0.30, 0.40 per kWh in the
    /// hour's four quarters, PUE 1.5; namespace a draws 0.6 kWh per GPU-hour, b 0.3, an idle GPU
    /// 0.06. a holds 30 GPU-minutes (A 0-10, B 1-5 and 10-26), b 10 (C 5-15).
    #[test]
    fn three_pods_priced_by_the_tariff() {
        let s = setup(2, 60);
        let jobs = vec![job(0, 0, 1, 0, 10), job(0, 0, 1, 1, 20), job(1, 1, 1, 5, 10)];
        let o = replay(&s, &jobs);
        let power = super::super::prices::PowerPrices::with_grid(1.5, 0, vec![0.10, 0.20, 0.30, 0.40], vec![vec![0.6], vec![0.3]], vec![0.06]);
        let prices = super::super::prices::Prices { power, ..Default::default() };
        let sum = super::super::metrics::summarize_outcome(&s, &o, &prices);
        let close = |got: f64, want: f64, what: &str| assert!((got - want).abs() < 1e-9, "{what}: {got} vs {want}");
        // a: 0.5 GPU-h x 0.6 kWh; price-hours (10 + 4 + 5) min at 0.10 and 11 min at 0.20.
        close(sum.namespaces[0].energy_kwh, 0.3, "a's energy");
        close(sum.namespaces[0].power_cost, 0.6 * 1.5 * (19.0 * 0.10 + 11.0 * 0.20) / 60.0, "a's power cost");
        // b: 1/6 GPU-h x 0.3 kWh; 10 min at 0.10.
        close(sum.namespaces[1].energy_kwh, 0.05, "b's energy");
        close(sum.namespaces[1].power_cost, 0.3 * 1.5 * (10.0 * 0.10) / 60.0, "b's power cost");
        // Idle: 2 GPU-h less 40 GPU-minutes held; price-hours 2 x 0.25 x 1.0 less what pods held.
        close(sum.idle.energy_kwh, 0.06 * (2.0 - 40.0 / 60.0), "idle energy");
        close(sum.idle.power_cost, 0.06 * 1.5 * (0.5 - (29.0 * 0.10 + 11.0 * 0.20) / 60.0), "idle power cost");
    }

    /// 2 GPUs, 3 pods: A (low, from 0 for 10 min), B (low, from 1 min for 20 min), C (high,
    /// 1 GPU at 5 min for 10 min). C evicts B, the latest started; B's controller re-creates it
    /// at 5:01 for the 16 minutes left, which start when A ends at 10:00.
    #[test]
    fn three_pods_two_gpus_one_preemption() {
        let s = setup(2, 60);
        let jobs = vec![job(0, 0, 1, 0, 10), job(0, 0, 1, 1, 20), job(1, 1, 1, 5, 10)];
        let o = replay(&s, &jobs);
        assert_eq!(o.pods.len(), 4);
        assert_eq!(times(&o.pods[0]), (Some(0), Some(600)), "A runs 0-10 min");
        assert_eq!(times(&o.pods[1]), (Some(60), Some(300)), "B is evicted at 5 min");
        assert!(o.pods[1].preempted && !o.pods[0].preempted);
        assert_eq!(times(&o.pods[2]), (Some(300), Some(900)), "C binds at once");
        assert_eq!(o.pods[3].created, 5 * MIN + 1000, "B re-created 1 s after the eviction");
        assert_eq!(times(&o.pods[3]), (Some(600), Some(600 + 16 * 60)), "B' runs the 16 min left once A is done");
        // B' was pending at the 6, 7, 8 and 9 minute ticks.
        assert_eq!(o.pending_gpu_s, vec![4 * 60, 0]);
        let prices = super::super::prices::Prices::default();
        let sum = super::super::metrics::summarize_outcome(&s, &o, &prices);
        assert!((sum.gpu_hours() - 40.0 / 60.0).abs() < 1e-12, "10 + 4 + 16 + 10 GPU-minutes");
        assert_eq!(sum.namespaces[0].preemptions, 1);
        assert_eq!(sum.namespaces[0].wait_max_s, 299.0, "B' waited from 5:01 to 10:00");

        // Without preemption C waits for A.
        let mut off = s.clone();
        off.preemption = false;
        let o = replay(&off, &jobs);
        assert_eq!(o.pods.len(), 3);
        assert_eq!(times(&o.pods[1]), (Some(60), Some(1260)));
        assert_eq!(times(&o.pods[2]), (Some(600), Some(1200)));
        assert_eq!(o.pending_gpu_s, vec![0, 5 * 60]);
    }

    #[test]
    fn quota_and_borrowing_within_a_cohort() {
        let mut s = setup(4, 60);
        s.quota = vec![Some(1), Some(1)];
        let jobs = vec![job(0, 0, 1, 0, 10), job(0, 0, 1, 0, 10)];
        let o = replay(&s, &jobs);
        assert_eq!(times(&o.pods[1]).0, Some(600), "the second waits for the quota");
        // In a cohort with b, a borrows b's unused GPU ...
        s.cohorts = vec![Cohort { name: "c".into(), members: vec![(0, None), (1, None)] }];
        let o = replay(&s, &jobs);
        assert_eq!(times(&o.pods[1]).0, Some(0));
        // ... but not past its borrowing limit, nor past the cohort's nominal total.
        s.cohorts = vec![Cohort { name: "c".into(), members: vec![(0, Some(0)), (1, None)] }];
        assert_eq!(times(&replay(&s, &jobs).pods[1]).0, Some(600));
        s.cohorts = vec![Cohort { name: "c".into(), members: vec![(0, None), (1, None)] }];
        let three = vec![job(0, 0, 1, 0, 10), job(0, 0, 1, 0, 10), job(0, 0, 1, 0, 10)];
        assert_eq!(times(&replay(&s, &three).pods[2]).0, Some(600));
        // A team's shared quota binds its namespaces together.
        let mut t = setup(4, 60);
        t.shared_quotas = vec![SharedQuota { name: "team".into(), members: vec![0, 1], hard: 1 }];
        let o = replay(&t, &[job(0, 0, 1, 0, 10), job(1, 0, 1, 0, 10)]);
        assert_eq!(times(&o.pods[1]).0, Some(600));
    }

    #[test]
    fn time_windows_and_model_quotas() {
        let mut s = setup(2, 24 * 60);
        s.windows[0] = Some(TimeWindow {
            tz: chrono_tz::UTC,
            start_min: 20 * 60,
            end_min: 7 * 60,
            days: crate::domain::tariff_time::parse_days(&["mon".into(), "tue".into(), "wed".into(), "thu".into(), "fri".into(), "sat".into(), "sun".into()])
                .unwrap(),
        });
        // Created at 12:00 (1970-01-01 is a Thursday): starts at 20:00.
        let o = replay(&s, &[job(0, 0, 1, 12 * 60, 10)]);
        assert_eq!(times(&o.pods[0]).0, Some(20 * 3600));
        assert_eq!(o.pending_gpu_s[0], 8 * 3600);
        let mut m = setup(2, 60);
        m.model_quota[0][0] = Some(1);
        let o = replay(&m, &[job(0, 0, 1, 0, 10), job(0, 0, 1, 0, 10)]);
        assert_eq!(times(&o.pods[1]).0, Some(600));
    }

    /// Skipping quiet ticks changes nothing: random demand replayed both ways.
    #[test]
    fn skipping_quiet_ticks_is_exact() {
        let mut s = setup(8, 3 * 24 * 60);
        s.nodes.push(NodeSpec {
            name: "n2".into(),
            model: 0,
            units: vec![UnitGroup { resource: 0, count: 4, share: 1.0 }],
            available_from: 600 * MIN,
            available_to: 3000 * MIN,
        });
        s.quota = vec![Some(6), None];
        let mut x: u64 = 42;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut jobs: Vec<Job> = (0..400)
            .map(|_| {
                let ns = (next() % 2) as usize;
                let mut j = job(ns, ns, 1 + (next() % 4) as u32, (next() % (3 * 24 * 60)) as i64, 1 + (next() % 300) as i64);
                j.created += (next() % 59_000) as i64;
                j.delays = vec![(next() % 20) as i64 * 1000];
                if next() % 10 == 0 {
                    j.run = None;
                }
                j
            })
            .collect();
        jobs.sort_by_key(|j| j.created);
        // The same demand under a cohort, a time window, a model quota and a MIG node too.
        let mut other = s.clone();
        other.quota = vec![Some(4), Some(6)];
        other.cohorts = vec![Cohort { name: "c".into(), members: vec![(0, Some(3)), (1, None)] }];
        other.windows[1] = Some(TimeWindow {
            tz: chrono_tz::UTC,
            start_min: 8 * 60,
            end_min: 20 * 60,
            days: crate::domain::tariff_time::parse_days(&["mon".into(), "thu".into(), "fri".into(), "sat".into()]).unwrap(),
        });
        other.model_quota[0][0] = Some(5);
        other.resources.push("nvidia.com/mig-3g.40gb".into());
        other.nodes[0].units.push(UnitGroup { resource: 1, count: 4, share: 3.0 / 7.0 });
        let mut with_mig = jobs.clone();
        for (i, j) in with_mig.iter_mut().enumerate() {
            if i % 7 == 0 {
                j.resource = 1;
                j.count = 1;
            }
        }
        for (setup, jobs) in [(&s, &jobs), (&other, &with_mig)] {
            let a = replay_ticks(setup, jobs, true);
            let b = replay_ticks(setup, jobs, false);
            assert!(a.pods.iter().any(|p| p.preempted), "the demand makes b evict a");
            assert_eq!(a.pods, b.pods);
            assert_eq!(a.pending_gpu_s, b.pending_gpu_s);
            assert_eq!(a.pending_by_hour, b.pending_by_hour);
            assert!(a.passes < b.passes / 2, "{} passes vs {}", a.passes, b.passes);
        }
    }
}
