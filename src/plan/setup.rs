//! What a replay runs under and what it gives: the pool (nodes and their units), the recorded
//! demand (jobs), quotas, priority classes, cohorts and time windows (`Setup`), and the pods'
//! outcomes (`Outcome`). The replay itself is `model`, its state `state`.

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
