//! Who uses the pool and how: namespaces with quotas and priority classes, job arrivals with
//! a daily and weekly rhythm, job sizes, durations and behaviours.

use chrono::{DateTime, Datelike, Timelike, Utc, Weekday};

use super::cluster::ModelKind;
use super::rng::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    Low = 0,
    Medium = 1,
    High = 2,
}

impl Priority {
    pub fn class_name(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Medium => "medium",
            Priority::High => "high",
        }
    }
}

/// How a job uses its GPUs, and how it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behavior {
    /// Busy the whole time.
    Normal,
    /// Allocated but idle (a forgotten notebook).
    Idle,
    /// Utilisation keeps dropping to 0 while it waits for data.
    DataStarved,
    /// Crashes part-way and leaves framebuffer held by a zombie process.
    Crash,
    /// Framebuffer grows until the container is OOM-killed.
    Oom,
}

/// What a pod asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// `nvidia.com/gpu`: whole GPUs.
    Gpu,
    /// `nvidia.com/mig-<profile>`: one MIG instance of that profile.
    Mig(&'static str),
    /// `nvidia.com/gpu.shared`: one time-slicing replica of a shared GPU.
    Shared,
    /// HAMi: one vGPU (`nvidia.com/gpu: 1`) with `nvidia.com/gpucores` of this many percent
    /// (chosen with the pod, so a pending pod asks for it too) and that share of the GPU's
    /// framebuffer as `gpumem`; it fits a slot of that share.
    Hami(u32),
}

impl Resource {
    /// A HAMi vGPU's share of its GPU in percent (`nvidia.com/gpucores`).
    pub fn hami_pct(self) -> Option<u32> {
        match self {
            Resource::Hami(pct) => Some(pct),
            _ => None,
        }
    }

