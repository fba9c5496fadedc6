//! A Kubernetes label or annotation key as kube-state-metrics names it on `kube_pod_labels` /
//! `kube_pod_annotations` (`shared/reference/owner-chains.md` §4): every character outside
//! `[a-zA-Z0-9_]` becomes `_`, then `_` goes before an upper-case letter that follows a
//! lower-case letter or a digit, and the whole is lower-cased. `app.kubernetes.io/part-of`
//! is `app_kubernetes_io_part_of` (the series' label `label_app_kubernetes_io_part_of`).

/// `key` as kube-state-metrics names it, without its `label_` / `annotation_` prefix.
pub fn sanitised(key: &str) -> String {
    let safe: Vec<char> = key.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    let mut out = String::with_capacity(safe.len() + 4);
    for (i, &c) in safe.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 && (safe[i - 1].is_ascii_lowercase() || safe[i - 1].is_ascii_digit()) {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::sanitised;

    #[test]
    fn names_as_kube_state_metrics_prints_them() {
        // The table in shared/reference/owner-chains.md §4.
        assert_eq!(sanitised("kueue.x-k8s.io/queue-name"), "kueue_x_k8s_io_queue_name");
        assert_eq!(sanitised("ray.io/originated-from-cr-name"), "ray_io_originated_from_cr_name");
        assert_eq!(sanitised("jobset.sigs.k8s.io/jobset-name"), "jobset_sigs_k8s_io_jobset_name");
        assert_eq!(sanitised("notebook-name"), "notebook_name");
        assert_eq!(sanitised("kai.scheduler/queue"), "kai_scheduler_queue");
        assert_eq!(sanitised("costCenter"), "cost_center");
        assert_eq!(sanitised("team"), "team");
    }
}
