//! The replay's state between passes: free units per node and resource, quota use per
//! namespace, team and cohort, running and pending pods, and the buckets that let a pass skip
//! pods whose cause of waiting has not come free (`model` drives it).

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use super::setup::*;

/// A pending pod's place in the binding order: highest priority, then oldest.
pub(super) type Key = (Reverse<i64>, Ms, usize);

/// The pods a pass left pending for one cause, namespace and resource; `swept_at`: the epoch
/// they were all last looked at (a cause that came free after it makes them worth a look).
#[derive(Debug, Default)]
pub(super) struct Bucket {
    pub(super) keys: BTreeSet<Key>,
    pub(super) swept_at: u64,
    /// Whether a pod in it may evict others (then free units alone do not say it is stuck).
    pub(super) may_preempt: bool,
}

/// Buckets keep pods apart by request up to this many units (larger ones share the last).
pub(super) const REQ_CLASSES: usize = 16;

/// Why a pass left a pod pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Blocked {
    Window,
    Quota,
    Room,
}

pub(super) struct State<'a> {
    pub(super) skip: bool,
    pub(super) setup: &'a Setup,
    pub(super) jobs: &'a [Job],
    pub(super) free: Vec<Vec<u32>>,
    /// Per node and resource: the index of its unit group in `free`.
    pub(super) group_of: Vec<Vec<Option<usize>>>,
    /// Per resource: the nodes offering it, in order.
    pub(super) nodes_with: Vec<Vec<usize>>,
    /// Per node: whether it is in the pool at the current pass.
    pub(super) avail: Vec<bool>,
    /// Per resource and model: the most free units on one available node.
    pub(super) max_free: Vec<Vec<u32>>,
    /// Counts the events that free something (a pod leaving, a boundary): a pending pod left
    /// pending at epoch `e` can only bind once something it waits for came free after `e`.
    pub(super) epoch: u64,
    /// Per resource and model, per namespace: the epoch units / quota use last came free.
    pub(super) freed_units_at: Vec<Vec<u64>>,
    pub(super) freed_quota_at: Vec<u64>,
    pub(super) boundary_at: u64,
    /// Per namespace: the namespaces whose quota use it shares (team quotas, cohorts), itself first.
    pub(super) related: Vec<Vec<usize>>,
    /// Per pod: the epoch it was last left pending at, and its bucket then.
    pub(super) tried_at: Vec<u64>,
    pub(super) bucket_of: Vec<Option<usize>>,
    /// Pods left pending, by cause, namespace and resource (`bucket_index`).
    pub(super) buckets: Vec<Bucket>,
    /// Pending keys queued since the last pass.
    pub(super) fresh: Vec<Key>,
    /// Per node: running pod ids.
    pub(super) on_node: Vec<Vec<usize>>,
    pub(super) used: Vec<u32>,
    pub(super) used_model: Vec<Vec<u32>>,
    pub(super) used_shared: Vec<u32>,
    pub(super) used_cohort: Vec<u32>,
    pub(super) cohort_of: Vec<Option<(usize, Option<u32>)>>,
    pub(super) shared_of: Vec<Vec<usize>>,
    pub(super) cohort_nominal: Vec<u32>,
    pub(super) pods: Vec<PodOutcome>,
    /// Run time left for each pod once it starts (`None`: open-ended).
    pub(super) left: Vec<Option<Ms>>,
    pub(super) attempt: Vec<usize>,
    pub(super) ends: BinaryHeap<Reverse<(Ms, usize)>>,
    /// Per pod: the node it runs on.
    pub(super) live: Vec<Option<usize>>,
    pub(super) pending: BTreeSet<Key>,
    pub(super) pending_sum: Vec<i64>,
    pub(super) later: BinaryHeap<Reverse<(Ms, usize)>>,
}

