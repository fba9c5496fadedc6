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
    /// How many fields there are: the length of `ALL` and of a [`FieldValues`].
    pub const COUNT: usize = 8;
    /// Every field, in the order of their discriminants (`ALL[f as usize] == f`, tested).
    pub const ALL: [Field; Field::COUNT] =
        [Field::Util, Field::EngineActive, Field::FbUsed, Field::FbFree, Field::Power, Field::Energy, Field::Temp, Field::Xid];

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

    /// Whether `v` (finite) is a value the field can take: a utilisation of 0-100 % (an engine
    /// ratio of 0-1), at most 1% over for rounding; a power of 0-5000 W (a GB200 superchip
    /// draws 2700); no negative size, counter, temperature under -50 C or over 150 C. Any other
    /// reading is a broken exporter's, stored as missing (completeness counts the GPU rows that
    /// lack a utilisation or energy), never billed.
    pub fn plausible(self, v: f64) -> bool {
        match self {
            Field::Util => (0.0..=101.0).contains(&v),
            Field::EngineActive => (0.0..=1.01).contains(&v),
            Field::Power => (0.0..=5000.0).contains(&v),
            Field::Temp => (-50.0..=150.0).contains(&v),
            Field::FbUsed | Field::FbFree | Field::Energy | Field::Xid => v >= 0.0,
        }
    }
}

/// One value (or none) per DCGM field, indexed by the field.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FieldValues([Option<f64>; Field::COUNT]);

impl std::ops::Index<Field> for FieldValues {
    type Output = Option<f64>;
    fn index(&self, f: Field) -> &Option<f64> {
        &self.0[f as usize]
    }
}

impl std::ops::IndexMut<Field> for FieldValues {
    fn index_mut(&mut self, f: Field) -> &mut Option<f64> {
        &mut self.0[f as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_in_all_at_its_index() {
        // A new variant fails to compile here until it is listed: then ALL and COUNT follow.
        for (i, f) in Field::ALL.into_iter().enumerate() {
            match f {
                Field::Util | Field::EngineActive | Field::FbUsed | Field::FbFree | Field::Power | Field::Energy | Field::Temp | Field::Xid => {
                    assert_eq!(f as usize, i, "{f:?}")
                }
            }
        }
        let mut v = FieldValues::default();
        v[Field::Xid] = Some(1.0);
        assert_eq!((v[Field::Xid], v[Field::Util]), (Some(1.0), None));
    }

    #[test]
    fn impossible_readings_are_not_values() {
        for (field, ok, bad) in [
            (Field::Util, 100.0, 150.0),
            (Field::EngineActive, 1.0, 2.5),
            (Field::Power, 700.0, -3.0),
            (Field::Power, 2700.0, 1e9),
            (Field::Energy, 0.0, -1.0),
            (Field::Temp, 85.0, 400.0),
        ] {
            assert!(field.plausible(ok) && !field.plausible(bad), "{field:?}: {ok} and {bad}");
        }
    }
}
