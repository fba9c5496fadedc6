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

use chrono::{DateTime, Datelike, Timelike, Weekday};
use chrono_tz::Tz;

/// Milliseconds since the epoch (UTC).
pub type Ms = i64;

/// A node of the pool and what it offers.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    pub name: String,
    /// Index into [`Setup::models`].
    pub model: usize,
    pub units: Vec<UnitGroup>,
    /// Placements are possible in `[available_from, available_to)`.
    pub available_from: Ms,
    pub available_to: Ms,
}

/// `count` schedulable units of one resource (`nvidia.com/gpu`, a MIG profile, a time-slicing
/// replica), each `share` of a physical GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitGroup {
    pub resource: usize,
    pub count: u32,
    pub share: f64,
}

/// A priority class: its value and whether its pods evict lower ones (`PreemptLowerPriority`).
#[derive(Debug, Clone, PartialEq)]
pub struct Class {
    pub name: String,
    pub value: i64,
    pub preempts: bool,
}

/// One unit of recorded demand: a pod, or a chain of pods where each was preempted and
/// re-created by its controller for the work left.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub ns: usize,
    pub name: String,
    /// Index into [`Setup::classes`].
    pub class: usize,
    pub resource: usize,
    pub count: u32,
    pub created: Ms,
    /// Bind-to-start delay of each recorded attempt (image pull, init); the last repeats.
    pub delays: Vec<Ms>,
    /// Run time in total; `None` when it was still running (or pending) at the window's end.
    pub run: Option<Ms>,
    /// How its last attempt ended ("Completed", "Error", "OOMKilled", "Preempted"...).
    pub end_reason: Option<String>,
    /// Running when the window opened: the node it ran on and when it was bound and started.
    pub carried: Option<Carried>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Carried {
    pub node: String,
    pub scheduled: Ms,
    pub started: Ms,
}

/// A time window a namespace may start pods in (local minutes of the day, weekdays).
#[derive(Debug, Clone, PartialEq)]
pub struct TimeWindow {
    pub tz: Tz,
    pub start_min: u32,
    pub end_min: u32,
    pub days: Vec<Weekday>,
}

impl TimeWindow {
    pub fn allows(&self, t: Ms) -> bool {
        let Some(utc) = DateTime::from_timestamp_millis(t) else { return false };
        let local = utc.with_timezone(&self.tz);
        let minute = local.hour() * 60 + local.minute();
        // A band past midnight belongs to the day it started on.
        let (inside, day) = if self.start_min < self.end_min {
            (minute >= self.start_min && minute < self.end_min, local.weekday())
        } else if minute >= self.start_min {
            (true, local.weekday())
        } else {
            (minute < self.end_min, local.weekday().pred())
        };
        inside && self.days.contains(&day)
    }
}

/// A Kueue-style cohort: members may borrow the nominal quota other members leave unused.
#[derive(Debug, Clone, PartialEq)]
pub struct Cohort {
    pub name: String,
    /// (namespace, borrowing limit in GPUs; `None`: no limit).
    pub members: Vec<(usize, Option<u32>)>,
}

/// A quota shared by several namespaces (a team's).
#[derive(Debug, Clone, PartialEq)]
pub struct SharedQuota {
    pub name: String,
    pub members: Vec<usize>,
    pub hard: u32,
}

/// Everything a replay runs under: the pool, quotas, priorities and policies.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    pub from: Ms,
    pub to: Ms,
    pub step: Ms,
    pub models: Vec<String>,
    /// Resource names; index 0 is `nvidia.com/gpu`, the one quotas count.
    pub resources: Vec<String>,
    pub nodes: Vec<NodeSpec>,
    pub classes: Vec<Class>,
    pub namespaces: Vec<String>,
    /// Per namespace: its class when a policy overrides the pods' own.
    pub class_override: Vec<Option<usize>>,
    /// Per namespace: whole-GPU quota (`nvidia.com/gpu`).
    pub quota: Vec<Option<u32>>,
    /// Per namespace and model: whole-GPU quota on that model.
    pub model_quota: Vec<Vec<Option<u32>>>,
    pub shared_quotas: Vec<SharedQuota>,
    pub cohorts: Vec<Cohort>,
    /// Per namespace and model: whether its whole-GPU pods may run there (node affinity).
    pub affinity: Vec<Vec<bool>>,
    pub windows: Vec<Option<TimeWindow>>,
    pub preemption: bool,
}

