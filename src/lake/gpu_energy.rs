//! A day's energy per physical GPU, as its `nodes` rows carry it: the energy of its
//! `gpu_samples` rows, the part of it on steps its energy counter covers, and the counter's own
//! delta over those steps (`gpu_samples.counter_j`). The chargeback compares the last two
//! (energy's conservation against the counters); the collector and the simulator both fill the
//! `nodes` rows from here, after the lake's rounding (`quantize`), so the sums are those of the
//! stored rows.

use std::collections::HashMap;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, TimestampMillisecondType};

/// One physical GPU's energy over the rows summed (J).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpuEnergy {
    /// Every row's energy; None where no row had any.
    pub rows_j: Option<f64>,
    /// The rows' energy on the steps the counter covers; None where it covers none.
    pub counter_energy_j: Option<f64>,
    /// The counter's delta over those steps; None where it covers none.
    pub counter_delta_j: Option<f64>,
}

/// [`GpuEnergy`] per (cluster, node, uuid) of a batch of `gpu_samples` rows, handed out once per
/// GPU ([`take`](Self::take): to its first `nodes` row).
#[derive(Debug, Default)]
pub struct EnergyByGpu {
    gpus: HashMap<(Option<String>, String, String), GpuEnergy>,
}

fn add(sum: &mut Option<f64>, v: f64) {
    *sum = Some(sum.unwrap_or(0.0) + v);
}

impl EnergyByGpu {
    /// Sums `gpu` (rows of the `gpu_samples` schema, any order) per physical GPU.
    pub fn of(gpu: &RecordBatch) -> EnergyByGpu {
        let text = |name: &str| arrow::compute::cast(gpu.column_by_name(name).expect("a gpu_samples column"), &DataType::Utf8).expect("labels cast to utf8");
        let (cluster, node, uuid) = (text("cluster"), text("node"), text("gpu_uuid"));
        let (cluster, node, uuid) = (cluster.as_string::<i32>(), node.as_string::<i32>(), uuid.as_string::<i32>());
        let ts = gpu.column_by_name("ts").expect("ts").as_primitive::<TimestampMillisecondType>();
        let energy = gpu.column_by_name("energy_j").expect("energy_j").as_primitive::<Float64Type>();
        let counter = gpu.column_by_name("counter_j").expect("counter_j").as_primitive::<Float64Type>();
        let round = super::quantize::energy_j;
        // Per GPU and step: the rows' energy, and the counter's where a row carries it.
        let mut steps: HashMap<(Option<&str>, &str, &str, i64), (f64, bool, Option<f64>)> = HashMap::new();
        for i in 0..gpu.num_rows() {
            let key = (cluster.is_valid(i).then(|| cluster.value(i)), node.value(i), uuid.value(i), ts.value(i));
            let e = steps.entry(key).or_insert((0.0, false, None));
            if energy.is_valid(i) {
                e.0 += round(energy.value(i));
                e.1 = true;
            }
            if counter.is_valid(i) {
                add(&mut e.2, round(counter.value(i)));
            }
        }
        let mut gpus: HashMap<(Option<String>, String, String), GpuEnergy> = HashMap::new();
        for ((c, n, u, _), (rows_j, has_energy, counter_j)) in steps {
            let g = gpus.entry((c.map(str::to_string), n.to_string(), u.to_string())).or_default();
            if has_energy {
                add(&mut g.rows_j, rows_j);
            }
            if let Some(delta) = counter_j {
                add(&mut g.counter_energy_j, rows_j);
                add(&mut g.counter_delta_j, delta);
            }
        }
        EnergyByGpu { gpus }
    }

    /// The GPU's sums, once: a later call for the same GPU (its other units) gets none.
    pub fn take(&mut self, cluster: Option<&str>, node: &str, uuid: &str) -> GpuEnergy {
        self.gpus.remove(&(cluster.map(str::to_string), node.to_string(), uuid.to_string())).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lake::rows::{with_cluster, GpuSampleRow, GpuSamplesBuilder};

    /// A MIG GPU of two instances (the counter on its first row of each step) and a whole GPU
    /// whose counter reset inside its second step (no counter there, power x step on the row).
    #[test]
    fn sums_per_physical_gpu_on_the_steps_the_counter_covers() {
        let mut rows = GpuSamplesBuilder::new();
        let row = |uuid, gi, ts, energy: f64, counter: Option<f64>| GpuSampleRow {
            ts,
            step_s: 30,
            node: "n1",
            gpu_uuid: uuid,
            gpu_model: "NVIDIA H100 80GB HBM3",
            gpu_instance_id: gi,
            share: 0.5,
            energy_j: Some(energy),
            counter_j: counter,
            ..GpuSampleRow::default()
        };
        for ts in [0, 30_000] {
            rows.push(&row("GPU-M", Some(1), ts, 3000.4, Some(6000.0)));
            rows.push(&row("GPU-M", Some(2), ts, 2999.6, None));
            rows.push(&row("GPU-W", None, ts, 9000.0, (ts == 0).then_some(8990.0)));
        }
        let batch = with_cluster(rows.finish(), "east");
        let mut by_gpu = EnergyByGpu::of(&batch);
        // Each row at the lake's 1 J: 3000 + 3000 a step.
        let mig = by_gpu.take(Some("east"), "n1", "GPU-M");
        assert_eq!(mig, GpuEnergy { rows_j: Some(12000.0), counter_energy_j: Some(12000.0), counter_delta_j: Some(12000.0) });
        assert_eq!(by_gpu.take(Some("east"), "n1", "GPU-M"), GpuEnergy::default(), "handed out once, to the GPU's first row");
        let whole = by_gpu.take(Some("east"), "n1", "GPU-W");
        assert_eq!(whole, GpuEnergy { rows_j: Some(18000.0), counter_energy_j: Some(9000.0), counter_delta_j: Some(8990.0) });
        assert_eq!(by_gpu.take(None, "n1", "GPU-W"), GpuEnergy::default(), "another cluster's GPU of that name is another GPU");
    }
}
