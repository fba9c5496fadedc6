//! The simulated pool: nodes of 8 GPUs in three models, one node with MIG instances.

/// A GPU model as DCGM names it, with the numbers the signal model needs.
#[derive(Debug)]
pub struct GpuModel {
    pub name: &'static str,
    pub kind: ModelKind,
    pub fb_mib: f32,
    pub idle_w: f64,
    pub max_w: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    H100,
    A100,
    L4,
}

pub static H100: GpuModel = GpuModel { name: "NVIDIA H100 80GB HBM3", kind: ModelKind::H100, fb_mib: 81559.0, idle_w: 72.0, max_w: 700.0 };
pub static A100: GpuModel = GpuModel { name: "NVIDIA A100-SXM4-80GB", kind: ModelKind::A100, fb_mib: 81920.0, idle_w: 58.0, max_w: 400.0 };
pub static L4: GpuModel = GpuModel { name: "NVIDIA L4", kind: ModelKind::L4, fb_mib: 23034.0, idle_w: 16.0, max_w: 72.0 };

/// MIG layout of every GPU on the MIG node: (profile, GPU instance id, compute slices of 7, framebuffer MiB).
pub const MIG_LAYOUT: [(&str, i16, u32, f32); 2] = [("3g.40gb", 1, 3, 40192.0), ("4g.40gb", 2, 4, 40192.0)];

pub const GPUS_PER_NODE: usize = 8;

/// Most schedulable units one physical GPU is carved into (MIG instances or time-slicing
/// replicas).
pub const MAX_UNITS: usize = 4;

#[derive(Debug)]
pub struct Node {
    pub name: String,
    pub model: &'static GpuModel,
    pub mig: bool,
    /// Its GPUs and MIG devices are allocated by DRA ResourceClaims (NVIDIA's DRA driver), not
    /// the device plugin: pods ask for them in a claim, not in their resource requests.
    pub dra: bool,
    /// Indices into `Cluster::units`.
    pub units: Vec<usize>,
}

/// One schedulable GPU: a whole GPU, or one MIG instance of it.
#[derive(Debug)]
pub struct Unit {
    pub node: usize,
    pub gpu_index: i16,
    pub uuid: String,
    pub model: &'static GpuModel,
    pub mig_profile: Option<&'static str>,
    pub gi_id: Option<i16>,
    /// Fraction of the physical GPU: 1 for a whole GPU, slices/7 for a MIG instance.
    pub share: f64,
    pub fb_mib: f32,
    /// Index into `Cluster::gpus`.
    pub gpu: usize,
    /// A time-slicing replica (`nvidia.com/gpu.shared`): the pods holding a GPU's replicas at
    /// an instant share it evenly, 1/n each.
    pub time_sliced: bool,
    /// A HAMi vGPU slot: `share` of its GPU's cores (`nvidia.com/gpucores`), held by one pod;
    /// DCGM shows the GPU once, with no pod (HAMi#1032).
    pub hami: bool,
}

/// One physical GPU and the units carved from it.
#[derive(Debug)]
pub struct PhysicalGpu {
    pub node: usize,
    pub units: Vec<usize>,
    pub model: &'static GpuModel,
    /// When the GPU is not there (its node not yet added or already removed, its board out)
    /// and when a new board took its place.
    pub life: Lifetime,
}

/// A GPU's existence and identity over time. Default: there all along, one board.
#[derive(Debug, Clone, Default)]
pub struct Lifetime {
    /// Intervals `[start, end)` (ms) in which the GPU does not exist, in time order.
    pub absent: Vec<(i64, i64)>,
    /// From this instant on the GPU is a new board with this UUID (a replaced board).
    pub new_board: Option<(i64, String)>,
}

impl Lifetime {
    pub fn exists(&self, t: i64) -> bool {
        !self.absent.iter().any(|&(a, b)| t >= a && t < b)
    }

    /// Whether the GPU exists over all of `[a, b)`.
    pub fn exists_over(&self, a: i64, b: i64) -> bool {
        !self.absent.iter().any(|&(s, e)| s < b && e > a)
    }

    /// Milliseconds of `[a, b)` the GPU exists.
    pub fn existing_ms(&self, a: i64, b: i64) -> i64 {
        let gone: i64 = self.absent.iter().map(|&(s, e)| (e.min(b) - s.max(a)).max(0)).sum();
        (b - a).max(0) - gone
    }
}