pub const GPU_RESOURCE: usize = 0;
/// A preempted pod's controller does not re-create it for less work than this (the simulator's rule).
pub const MIN_REPLACEMENT_MS: Ms = 60_000;
/// The replacement pod appears this long after its predecessor was evicted.
pub const REPLACEMENT_DELAY_MS: Ms = 1_000;

/// One pod of the replay: an attempt of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct PodOutcome {
    pub job: usize,
    pub ns: usize,
    pub class: usize,
    pub resource: usize,
    pub count: u32,
    pub created: Ms,
    pub scheduled: Option<Ms>,
    pub started: Option<Ms>,
    /// `None`: still running (or never started) when the replay ended.
    pub finished: Option<Ms>,
    pub node: Option<usize>,
    pub preempted: bool,
}

/// What happened in a replay.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Outcome {
    pub pods: Vec<PodOutcome>,
    /// Per namespace: pending GPU-seconds (each pending tick adds the pod's GPU request x step).
    pub pending_gpu_s: Vec<i64>,
    /// Per namespace and hour of the window: pending GPU-seconds.
    pub pending_by_hour: Vec<Vec<i64>>,
    /// Binding passes run (the ticks where something could change).
    pub passes: u64,
    /// Running-at-start pods that could not be put back on their node (it is gone or full).
    pub carried_requeued: u64,
}

struct State<'a> {
    setup: &'a Setup,
    jobs: &'a [Job],
    free: Vec<Vec<u32>>,
    /// Per node: running pod ids.
    on_node: Vec<Vec<usize>>,
    used: Vec<u32>,
    used_model: Vec<Vec<u32>>,
    used_shared: Vec<u32>,
    used_cohort: Vec<u32>,
    cohort_of: Vec<Option<(usize, Option<u32>)>>,
    shared_of: Vec<Vec<usize>>,
    cohort_nominal: Vec<u32>,
    pods: Vec<PodOutcome>,
    /// Run time left for each pod once it starts (`None`: open-ended).
    left: Vec<Option<Ms>>,
    attempt: Vec<usize>,
    ends: BinaryHeap<Reverse<(Ms, usize)>>,
    /// Per pod: the node it runs on.
    live: Vec<Option<usize>>,
    pending: BTreeSet<(Reverse<i64>, Ms, usize)>,
    pending_sum: Vec<i64>,
    later: BinaryHeap<Reverse<(Ms, usize)>>,
}

