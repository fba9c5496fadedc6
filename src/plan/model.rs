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
    pub end_reason: Option<std::sync::Arc<str>>,
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

/// A pending pod's place in the binding order: highest priority, then oldest.
type Key = (Reverse<i64>, Ms, usize);

/// The pods a pass left pending for one cause, namespace and resource; `swept_at`: the epoch
/// they were all last looked at (a cause that came free after it makes them worth a look).
#[derive(Debug, Default)]
struct Bucket {
    keys: BTreeSet<Key>,
    swept_at: u64,
    /// Whether a pod in it may evict others (then free units alone do not say it is stuck).
    may_preempt: bool,
}

/// Buckets keep pods apart by request up to this many units (larger ones share the last).
const REQ_CLASSES: usize = 16;

/// Why a pass left a pod pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blocked {
    Window,
    Quota,
    Room,
}

struct State<'a> {
    skip: bool,
    setup: &'a Setup,
    jobs: &'a [Job],
    free: Vec<Vec<u32>>,
    /// Per node and resource: the index of its unit group in `free`.
    group_of: Vec<Vec<Option<usize>>>,
    /// Per resource: the nodes offering it, in order.
    nodes_with: Vec<Vec<usize>>,
    /// Per node: whether it is in the pool at the current pass.
    avail: Vec<bool>,
    /// Per resource and model: the most free units on one available node.
    max_free: Vec<Vec<u32>>,
    /// Counts the events that free something (a pod leaving, a boundary): a pending pod left
    /// pending at epoch `e` can only bind once something it waits for came free after `e`.
    epoch: u64,
    /// Per resource and model, per namespace: the epoch units / quota use last came free.
    freed_units_at: Vec<Vec<u64>>,
    freed_quota_at: Vec<u64>,
    boundary_at: u64,
    /// Per namespace: the namespaces whose quota use it shares (team quotas, cohorts), itself first.
    related: Vec<Vec<usize>>,
    /// Per pod: the epoch it was last left pending at, and its bucket then.
    tried_at: Vec<u64>,
    bucket_of: Vec<Option<usize>>,
    /// Pods left pending, by cause, namespace and resource (`bucket_index`).
    buckets: Vec<Bucket>,
    /// Pending keys queued since the last pass.
    fresh: Vec<Key>,
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
    pending: BTreeSet<Key>,
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
        self.fresh.push(key);
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
        self.tried_at.push(0);
        self.bucket_of.push(None);
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
            Some((c, limit)) => limit.is_none_or(|b| self.used[ns] + req <= hard + b) && self.used_cohort[c] + req <= self.cohort_nominal[c],
            None => false,
        }
    }

    fn node_fits(&self, pod: usize, node: usize, t: Ms) -> bool {
        let n = &self.setup.nodes[node];
        debug_assert_eq!(self.avail[node], t >= n.available_from && t < n.available_to);
        self.avail[node] && self.model_ok(pod, n.model) && self.group_of[node].get(self.pods[pod].resource).copied().flatten().is_some()
    }

    fn free_of(&self, node: usize, resource: usize) -> u32 {
        self.group_of[node].get(resource).copied().flatten().map_or(0, |i| self.free[node][i])
    }

    fn take(&mut self, node: usize, resource: usize, n: u32, give_back: bool) {
        if let Some(i) = self.group_of[node].get(resource).copied().flatten() {
            let model = self.setup.nodes[node].model;
            let before = self.free[node][i];
            if give_back {
                self.free[node][i] += n;
                if self.avail[node] {
                    let m = &mut self.max_free[resource][model];
                    *m = (*m).max(before + n);
                }
            } else {
                self.free[node][i] -= n;
                // Only the node that held the most can lower the most.
                if self.avail[node] && before == self.max_free[resource][model] {
                    self.refresh_max(resource, model);
                }
            }
        }
    }

    /// Recomputes `max_free` of one resource and model.
    fn refresh_max(&mut self, resource: usize, model: usize) {
        let mut m = 0;
        for &n in &self.nodes_with[resource] {
            if self.avail[n] && self.setup.nodes[n].model == model {
                m = m.max(self.free_of(n, resource));
            }
        }
        self.max_free[resource][model] = m;
    }

    /// Which nodes are in the pool at `t`, and the most free units per resource and model.
    fn start_pass(&mut self, t: Ms) {
        for (i, n) in self.setup.nodes.iter().enumerate() {
            self.avail[i] = t >= n.available_from && t < n.available_to;
        }
        for r in 0..self.max_free.len() {
            for m in 0..self.max_free[r].len() {
                self.refresh_max(r, m);
            }
        }
    }

    /// Whether a pod may run on nodes of `model` at all (affinity, model quota).
    fn model_ok(&self, pod: usize, model: usize) -> bool {
        let p = &self.pods[pod];
        if p.resource != GPU_RESOURCE {
            return true;
        }
        self.setup.affinity[p.ns][model] && self.setup.model_quota[p.ns][model].is_none_or(|h| self.used_model[p.ns][model] + p.count <= h)
    }

    fn bucket_index(&self, cause: Blocked, ns: usize, resource: usize, req: u32) -> usize {
        let kind = match cause {
            Blocked::Window => 0,
            Blocked::Quota => 1,
            Blocked::Room => 2,
        };
        let class = (req as usize).clamp(1, REQ_CLASSES) - 1;
        ((kind * self.setup.namespaces.len() + ns) * self.setup.resources.len() + resource) * REQ_CLASSES + class
    }

    /// The last epoch a cause of bucket (`cause`, `ns`, `resource`) came free at.
    fn freed_at(&self, cause: Blocked, ns: usize, resource: usize) -> u64 {
        let quota = || self.related[ns].iter().map(|&n| self.freed_quota_at[n]).max().unwrap_or(0);
        let b = self.boundary_at;
        match cause {
            Blocked::Window => b,
            Blocked::Quota => b.max(quota()),
            Blocked::Room => {
                let units = (0..self.setup.models.len())
                    .filter(|&m| resource != GPU_RESOURCE || self.setup.affinity[ns][m])
                    .map(|m| self.freed_units_at[resource][m])
                    .max()
                    .unwrap_or(0);
                let model_quota = resource == GPU_RESOURCE && self.setup.model_quota[ns].iter().any(Option::is_some);
                b.max(units).max(if model_quota { self.freed_quota_at[ns] } else { 0 })
            }
        }
    }

    /// The pending pods worth a look, in binding order: all queued since the last pass, and
    /// those whose cause came free after they were left pending; after `after` only.
    fn gather(&mut self, after: Option<Key>) -> Vec<Key> {
        let mut keys: Vec<Key> = std::mem::take(&mut self.fresh);
        let (nns, nres) = (self.setup.namespaces.len(), self.setup.resources.len());
        for (kind, cause) in [Blocked::Window, Blocked::Quota, Blocked::Room].into_iter().enumerate() {
            for ns in 0..nns {
                for r in 0..nres {
                    for class in 0..REQ_CLASSES {
                        let i = ((kind * nns + ns) * nres + r) * REQ_CLASSES + class;
                        if self.buckets[i].keys.is_empty() {
                            continue;
                        }
                        let freed = self.freed_at(cause, ns, r);
                        if freed <= self.buckets[i].swept_at {
                            continue;
                        }
                        // No pod of it fits on any node, and none may evict: still stuck.
                        let req = class as u32 + 1;
                        if cause == Blocked::Room
                            && !self.buckets[i].may_preempt
                            && !(0..self.setup.models.len()).any(|m| self.max_free[r][m] >= req && (r != GPU_RESOURCE || self.setup.affinity[ns][m]))
                        {
                            continue;
                        }
                        let tried = &self.tried_at;
                        keys.extend(self.buckets[i].keys.iter().copied().filter(|k| tried[k.2] < freed && after.is_none_or(|a| *k > a)));
                        if after.is_none() {
                            self.buckets[i].swept_at = self.epoch;
                        }
                    }
                }
            }
        }
        if let Some(a) = after {
            keys.retain(|k| *k > a);
        }
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Takes a pod out of its bucket before a pass looks at it.
    fn unstick(&mut self, pod: usize) {
        if let Some(b) = self.bucket_of[pod].take() {
            let key = (Reverse(self.value(pod)), self.pods[pod].created, pod);
            self.buckets[b].keys.remove(&key);
        }
    }

    /// A pod the pass leaves pending, and why.
    fn stick(&mut self, pod: usize, cause: Blocked) {
        self.tried_at[pod] = self.epoch;
        if self.skip {
            let b = self.bucket_index(cause, self.pods[pod].ns, self.pods[pod].resource, self.pods[pod].count);
            if self.bucket_of[pod] == Some(b) {
                return;
            }
            self.unstick(pod);
            let key = (Reverse(self.value(pod)), self.pods[pod].created, pod);
            let preempts = self.setup.preemption && self.setup.classes[self.class_of(pod)].preempts;
            let bucket = &mut self.buckets[b];
            bucket.keys.insert(key);
            bucket.may_preempt |= preempts;
            self.bucket_of[pod] = Some(b);
        }
    }

    /// Best fit: the acceptable node left with the fewest free units; the first on a tie.
    fn place(&self, pod: usize, t: Ms) -> Option<usize> {
        let (resource, req) = (self.pods[pod].resource, self.pods[pod].count);
        // Most pending pods fit nowhere: said without looking at a node.
        if !(0..self.setup.models.len()).any(|m| self.max_free[resource][m] >= req && self.model_ok(pod, m)) {
            return None;
        }
        let mut best: Option<(usize, u32)> = None;
        for &node in &self.nodes_with[resource] {
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
        for &node in &self.nodes_with[resource] {
            if !self.node_fits(pod, node, t) {
                continue;
            }
            let mut free = self.free_of(node, resource);
            let evictable: u32 =
                self.on_node[node].iter().filter(|&&p| self.pods[p].resource == resource && self.value(p) < value).map(|&p| self.pods[p].count).sum();
            if free + evictable < req {
                continue;
            }
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
        if give_back {
            self.epoch += 1;
            self.freed_units_at[resource][self.setup.nodes[node].model] = self.epoch;
            if resource == GPU_RESOURCE {
                self.freed_quota_at[ns] = self.epoch;
            }
        }
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
