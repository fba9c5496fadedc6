//! The monthly chargeback: GPU-hours, utilisation, energy, power, GPU, CPU and memory cost,
//! carbon, the idle and shared-namespace spread, per namespace, team or cost centre; the
//! `__unallocated__` row; and the conservation line (rows sum to the cluster total, checked
//! against an independent scan).
//!
//! Everything is summed from `queries/chargeback.sql`'s detail rows (namespace x GPU model x
//! MIG profile x day), which the by-model report and the FOCUS export use too, so all three
//! agree to the unit.
//!
//! `model` holds the types, `compute` runs the queries (step 1 a week at a time), `tariff_classes`
//! merges step 1's buckets a day's tariff prices alike, `allocate` spreads the idle and shared rows, `attribution` splits a namespace's rows between its pods' keys (`--by workload`, ...), `layout` turns the result into a report.

mod allocate;
mod attribution;
mod compute;
mod consts;
mod layout;
mod model;
mod tariff_classes;

pub use crate::domain::charge_by::ChargeBy;
pub use crate::domain::units::{MJ_PER_KWH, UNALLOCATED, UNATTRIBUTED, UNMEASURED, US_PER_HOUR};
pub use attribution::{compute as attribute, pod_values, Attribution, PodValues};
pub use compute::compute;
pub use consts::{MONEY_SCALE, POD_RUN_DAYS, RAW_PER_UNIT, STAGED, STEP2_PARTS, UNASSIGNED};
pub use model::{Chargeback, CounterCheck, DetailRow, NamespaceCharge, Owner, Quantities, COUNTER_WORST};
