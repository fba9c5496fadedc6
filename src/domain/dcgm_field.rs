//! The DCGM fields gpuledger reads, with dcgm-exporter's own names and HELP texts (the
//! configured names are `prometheus.metrics`, see `config::MetricNames::of`).

/// Which DCGM field a series carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Field {
    Util,
    EngineActive,
    FbUsed,
    FbFree,
    Power,
    Energy,
    Temp,
    Xid,
}

impl Field {
    pub const ALL: [Field; 8] = [Field::Util, Field::EngineActive, Field::FbUsed, Field::FbFree, Field::Power, Field::Energy, Field::Temp, Field::Xid];

    /// The dcgm-exporter name of the field (the collector reads `metric`, which honours the config).
    pub fn default_name(self) -> &'static str {
        match self {
            Field::Util => "DCGM_FI_DEV_GPU_UTIL",
            Field::EngineActive => "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            Field::FbUsed => "DCGM_FI_DEV_FB_USED",
            Field::FbFree => "DCGM_FI_DEV_FB_FREE",
            Field::Power => "DCGM_FI_DEV_POWER_USAGE",
            Field::Energy => "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            Field::Temp => "DCGM_FI_DEV_GPU_TEMP",
            Field::Xid => "DCGM_FI_DEV_XID_ERRORS",
        }
    }

    /// dcgm-exporter's HELP text.
    pub fn help(self) -> &'static str {
        match self {
            Field::Util => "GPU utilization (in %).",
            Field::EngineActive => "Ratio of time the graphics engine is active.",
            Field::FbUsed => "Framebuffer memory used (in MiB).",
            Field::FbFree => "Framebuffer memory free (in MiB).",
            Field::Power => "Power draw (in W).",
            Field::Energy => "Total energy consumption since boot (in mJ).",
            Field::Temp => "GPU temperature (in C).",
            Field::Xid => "Value of the last XID error encountered.",
        }
    }
}