impl State<'_> {
    pub(super) fn class_of(&self, pod: usize) -> usize {
        let p = &self.pods[pod];
        self.setup.class_override[p.ns].unwrap_or(p.class)
    }

    pub(super) fn value(&self, pod: usize) -> i64 {
        self.setup.classes[self.class_of(pod)].value
    }

    pub(super) fn enqueue(&mut self, pod: usize) {
        let key = (Reverse(self.value(pod)), self.pods[pod].created, pod);
        self.pending.insert(key);
        self.fresh.push(key);
        self.pending_sum[self.pods[pod].ns] += self.pods[pod].count as i64;
    }

    pub(super) fn new_pod(&mut self, job: usize, created: Ms, left: Option<Ms>, attempt: usize) -> usize {
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
    pub(super) fn quota_admits(&self, ns: usize, req: u32) -> bool {
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

    pub(super) fn node_fits(&self, pod: usize, node: usize, t: Ms) -> bool {
        let n = &self.setup.nodes[node];
        debug_assert_eq!(self.avail[node], t >= n.available_from && t < n.available_to);
        self.avail[node] && self.model_ok(pod, n.model) && self.group_of[node].get(self.pods[pod].resource).copied().flatten().is_some()
    }

    pub(super) fn free_of(&self, node: usize, resource: usize) -> u32 {
        self.group_of[node].get(resource).copied().flatten().map_or(0, |i| self.free[node][i])
    }

    pub(super) fn take(&mut self, node: usize, resource: usize, n: u32, give_back: bool) {
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
    pub(super) fn refresh_max(&mut self, resource: usize, model: usize) {
        let mut m = 0;
        for &n in &self.nodes_with[resource] {
            if self.avail[n] && self.setup.nodes[n].model == model {
                m = m.max(self.free_of(n, resource));
            }
        }
        self.max_free[resource][model] = m;
    }

    /// Which nodes are in the pool at `t`, and the most free units per resource and model.
    pub(super) fn start_pass(&mut self, t: Ms) {
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
    pub(super) fn model_ok(&self, pod: usize, model: usize) -> bool {
        let p = &self.pods[pod];
        if p.resource != GPU_RESOURCE {
            return true;
        }
        self.setup.affinity[p.ns][model] && self.setup.model_quota[p.ns][model].is_none_or(|h| self.used_model[p.ns][model] + p.count <= h)
    }

    pub(super) fn bucket_index(&self, cause: Blocked, ns: usize, resource: usize, req: u32) -> usize {
        let kind = match cause {
            Blocked::Window => 0,
            Blocked::Quota => 1,
            Blocked::Room => 2,
        };
        let class = (req as usize).clamp(1, REQ_CLASSES) - 1;
        ((kind * self.setup.namespaces.len() + ns) * self.setup.resources.len() + resource) * REQ_CLASSES + class
    }

    /// The last epoch a cause of bucket (`cause`, `ns`, `resource`) came free at.
    pub(super) fn freed_at(&self, cause: Blocked, ns: usize, resource: usize) -> u64 {
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
    pub(super) fn gather(&mut self, after: Option<Key>) -> Vec<Key> {
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
    pub(super) fn unstick(&mut self, pod: usize) {
        if let Some(b) = self.bucket_of[pod].take() {
            let key = (Reverse(self.value(pod)), self.pods[pod].created, pod);
            self.buckets[b].keys.remove(&key);
        }
    }

    /// A pod the pass leaves pending, and why.
    pub(super) fn stick(&mut self, pod: usize, cause: Blocked) {
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
    pub(super) fn place(&self, pod: usize, t: Ms) -> Option<usize> {
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
    pub(super) fn victims(&self, pod: usize, t: Ms) -> Option<Vec<usize>> {
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

    pub(super) fn hold(&mut self, pod: usize, node: usize, give_back: bool) {
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

    pub(super) fn bind(&mut self, pod: usize, node: usize, t: Ms) {
        let job = &self.jobs[self.pods[pod].job];
        let delay = job.delays.get(self.attempt[pod]).or(job.delays.last()).copied().unwrap_or(0);
        self.bind_at(pod, node, t, t + delay);
    }

    pub(super) fn bind_at(&mut self, pod: usize, node: usize, scheduled: Ms, started: Ms) {
        self.hold(pod, node, false);
        let p = &mut self.pods[pod];
        p.scheduled = Some(scheduled);
        p.started = Some(started);
        p.node = Some(node);
        if let Some(left) = self.left[pod] {
            self.ends.push(Reverse((started + left, pod)));
        }
    }

    pub(super) fn finish(&mut self, pod: usize, at: Ms) {
        let node = self.live[pod].expect("finishing a running pod");
        self.hold(pod, node, true);
        self.pods[pod].finished = Some(at);
    }

    pub(super) fn preempt(&mut self, victim: usize, t: Ms) {
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
