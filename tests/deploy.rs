//! `deploy/` is real: the ConfigMap's gpuledger.toml loads with gpuledger's own config
//! loader, every CronJob's arguments parse as a gpuledger command line, the image runs as a
//! non-root user from a multi-stage build, and the kustomization lists every manifest.

mod common;

use clap::Parser;
use gpuledger::config::Config;

fn read(rel: &str) -> String {
    std::fs::read_to_string(common::repo_root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The gpuledger.toml a ConfigMap carries.
fn configmap_toml(rel: &str) -> String {
    let text = read(rel);
    let start = text.find("gpuledger.toml: |").expect("the ConfigMap carries gpuledger.toml") + "gpuledger.toml: |".len();
    text[start..]
        .lines()
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with("    "))
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn configmap_toml_is_a_valid_config() {
    let body = configmap_toml("deploy/kubernetes/configmap.yaml");
    let config = Config::parse(&body, "deploy/kubernetes/configmap.yaml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.lake.path.to_str(), Some("/data/lake"));
    assert_eq!(config.run.reports_dir.to_str(), Some("/data/reports"));
    assert!(config.prometheus.url.contains(".svc:9090"));
    assert_eq!(config.prometheus.bearer_token_file.as_ref().and_then(|p| p.to_str()), Some("/etc/gpuledger/secret/token"));
    let cronjob = read("deploy/kubernetes/cronjob-collect.yaml");
    assert!(cronjob.contains("mountPath: /etc/gpuledger/secret"), "the token file is where the config says");
    assert!(cronjob.contains("claimName: gpuledger-lake") && read("deploy/kubernetes/pvc.yaml").contains("name: gpuledger-lake"));
}

#[test]
fn cronjob_arguments_are_gpuledger_command_lines() {
    for (file, first) in [("deploy/kubernetes/cronjob-collect.yaml", "collect"), ("deploy/kubernetes/cronjob-monthly.yaml", "run")] {
        let text = read(file);
        let line = text.lines().find(|l| l.trim_start().starts_with("args:")).unwrap_or_else(|| panic!("{file}: no args"));
        let list = line.split_once(':').unwrap().1.trim();
        let args: Vec<String> = serde_json::from_str(list).unwrap_or_else(|e| panic!("{file}: args are a JSON-style list: {e}"));
        assert_eq!(args[0], first);
        let argv = std::iter::once("gpuledger".to_string()).chain(args);
        gpuledger::cli::Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{file}: {e}"));
        for needle in ["runAsNonRoot: true", "concurrencyPolicy: Forbid", "readOnlyRootFilesystem: true", "GPULEDGER_CONFIG"] {
            assert!(text.contains(needle), "{file} lacks {needle}");
        }
    }
}

#[test]
fn image_is_multi_stage_and_non_root_and_kustomization_is_complete() {
    let docker = read("deploy/Dockerfile");
    assert!(docker.matches("\nFROM ").count() + docker.starts_with("FROM ") as usize >= 2, "multi-stage");
    assert!(docker.contains("cargo build --release --locked"));
    let user = docker.lines().filter(|l| l.starts_with("USER ")).last().expect("a USER line");
    assert!(!user.contains("root") && !user.trim_end().ends_with(" 0"), "{user}");
    let kust = read("deploy/kubernetes/kustomization.yaml");
    for e in std::fs::read_dir(common::repo_root().join("deploy/kubernetes")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            assert!(kust.contains(&format!("- {name}")), "kustomization.yaml misses {name}");
        }
    }
}

/// The object-storage overlay: its TOML loads with the lake on a bucket and credentials from the
/// mounted Secret, everything but `[lake]` equals the base's, and its patches mount the Secret
/// where the config points in both CronJobs.
#[test]
fn object_storage_overlay_puts_the_lake_on_a_bucket() {
    let body = configmap_toml("deploy/kubernetes/object-storage/configmap.yaml");
    let config = Config::parse(&body, "deploy/kubernetes/object-storage/configmap.yaml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.lake.path.to_str(), Some("s3://gpu-ledger/prod/lake"));
    let creds = config.lake.s3.credentials_file.as_ref().and_then(|p| p.to_str()).expect("credentials_file");
    assert_eq!(creds, "/etc/gpuledger/s3/credentials");
    assert!(!config.lake.s3.path_style && !config.lake.s3.allow_http, "AWS defaults: virtual-hosted, HTTPS");
    let without_lake = |toml: &str| -> String {
        let mut out = Vec::new();
        let mut in_lake = false;
        for line in toml.lines() {
            if line.starts_with('[') {
                in_lake = line.starts_with("[lake]") || line.starts_with("[lake.");
            }
            if !in_lake {
                out.push(line);
            }
        }
        out.join("\n")
    };
    assert_eq!(without_lake(&body), without_lake(&configmap_toml("deploy/kubernetes/configmap.yaml")), "only [lake] may differ from the base");
    let secret = read("deploy/kubernetes/object-storage/secret-s3.yaml");
    assert!(secret.contains("name: gpuledger-s3") && secret.contains("aws_access_key_id") && secret.contains("credentials: |"));
    let kust = read("deploy/kubernetes/object-storage/kustomization.yaml");
    assert!(kust.contains("- ../") && kust.contains("- secret-s3.yaml"));
    for job in ["collect", "monthly"] {
        let patch = read(&format!("deploy/kubernetes/object-storage/cronjob-{job}-s3.yaml"));
        assert!(kust.contains(&format!("- path: cronjob-{job}-s3.yaml")), "{job} patch listed");
        assert!(patch.contains(&format!("name: gpuledger-{job}")) && read(&format!("deploy/kubernetes/cronjob-{job}.yaml")).contains(&format!("name: gpuledger-{job}")));
        assert!(patch.contains("mountPath: /etc/gpuledger/s3") && patch.contains("secretName: gpuledger-s3"), "{job} mounts the Secret at the credentials folder");
    }
}