impl State<'_> {
    fn class_of(&self, pod: usize) -> usize {
        let p = &self.pods[pod];
        self.setup.class_override[p.ns].unwrap_or(p.class)
    }

    fn value(&self, pod: usize) -> i64 {
        self.setup.classes[self.class_of(pod)].value
    }

    fn enqueue(&mut self, pod: usize) {
        let key = (Reverse(self.value(pod)), self.pods[pod].created, pod);
        self.pending.insert(key);
        self.pending_sum[self.pods[pod].ns] += self.pods[pod].count as i64;
    }

    fn new_pod(&mut self, job: usize, created: Ms, left: Option<Ms>, attempt: usize) -> usize {
        let j = &self.jobs[job];
        self.pods.push(PodOutcome {
            job,
            ns: j.ns,
            class: j.class,
            resource: j.resource,
            count: j.count,
            created,
            scheduled: None,
            started: None,
            finished: None,
            node: None,
            preempted: false,
        });
        self.left.push(left);
        self.attempt.push(attempt);
        self.live.push(None);
        self.pods.len() - 1
    }

    /// Whether the namespace's quotas admit `req` more whole GPUs (the model quotas are
    /// checked per node).
    fn quota_admits(&self, ns: usize, req: u32) -> bool {
        for &g in &self.shared_of[ns] {
            if self.used_shared[g] + req > self.setup.shared_quotas[g].hard {
                return false;
            }
        }
        let Some(hard) = self.setup.quota[ns] else { return true };
        if self.used[ns] + req <= hard {
            return true;
        }
        match self.cohort_of[ns] {
            Some((c, limit)) => {
                limit.is_none_or(|b| self.used[ns] + req <= hard + b) && self.used_cohort[c] + req <= self.cohort_nominal[c]
            }
            None => false,
        }
    }

    fn node_fits(&self, pod: usize, node: usize, t: Ms) -> bool {
        let p = &self.pods[pod];
        let n = &self.setup.nodes[node];
        if t < n.available_from || t >= n.available_to {
            return false;
        }
        if p.resource == GPU_RESOURCE {
            if !self.setup.affinity[p.ns][n.model] {
                return false;
            }
            if let Some(h) = self.setup.model_quota[p.ns][n.model] {
                if self.used_model[p.ns][n.model] + p.count > h {
                    return false;
                }
            }
        }
        n.units.iter().any(|g| g.resource == p.resource)
    }

    fn free_of(&self, node: usize, resource: usize) -> u32 {
        self.setup.nodes[node].units.iter().position(|g| g.resource == resource).map_or(0, |i| self.free[node][i])
    }

    fn take(&mut self, node: usize, resource: usize, n: u32, give_back: bool) {
        if let Some(i) = self.setup.nodes[node].units.iter().position(|g| g.resource == resource) {
            if give_back {
                self.free[node][i] += n;
            } else {
                self.free[node][i] -= n;
            }
        }
    }

    /// Best fit: the acceptable node left with the fewest free units; the first on a tie.
    fn place(&self, pod: usize, t: Ms) -> Option<usize> {
        let (resource, req) = (self.pods[pod].resource, self.pods[pod].count);
        let mut best: Option<(usize, u32)> = None;
        for node in 0..self.setup.nodes.len() {
            if !self.node_fits(pod, node, t) {
                continue;
            }
            let free = self.free_of(node, resource);
            if free >= req && best.is_none_or(|b| free - req < b.1) {
                best = Some((node, free - req));
            }
        }
        best.map(|b| b.0)
    }

    /// The fewest lower-priority pods whose eviction frees enough units on one node.
    fn victims(&self, pod: usize, t: Ms) -> Option<Vec<usize>> {
        let (resource, req, value) = (self.pods[pod].resource, self.pods[pod].count, self.value(pod));
        let mut best: Option<Vec<usize>> = None;
        for node in 0..self.setup.nodes.len() {
            if !self.node_fits(pod, node, t) {
                continue;
            }
            let mut free = self.free_of(node, resource);
            let mut candidates: Vec<usize> =
                self.on_node[node].iter().copied().filter(|&p| self.pods[p].resource == resource && self.value(p) < value).collect();
            candidates.sort_by_key(|&p| (self.value(p), Reverse(self.pods[p].started), p));
            let mut chosen = Vec::new();
            for v in candidates {
                if free >= req {
                    break;
                }
                free += self.pods[v].count;
                chosen.push(v);
            }
            if free >= req && !chosen.is_empty() && best.as_ref().is_none_or(|b| chosen.len() < b.len()) {
                best = Some(chosen);
            }
        }
        best
    }

    fn hold(&mut self, pod: usize, node: usize, give_back: bool) {
        let (ns, resource, count) = (self.pods[pod].ns, self.pods[pod].resource, self.pods[pod].count);
        self.take(node, resource, count, give_back);
        if resource == GPU_RESOURCE {
            let model = self.setup.nodes[node].model;
            let sign = |x: &mut u32| if give_back { *x -= count } else { *x += count };
            sign(&mut self.used[ns]);
            sign(&mut self.used_model[ns][model]);
            for g in self.shared_of[ns].clone() {
                sign(&mut self.used_shared[g]);
            }
            if let Some((c, _)) = self.cohort_of[ns] {
                sign(&mut self.used_cohort[c]);
            }
        }
        if give_back {
            self.on_node[node].retain(|&p| p != pod);
            self.live[pod] = None;
        } else {
            self.on_node[node].push(pod);
            self.live[pod] = Some(node);
        }
    }

    fn bind(&mut self, pod: usize, node: usize, t: Ms) {
        let job = &self.jobs[self.pods[pod].job];
        let delay = job.delays.get(self.attempt[pod]).or(job.delays.last()).copied().unwrap_or(0);
        self.bind_at(pod, node, t, t + delay);
    }

    fn bind_at(&mut self, pod: usize, node: usize, scheduled: Ms, started: Ms) {
        self.hold(pod, node, false);
        let p = &mut self.pods[pod];
        p.scheduled = Some(scheduled);
        p.started = Some(started);
        p.node = Some(node);
        if let Some(left) = self.left[pod] {
            self.ends.push(Reverse((started + left, pod)));
        }
    }

    fn finish(&mut self, pod: usize, at: Ms) {
        let node = self.live[pod].expect("finishing a running pod");
        self.hold(pod, node, true);
        self.pods[pod].finished = Some(at);
    }

    fn preempt(&mut self, victim: usize, t: Ms) {
        let started = self.pods[victim].started.expect("victims are bound");
        let done = (t - started).max(0);
        self.finish(victim, t.max(started));
        self.pods[victim].preempted = true;
        let left = self.left[victim].map(|l| l - done);
        if left.is_none_or(|l| l >= MIN_REPLACEMENT_MS) {
            let job = self.pods[victim].job;
            let next = self.new_pod(job, t + REPLACEMENT_DELAY_MS, left, self.attempt[victim] + 1);
            self.later.push(Reverse((t + REPLACEMENT_DELAY_MS, next)));
        }
    }
}

