//! One query of a collect run: a DCGM field, a kube-state-metrics metric or a HAMi series.

use super::hami::HamiMetric;
use super::kube::KubeMetric;
use crate::domain::dcgm_field::Field;

/// One query of a run.
#[derive(Debug, Clone)]
pub(super) enum Job {
    Dcgm(Field),
    Kube(KubeMetric),
    Hami(HamiMetric),
}
