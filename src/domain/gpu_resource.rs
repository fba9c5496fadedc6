//! Which Kubernetes extended resources count GPU devices, as kube-state-metrics spells them
//! (`nvidia.com/gpu` -> `nvidia_com_gpu`). Only a device count is ever read as GPUs: HAMi's
//! `nvidia.com/gpumem` is a size in MiB and `nvidia.com/gpucores` a percentage, and read as
//! GPUs they bill a million GPU-hours (`../shared/reference/gpu-sharing-facts.md`).

/// The kind of an `nvidia_com_*` resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuResource {
    /// `nvidia.com/gpu`: whole GPUs, or one of a sharing layer's slots where one multiplies it
    /// (HAMi's vGPUs, time-slicing replicas without a rename).
    Whole,
    /// `nvidia.com/gpu.<suffix>` (`gpu.shared`): the device plugin's renamed time-slicing replicas.
    Replica,
    /// `nvidia.com/mig-<profile>`: MIG instances.
    Mig,
    /// HAMi's share of a GPU (`gpumem`, `gpumem-percentage`, `gpucores`): a size or a
    /// percentage, never a count; its presence marks the node HAMi shares.
    HamiShare,
    /// Anything else under `nvidia.com/` (HAMi's `priority`, a vendor's own): not a count.
    Other,
}

/// HAMi's per-pod share resources, as kube-state-metrics names them.
pub const HAMI_SHARES: [&str; 3] = ["nvidia_com_gpumem", "nvidia_com_gpumem_percentage", "nvidia_com_gpucores"];

impl GpuResource {
    /// The kind of `sanitised` (kube-state-metrics' `resource` label); `None` when it is not an
    /// `nvidia_com_` resource at all (`cpu`, `memory`).
    pub fn of(sanitised: &str) -> Option<GpuResource> {
        let rest = sanitised.strip_prefix("nvidia_com_")?;
        Some(if rest == "gpu" {
            GpuResource::Whole
        } else if HAMI_SHARES.contains(&sanitised) {
            GpuResource::HamiShare
        } else if rest.starts_with("gpu_") {
            GpuResource::Replica
        } else if rest.starts_with("mig_") {
            GpuResource::Mig
        } else {
            GpuResource::Other
        })
    }

    /// Whether a request or capacity of this resource is a number of devices.
    pub fn counts_devices(self) -> bool {
        matches!(self, GpuResource::Whole | GpuResource::Replica | GpuResource::Mig)
    }
}

/// Which of a HAMi vGPU's allocations is its part of the GPU (`[sharing] hami_share`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HamiShare {
    /// Its cores (`nvidia.com/gpucores`, percent of the GPU's SMs).
    Cores,
    /// Its framebuffer over the GPU's (`nvidia.com/gpumem`).
    Memory,
    /// The larger of the two: what it takes from the others. HAMi places a pod on a GPU only
    /// where both its cores and its memory still fit, so a pod holding 80% of the memory and
    /// 10% of the cores keeps every pod that needs more than 20% of the memory off the GPU.
    #[default]
    Max,
}

impl HamiShare {
    /// The part of its GPU (0-1) a vGPU holds, given its cores (percent; 0 is HAMi's "no core
    /// limit") and its memory's fraction of the GPU's (None where the GPU's memory is unknown).
    /// A vGPU without a core limit counts by its memory under every rule, and one with neither
    /// known counts as the whole GPU (it may use all of it); callers scale a GPU's holders down
    /// together where they add up to more than one GPU.
    pub fn of(self, cores_pct: Option<f64>, memory_frac: Option<f64>) -> f64 {
        let cores = cores_pct.filter(|c| *c > 0.0).map(|c| (c / 100.0).min(1.0));
        let memory = memory_frac.filter(|m| *m > 0.0).map(|m| m.min(1.0));
        let part = match self {
            HamiShare::Cores => cores.or(memory),
            HamiShare::Memory => memory.or(cores),
            HamiShare::Max => match (cores, memory) {
                (Some(c), Some(m)) => Some(c.max(m)),
                (c, m) => c.or(m),
            },
        };
        part.unwrap_or(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vgpu_is_its_cores_its_memory_or_the_larger() {
        assert_eq!(HamiShare::Cores.of(Some(25.0), Some(0.5)), 0.25);
        assert_eq!(HamiShare::Memory.of(Some(25.0), Some(0.5)), 0.5);
        assert_eq!(HamiShare::Max.of(Some(25.0), Some(0.5)), 0.5);
        assert_eq!(HamiShare::Max.of(Some(80.0), Some(0.1)), 0.8);
        // No core limit (0): its memory, whatever the rule; nothing known: the whole GPU.
        assert_eq!(HamiShare::Cores.of(Some(0.0), Some(0.3)), 0.3);
        assert_eq!(HamiShare::Memory.of(Some(40.0), None), 0.4);
        assert_eq!(HamiShare::Max.of(None, None), 1.0);
        assert_eq!(HamiShare::Cores.of(Some(150.0), None), 1.0, "never more than the GPU");
    }

    #[test]
    fn only_device_counts_are_read_as_gpus() {
        for r in ["nvidia_com_gpu", "nvidia_com_gpu_shared", "nvidia_com_mig_3g_40gb", "nvidia_com_mig_1g_10gb"] {
            assert!(GpuResource::of(r).unwrap().counts_devices(), "{r}");
        }
        for r in ["nvidia_com_gpumem", "nvidia_com_gpumem_percentage", "nvidia_com_gpucores"] {
            assert_eq!(GpuResource::of(r), Some(GpuResource::HamiShare), "{r}");
            assert!(!GpuResource::of(r).unwrap().counts_devices(), "{r}");
        }
        assert_eq!(GpuResource::of("nvidia_com_priority"), Some(GpuResource::Other));
        assert!(!GpuResource::Other.counts_devices());
        assert_eq!(GpuResource::of("memory"), None);
    }
}