/// Replays `jobs` (sorted by `created`) under `setup`.
pub fn replay(setup: &Setup, jobs: &[Job]) -> Outcome {
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
        setup,
        jobs,
        free: setup.nodes.iter().map(|n| n.units.iter().map(|g| g.count).collect()).collect(),
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
            bi += 1;
            changed = true;
        }
        // 3. The binding pass.
        if changed && !s.pending.is_empty() {
            out.passes += 1;
            pass(&mut s, t);
        }
        changed = false;
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
        let next = next.max(t + setup.step);
        count_pending(&s, &mut out, setup, t, next.min(setup.to));
        t = next;
    }
    out.pods = s.pods;
    out
}

fn pass(s: &mut State<'_>, t: Ms) {
    let setup = s.setup;
    // Within one pass units are only taken (an eviction gives some back and clears this):
    // a request that found no node fails for any request as large of the same kind.
    let mut no_room: Vec<(usize, usize, u32)> = Vec::new();
    let mut no_victims: Vec<(usize, usize, u32, i64)> = Vec::new();
    let keys: Vec<(Reverse<i64>, Ms, usize)> = s.pending.iter().copied().collect();
    for key in keys {
        let pod = key.2;
        let (ns, resource, req) = (s.pods[pod].ns, s.pods[pod].resource, s.pods[pod].count);
        if let Some(w) = &setup.windows[ns] {
            if !w.allows(t) {
                continue;
            }
        }
        if resource == GPU_RESOURCE && !s.quota_admits(ns, req) {
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
                        no_room.clear();
                        no_victims.clear();
                        node = s.place(pod, t);
                    }
                    None => no_victims.push((ns, resource, req, value)),
                }
            }
        }
        if let Some(n) = node {
            s.pending.remove(&key);
            s.pending_sum[ns] -= req as i64;
            s.bind(pod, n, t);
        }
    }
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
