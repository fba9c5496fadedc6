//! The chargeback's fixed names (its queries, its staged tables, its rows) and money's scale.

use crate::domain::units::US_PER_HOUR;

/// The report's name (its files, its queries' names).
pub(super) const R: &str = "chargeback";

/// Money is kept as DECIMAL(38, 12) of (price per hour x microseconds) or (price per kWh x
/// millijoules): one currency unit is this many raw units.
pub const MONEY_SCALE: u32 = 12;
pub const RAW_PER_UNIT: i128 = US_PER_HOUR * 1_000_000_000_000;

/// The table `queries/pod_run_days.sql`'s result is handed to `queries/chargeback.sql` as.
pub const POD_RUN_DAYS: &str = "pod_run_days";
/// The request-based fallback's rows and the claimed unmeasured rows, each its own query
/// (`queries/chargeback_fallback.sql`, `queries/chargeback_claimed.sql`) registered under its
/// name for `queries/chargeback.sql`: as CTEs there, DataFusion would plan each at every use
/// (a plan of 443 operators, ~0.1 s to plan for ~0.02 s of work on a month of 1,024 GPUs).
pub const STEP2_PARTS: [&str; 2] = ["chargeback_fallback", "chargeback_claimed"];
/// The chargeback's queries whose results the later ones read as tables of the same name, in
/// the order they run (`gpuledger check` plans each against the ones before).
pub const STAGED: [&str; 4] = ["chargeback_grain", POD_RUN_DAYS, STEP2_PARTS[0], STEP2_PARTS[1]];
pub const UNASSIGNED: &str = "__unassigned__";