/// How the pool changes under the collector (`simulate --autoscale`, `--replace-gpu`): the
/// shapes of a cloud cluster the simulator adds to the pool it built.
#[derive(Debug, Clone, Copy, Default)]
pub struct PoolShape {
    /// One more L4 node the cluster autoscaler adds at 06:00 of the window's first day and
    /// removes at 18:00 (pods are placed there only if they end before it goes).
    pub autoscale: bool,
    /// The first whole GPU of the first node has its board replaced on the window's first day:
    /// out from 12:00 to 12:30, then a new board with a new UUID.
    pub replace_gpu: bool,
    /// One more H100 node of `HAMI_GPUS` GPUs that HAMi shares: each GPU is `HAMI_SLOTS_PCT`
    /// vGPU slots (pods request `nvidia.com/gpu: 1` and the slot's `gpucores` and `gpumem`), the
    /// node advertises `HAMI_SPLIT` vGPUs per GPU as `nvidia.com/gpu`, and DCGM names no pod there.
    pub hami: bool,
    /// The first whole-GPU node and the first MIG node allocate their devices through DRA
    /// ResourceClaims: dcgm-exporter adds the claim's labels, the pods request no GPU resource.
    pub dra: bool,
}

/// The HAMi node's GPUs, their vGPU slots (percent of the cores each, summing to 100) and the
/// vGPUs per GPU it advertises (HAMi's default `deviceSplitCount`).
pub const HAMI_GPUS: usize = 4;
pub const HAMI_SLOTS_PCT: [u32; 4] = [50, 25, 15, 10];
pub const HAMI_SPLIT: usize = 10;

/// The autoscaled node's life, and the replaced board's gap, from the window's first midnight.
pub const AUTOSCALE_FROM_MS: i64 = 6 * 3_600_000;
pub const AUTOSCALE_TO_MS: i64 = 18 * 3_600_000;
pub const REPLACE_FROM_MS: i64 = 12 * 3_600_000;
pub const REPLACE_TO_MS: i64 = 12 * 3_600_000 + 1_800_000;

#[derive(Debug)]
pub struct Cluster {
    pub nodes: Vec<Node>,
    pub units: Vec<Unit>,
    pub gpus: Vec<PhysicalGpu>,
}

impl Cluster {
    /// `gpus` rounded up to whole nodes. From three nodes up, one A100 node is MIG-partitioned
    /// and about one node in eight is L4; the rest are split between H100 and A100.
    pub fn build(gpus: usize, seed: u64) -> Cluster {
        Cluster::build_with(gpus, seed, 0)
    }

    /// As `build`; with `replicas` >= 2 the last GPU of the last node is shared by
    /// time-slicing, offered as that many `nvidia.com/gpu.shared` replicas.
    pub fn build_with(gpus: usize, seed: u64, replicas: usize) -> Cluster {
        let n = gpus.div_ceil(GPUS_PER_NODE).max(1);
        let mut kinds: Vec<(&'static GpuModel, bool)> = Vec::new();
        let mig_nodes = usize::from(n >= 3);
        let l4_nodes = if n >= 2 { (n / 8).max(1) } else { 0 };
        let rest = n - mig_nodes - l4_nodes;
        let h100 = rest.div_ceil(2);
        kinds.extend(std::iter::repeat_n((&H100, false), h100));
        kinds.extend(std::iter::repeat_n((&A100, false), rest - h100));
        kinds.extend(std::iter::repeat_n((&A100, true), mig_nodes));
        kinds.extend(std::iter::repeat_n((&L4, false), l4_nodes));

        let mut cluster = Cluster { nodes: Vec::new(), units: Vec::new(), gpus: Vec::new() };
        for (i, (model, mig)) in kinds.into_iter().enumerate() {
            let node = Node { name: format!("gpu-node-{:02}", i + 1), model, mig, dra: false, units: Vec::new() };
            cluster.nodes.push(node);
            for g in 0..GPUS_PER_NODE {
                let uuid = gpu_uuid(seed, i, g);
                let gpu_idx = cluster.gpus.len();
                let mut phys = PhysicalGpu { node: i, units: Vec::new(), model, life: Lifetime::default() };
                let sliced = replicas >= 2 && i == n - 1 && g == GPUS_PER_NODE - 1 && !mig;
                let layout: Vec<(Option<&'static str>, Option<i16>, f64, f32)> = if sliced {
                    vec![(None, None, 1.0 / replicas.min(MAX_UNITS) as f64, model.fb_mib); replicas.min(MAX_UNITS)]
                } else if mig {
                    MIG_LAYOUT.iter().map(|(p, id, slices, fb)| (Some(*p), Some(*id), *slices as f64 / 7.0, *fb)).collect()
                } else {
                    vec![(None, None, 1.0, model.fb_mib)]
                };
                for (profile, gi, share, fb) in layout {
                    let u = cluster.units.len();
                    cluster.units.push(Unit {
                        node: i,
                        gpu_index: g as i16,
                        uuid: uuid.clone(),
                        model,
                        mig_profile: profile,
                        gi_id: gi,
                        share,
                        fb_mib: fb,
                        gpu: gpu_idx,
                        time_sliced: sliced,
                        hami: false,
                    });
                    phys.units.push(u);
                    cluster.nodes[i].units.push(u);
                }
                cluster.gpus.push(phys);
            }
        }
        cluster
    }

    /// Whole-GPU equivalents in the pool.
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }

