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

#[cfg(test)]
mod tests {
    use super::*;

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
