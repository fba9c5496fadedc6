//! The domain core: units and reserved names, exact money, MIG shares, the DCGM fields, what a
//! chargeback is keyed by, sizes, lake locations and tariff times. It imports nothing from the
//! rest of gpuledger; every other layer builds on it (docs/architecture.md).

pub mod boards;
pub mod charge_by;
pub mod dcgm_field;
pub mod gpu_resource;
pub mod ksm_label;
pub mod location;
pub mod mig;
pub mod money;
pub mod size;
pub mod stats;
pub mod tariff_time;
pub mod units;
pub mod window;
pub mod workload;