    /// The pool changed by `shape` over a window starting at `ws` (UTC midnight, ms).
    pub fn shaped(mut self, shape: PoolShape, ws: i64, seed: u64) -> Cluster {
        if shape.autoscale {
            let i = self.nodes.len();
            let name = format!("gpu-node-as-{:02}", 1);
            self.nodes.push(Node { name, model: &L4, mig: false, dra: false, units: Vec::new() });
            let life = Lifetime { absent: vec![(i64::MIN, ws + AUTOSCALE_FROM_MS), (ws + AUTOSCALE_TO_MS, i64::MAX)], new_board: None };
            for g in 0..GPUS_PER_NODE {
                let (u, gpu) = (self.units.len(), self.gpus.len());
                self.units.push(Unit {
                    node: i,
                    gpu_index: g as i16,
                    uuid: gpu_uuid(seed ^ 0xA5CA_1E00, i, g),
                    model: &L4,
                    mig_profile: None,
                    gi_id: None,
                    share: 1.0,
                    fb_mib: L4.fb_mib,
                    gpu,
                    time_sliced: false,
                    hami: false,
                });
                self.nodes[i].units.push(u);
                self.gpus.push(PhysicalGpu { node: i, units: vec![u], model: &L4, life: life.clone() });
            }
        }
        if shape.hami {
            let i = self.nodes.len();
            self.nodes.push(Node { name: "gpu-node-hami-01".into(), model: &H100, mig: false, dra: false, units: Vec::new() });
            for g in 0..HAMI_GPUS {
                let gpu = self.gpus.len();
                let mut phys = PhysicalGpu { node: i, units: Vec::new(), model: &H100, life: Lifetime::default() };
                let uuid = gpu_uuid(seed ^ 0x4A31_0000, i, g);
                for cores in HAMI_SLOTS_PCT {
                    let u = self.units.len();
                    let share = cores as f64 / 100.0;
                    self.units.push(Unit {
                        node: i,
                        gpu_index: g as i16,
                        uuid: uuid.clone(),
                        model: &H100,
                        mig_profile: None,
                        gi_id: None,
                        share,
                        fb_mib: (H100.fb_mib as f64 * share).round() as f32,
                        gpu,
                        time_sliced: false,
                        hami: true,
                    });
                    phys.units.push(u);
                    self.nodes[i].units.push(u);
                }
                self.gpus.push(phys);
            }
        }
        if shape.dra {
            for mig in [false, true] {
                if let Some(n) = self.nodes.iter_mut().find(|n| n.mig == mig && !n.units.is_empty() && n.name.starts_with("gpu-node-0")) {
                    n.dra = true;
                }
            }
        }
        if shape.replace_gpu {
            if let Some(g) = self.gpus.iter().position(|p| p.units.len() == 1 && self.units[p.units[0]].share == 1.0 && !self.units[p.units[0]].time_sliced) {
                let gpu = &mut self.gpus[g];
                gpu.life.absent.push((ws + REPLACE_FROM_MS, ws + REPLACE_TO_MS));
                gpu.life.absent.sort_unstable();
                gpu.life.new_board = Some((ws + REPLACE_TO_MS, gpu_uuid(seed ^ 0xB0A2_D000, gpu.node, 99)));
            }
        }
        self
    }

    /// The GPU of unit `u`.
    pub fn life_of(&self, u: usize) -> &Lifetime {
        &self.gpus[self.units[u].gpu].life
    }

    /// Unit `u`'s UUID at `t`: its board's, the new one's after a replacement.
    pub fn uuid_at(&self, u: usize, t: i64) -> &str {
        match &self.life_of(u).new_board {
            Some((from, uuid)) if t >= *from => uuid,
            _ => &self.units[u].uuid,
        }
    }
}

fn gpu_uuid(seed: u64, node: usize, gpu: usize) -> String {
    let h = super::rng::mix(seed.wrapping_mul(31) ^ ((node as u64) << 8) ^ gpu as u64);
    let g = super::rng::mix(h);
    format!("GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", (h >> 32) as u32, (h >> 16) as u16, h as u16, (g >> 48) as u16, g & 0xFFFF_FFFF_FFFF)
}
