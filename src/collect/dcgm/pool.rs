//! The pool beyond what DCGM saw: kube-state-metrics' GPU capacity per node, the GPU time no
//! sample covers (`__unmeasured__`) and GPUs DCGM never showed (`UNKNOWN_MODEL`).

#[allow(unused_imports)]
use super::*;

impl DcgmGrid {
    /// The pool's inventory over time, after every [`fill`](Self::fill): a GPU exists from the
    /// first to the last step any of its units was seen, and at every step its node reports GPU
    /// capacity (`gpu_capacity`, from kube-state-metrics: per node and cell, the whole GPUs and
    /// whether any GPU resource is there) while no GPU of the node reports (its exporter is down:
    /// one GPU gone quiet among reporting ones was removed or repartitioned, not unmeasured).
    /// GPU time of the pool no sample covers becomes rows of
    /// namespace [`UNMEASURED`]; a node whose capacity names more GPUs than DCGM ever showed
    /// on it gets the rest as GPUs of model [`UNKNOWN_MODEL`]. Capacity is ignored when no
    /// node name of kube-state-metrics is one DCGM uses (the names follow another convention).
    pub fn set_pool(&mut self, gpu_capacity: BTreeMap<String, Vec<(u32, bool)>>) -> PoolNote {
        self.spans = self
            .units
            .iter()
            .filter_map(|(k, (_, g))| {
                let first = g.iter().position(|c| c.seen)?;
                let last = g.iter().rposition(|c| c.seen)?;
                Some((k.clone(), (first, last)))
            })
            .collect();
        let mut note = PoolNote::default();
        let dcgm_nodes: std::collections::BTreeSet<&str> = self.units.keys().map(|k| k.node.as_str()).collect();
        // A node named `gpu-1.ec2.internal` on one side and `gpu-1` on the other is one node:
        // capacity is keyed by DCGM's name where the short names (first DNS label) agree.
        let short = |n: &str| n.split('.').next().unwrap_or(n).to_string();
        let by_short: BTreeMap<String, &str> = dcgm_nodes.iter().map(|n| (short(n), *n)).collect();
        let gpu_capacity: BTreeMap<String, Vec<(u32, bool)>> = gpu_capacity
            .into_iter()
            .map(|(n, v)| if dcgm_nodes.contains(n.as_str()) { (n, v) } else { (by_short.get(&short(&n)).map_or(n, |d| d.to_string()), v) })
            .collect();
        if !dcgm_nodes.is_empty() && !gpu_capacity.is_empty() && !gpu_capacity.keys().any(|n| dcgm_nodes.contains(n.as_str())) {
            note.names_disagree = true;
            return note;
        }
        for (node, cells) in &gpu_capacity {
            let known = self.known_gpus(node);
            let most = cells.iter().map(|c| c.0).max().unwrap_or(0);
            if known == 0 && most > 0 {
                note.without_dcgm.push((node.clone(), most));
            }
        }
        let mut node_seen: BTreeMap<&str, Vec<bool>> = BTreeMap::new();
        for (k, (_, g)) in &self.units {
            let seen = node_seen.entry(k.node.as_str()).or_insert_with(|| vec![false; self.cells]);
            for (s, c) in seen.iter_mut().zip(g) {
                *s |= c.seen;
            }
        }
        let mut capacity = BTreeMap::new();
        for (node, mut cells) in gpu_capacity.into_iter().filter(|(_, v)| v.len() == self.cells) {
            if let Some(seen) = node_seen.get(node.as_str()) {
                for (c, s) in cells.iter_mut().zip(seen) {
                    c.1 &= !s;
                }
            }
            capacity.insert(node, cells);
        }
        self.capacity = capacity;
        note
    }

    /// Distinct physical GPUs DCGM showed on `node` in the window.
    pub(super) fn known_gpus(&self, node: &str) -> u32 {
        let mut uuids: Vec<&str> = self.units.keys().filter(|k| k.node == node).map(|k| k.uuid.as_str()).collect();
        uuids.dedup();
        uuids.len() as u32
    }
}