    pub fn name(self) -> String {
        match self {
            Resource::Gpu => "nvidia.com/gpu".into(),
            Resource::Mig(p) => format!("nvidia.com/mig-{p}"),
            Resource::Shared => "nvidia.com/gpu.shared".into(),
            Resource::Hami(_) => "nvidia.com/gpu".into(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct NamespaceSpec {
    pub name: &'static str,
    pub team: &'static str,
    pub priority: Priority,
    pub container: &'static str,
    /// Quota of whole GPUs as a fraction of the pool.
    pub quota_frac: f64,
    /// Share of the offered load.
    pub load: f64,
    pub models: &'static [ModelKind],
    /// (GPUs, weight)
    pub sizes: &'static [(u32, f64)],
    pub dur_s: (f64, f64),
    /// Fraction of jobs that ask for a MIG instance instead of whole GPUs.
    pub mig_frac: f64,
    /// Fraction of the other jobs that ask for a time-sliced replica, where the pool has one.
    pub shared_frac: f64,
    pub util: (f64, f64),
    /// Weights for Normal, Idle, DataStarved, Crash, Oom.
    pub behaviors: [f64; 5],
}

use ModelKind::{A100, H100, L4};

/// The six tenants of the simulated cluster.
pub fn default_namespaces() -> Vec<NamespaceSpec> {
    vec![
        NamespaceSpec {
            name: "team-llm",
            team: "foundation-models",
            priority: Priority::High,
            container: "trainer",
            quota_frac: 0.40,
            load: 0.30,
            models: &[H100],
            sizes: &[(2, 1.0), (4, 2.0), (8, 2.0)],
            dur_s: (1800.0, 172_800.0),
            mig_frac: 0.0,
            shared_frac: 0.0,
            util: (70.0, 97.0),
            behaviors: [0.80, 0.0, 0.08, 0.06, 0.06],
        },
        NamespaceSpec {
            name: "team-vision",
            team: "perception",
            priority: Priority::Medium,
            container: "train",
            quota_frac: 0.25,
            load: 0.18,
            models: &[A100, H100],
            sizes: &[(1, 3.0), (2, 2.0), (4, 1.0)],
            dur_s: (900.0, 43_200.0),
            mig_frac: 0.0,
            shared_frac: 0.0,
            util: (55.0, 92.0),
            behaviors: [0.75, 0.0, 0.10, 0.05, 0.10],
        },
        NamespaceSpec {
            name: "team-recsys",
            team: "ads",
            priority: Priority::Medium,
            container: "worker",
            quota_frac: 0.20,
            load: 0.14,
            models: &[A100],
            sizes: &[(1, 3.0), (2, 1.0)],
            dur_s: (1800.0, 28_800.0),
            mig_frac: 0.0,
            shared_frac: 0.0,
            util: (45.0, 85.0),
            behaviors: [0.70, 0.0, 0.20, 0.05, 0.05],
        },
        NamespaceSpec {
            name: "team-research",
            team: "research",
            priority: Priority::Low,
            container: "notebook",
            quota_frac: 0.20,
            load: 0.16,
            models: &[A100, H100],
            sizes: &[(1, 4.0), (2, 1.0)],
            dur_s: (3600.0, 259_200.0),
            mig_frac: 0.0,
            shared_frac: 0.0,
            util: (30.0, 90.0),
            behaviors: [0.45, 0.45, 0.0, 0.05, 0.05],
        },
        NamespaceSpec {
            name: "team-inference",
            team: "serving",
            priority: Priority::High,
            container: "server",
            quota_frac: 0.15,
            load: 0.12,
            models: &[L4],
            sizes: &[(1, 1.0)],
            dur_s: (21_600.0, 259_200.0),
            mig_frac: 0.5,
            shared_frac: 0.4,
            util: (20.0, 60.0),
            behaviors: [0.85, 0.10, 0.0, 0.05, 0.0],
        },
        NamespaceSpec {
            name: "team-batch",
            team: "data-platform",
            priority: Priority::Low,
            container: "job",
            quota_frac: 0.16,
            load: 0.10,
            models: &[L4, A100],
            sizes: &[(1, 3.0), (2, 1.0)],
            dur_s: (300.0, 7200.0),
            mig_frac: 0.0,
            shared_frac: 0.0,
            util: (50.0, 95.0),
            behaviors: [0.60, 0.0, 0.30, 0.0, 0.10],
        },
    ]
}

/// Arrival-rate multiplier: busy working hours, quieter nights, quiet weekends (mean ~1).
pub fn rhythm(t: DateTime<Utc>) -> f64 {
    let weekend = matches!(t.weekday(), Weekday::Sat | Weekday::Sun);
    let h = t.hour();
    let f = if weekend {
        0.35
    } else if (9..19).contains(&h) {
        1.8
    } else {
        0.6
    };
    f / 0.886
}

/// Mean of a log-uniform distribution on [a, b].
pub fn log_uniform_mean(a: f64, b: f64) -> f64 {
    if (b - a).abs() < f64::EPSILON {
        a
    } else {
        (b - a) / (b / a).ln()
    }
}

impl NamespaceSpec {
    /// The cost centre the namespace's `cost_centre` label names (teams roll up into three).
    pub fn cost_centre(&self) -> &'static str {
        match self.team {
            "foundation-models" | "research" => "rnd-100",
            "perception" | "ads" => "product-200",
            _ => "platform-300",
        }
    }

    /// Mean GPU-hours of one job.
    pub fn mean_job_gpu_hours(&self) -> f64 {
        let w: f64 = self.sizes.iter().map(|(_, w)| w).sum();
        let size: f64 = self.sizes.iter().map(|(s, w)| *s as f64 * w).sum::<f64>() / w;
        let size = size * (1.0 - self.mig_frac) + 0.5 * self.mig_frac;
        size * log_uniform_mean(self.dur_s.0, self.dur_s.1) / 3600.0
    }

    /// Jobs per hour (before the rhythm) that offer `target_util` of the pool times this
    /// namespace's share of the load.
    pub fn base_rate_per_hour(&self, pool_gpus: usize, target_util: f64) -> f64 {
        pool_gpus as f64 * target_util * self.load / self.mean_job_gpu_hours()
    }

    pub fn pick_size(&self, rng: &mut Rng) -> u32 {
        let weights: Vec<f64> = self.sizes.iter().map(|(_, w)| *w).collect();
        self.sizes[rng.weighted(&weights)].0
    }

    pub fn pick_behavior(&self, rng: &mut Rng) -> Behavior {
        [Behavior::Normal, Behavior::Idle, Behavior::DataStarved, Behavior::Crash, Behavior::Oom][rng.weighted(&self.behaviors)]
    }
}
