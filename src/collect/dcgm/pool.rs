//! The pool beyond what DCGM saw: kube-state-metrics' GPU capacity per node, the GPU time no
//! sample covers (`__unmeasured__`) and GPUs DCGM never showed (`UNKNOWN_MODEL`).

#[allow(unused_imports)]
use super::*;
use crate::domain::boards::{replacements, Board};

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
        self.find_replaced_boards();
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
            } else if known == 0 && cells.iter().any(|c| c.1) {
                note.uncounted_without_dcgm.push(node.clone());
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
            // Time-slicing without a rename advertises GPUs x replicas as nvidia.com/gpu: a
            // count beyond DCGM's GPUs that is always an exact multiple of them is that, not
            // GPUs DCGM never showed (inferred, and said in the log).
            let known = self.known_gpus(&node);
            let beyond: Vec<u32> = cells.iter().map(|c| c.0).filter(|&n| n > known).collect();
            if known > 0 && !beyond.is_empty() && beyond.iter().all(|&n| n % known == 0) {
                note.multiplied.push((node.clone(), known, beyond.iter().copied().max().unwrap_or(0)));
                for c in cells.iter_mut() {
                    c.0 = c.0.min(known);
                }
            }
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

    /// Distinct physical GPUs DCGM showed on `node` in the window, a replaced board and its
    /// successor counted once (one slot of the node).
    pub(super) fn known_gpus(&self, node: &str) -> u32 {
        let mut uuids: Vec<&str> = self.units.keys().filter(|k| k.node == node).map(|k| k.uuid.as_str()).collect();
        uuids.dedup();
        uuids.iter().filter(|u| !self.replaced_at.contains_key(**u)).count() as u32
    }

    /// Boards replaced in the window: at one node and GPU index, a UUID whose samples all come
    /// after another's last one took that GPU's place (a board swapped, a GPU fallen off the
    /// bus and back under a new UUID). Each is a GPU of its own, for its own time.
    fn find_replaced_boards(&mut self) {
        // (node, index) -> [(first, last, uuid)] of its physical GPUs.
        let mut slots: BTreeMap<(&str, i16), BTreeMap<&str, (usize, usize)>> = BTreeMap::new();
        for (k, &(first, last)) in &self.spans {
            let info = &self.units[k].0;
            let e = slots.entry((k.node.as_str(), info.gpu_index)).or_default().entry(k.uuid.as_str()).or_insert((first, last));
            (e.0, e.1) = (e.0.min(first), e.1.max(last));
        }
        let (mut replaced_at, mut successors) = (BTreeMap::new(), std::collections::BTreeSet::new());
        for boards in slots.values() {
            for (old, new) in replacements(boards.iter().map(|(uuid, &(first, last))| Board { first, last, uuid })) {
                replaced_at.insert(old.uuid.to_string(), new.first);
                successors.insert(new.uuid.to_string());
            }
        }
        (self.replaced_at, self.successors) = (replaced_at, successors);
    }

    /// Whether the node's capacity may stand for GPU `uuid` at cell `c`: not after a newer board
    /// took its place, nor before its own first sample when it replaced an older one.
    pub(super) fn capacity_covers(&self, uuid: &str, first_seen: Option<usize>, c: usize) -> bool {
        self.replaced_at.get(uuid).is_none_or(|&at| c < at) && (!self.successors.contains(uuid) || first_seen.is_some_and(|f| c >= f))
    }
}
