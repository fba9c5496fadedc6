//! `deploy/` is real: the ConfigMap's gpuledger.toml loads with gpuledger's own config
//! loader, every CronJob's arguments parse as a gpuledger command line, the image runs as a
//! non-root user from a multi-stage build, and the kustomization lists every manifest; the
//! object-storage and Ballista overlays change only what they say, and the Ballista
//! Deployments' arguments parse with the stock programs' own parsers.

use crate::common;

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

/// The serve Deployment: its arguments parse, the users file is where the config says (the
/// Secret's mount), it listens beyond loopback on the port its Service targets, and runs as
/// the CronJobs do.
#[test]
fn serve_deployment_matches_the_config() {
    let text = read("deploy/kubernetes/serve.yaml");
    let line = text.lines().find(|l| l.trim_start().starts_with("args:")).expect("args");
    let args: Vec<String> = serde_json::from_str(line.split_once(':').unwrap().1.trim()).unwrap();
    let cli = gpuledger::cli::Cli::try_parse_from(std::iter::once("gpuledger".to_string()).chain(args)).unwrap();
    assert!(matches!(cli.command, gpuledger::cli::Command::Serve(_)));
    let config = Config::parse(&configmap_toml("deploy/kubernetes/configmap.yaml"), "configmap").unwrap();
    assert_eq!(config.serve.listen, "0.0.0.0:5432");
    let users = config.serve.users_file.expect("serve.users_file");
    let (dir, file) = (users.parent().unwrap().to_str().unwrap(), users.file_name().unwrap().to_str().unwrap());
    assert!(text.contains(&format!("mountPath: {dir}")) && text.contains("secretName: gpuledger-serve-users"), "the users Secret is mounted at {dir}");
    assert!(read("deploy/kubernetes/secret-serve-users.yaml").contains(&format!("{file}: |")), "the Secret holds {file}");
    for needle in [
        "kind: Service",
        "containerPort: 5432",
        "targetPort: postgres",
        "runAsNonRoot: true",
        "readOnlyRootFilesystem: true",
        "claimName: gpuledger-lake",
        "GPULEDGER_CONFIG",
    ] {
        assert!(text.contains(needle), "serve.yaml lacks {needle}");
    }
}

#[test]
fn image_is_multi_stage_and_non_root_and_kustomization_is_complete() {
    let docker = read("deploy/Dockerfile");
    assert!(docker.matches("\nFROM ").count() + docker.starts_with("FROM ") as usize >= 2, "multi-stage");
    let build = read("deploy/build.sh");
    assert!(docker.contains("deploy/build.sh") && build.contains("cargo build --release --locked"));
    assert!(
        build.contains("--bin ballista-scheduler --bin ballista-executor") && docker.contains("ARG BALLISTA=0"),
        "BALLISTA=1 adds the stock Ballista programs"
    );
    let user = docker.lines().rfind(|l| l.starts_with("USER ")).expect("a USER line");
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
        assert!(
            patch.contains(&format!("name: gpuledger-{job}"))
                && read(&format!("deploy/kubernetes/cronjob-{job}.yaml")).contains(&format!("name: gpuledger-{job}"))
        );
        assert!(
            patch.contains("mountPath: /etc/gpuledger/s3") && patch.contains("secretName: gpuledger-s3"),
            "{job} mounts the Secret at the credentials folder"
        );
    }
}

/// The Ballista overlay: its TOML is the object-storage overlay's with only `[engine]` added,
/// pointing at the scheduler's Service; the Deployments' arguments parse as the stock
/// ballista-scheduler and ballista-executor command lines (their own clap parsers), the
/// executors reach the scheduler by that Service and give 16 or more task slots in all.
#[cfg(feature = "ballista")]
#[test]
fn ballista_overlay_runs_the_sql_on_the_stock_scheduler_and_executors() {
    use gpuledger::distributed::Engine;
    let body = configmap_toml("deploy/kubernetes/ballista/configmap.yaml");
    let config = Config::parse(&body, "deploy/kubernetes/ballista/configmap.yaml").unwrap_or_else(|e| panic!("{e}"));
    let engine = Engine::parse(config.engine.url.as_deref().expect("engine.url")).unwrap();
    assert_eq!(engine, Engine::Remote("ballista-scheduler.gpuledger.svc:50050".into()));
    assert!(config.lake.path.to_str().unwrap().starts_with("s3://"), "executors read the lake from the bucket");
    let without_engine = |toml: &str| toml.lines().filter(|l| !l.trim_start().starts_with("url = \"ballista://")).collect::<Vec<_>>().join("\n");
    assert_eq!(without_engine(&body), configmap_toml("deploy/kubernetes/object-storage/configmap.yaml"), "only engine.url is added");

    let kust = read("deploy/kubernetes/ballista/kustomization.yaml");
    for r in ["- ../object-storage", "- secret-s3-env.yaml", "- ballista-scheduler.yaml", "- ballista-executor.yaml", "- path: configmap.yaml"] {
        assert!(kust.contains(r), "kustomization lacks {r}");
    }
    let args_of = |rel: &str, program: &str| -> Vec<String> {
        let text = read(rel);
        assert!(text.contains(&format!("command: [\"/usr/local/bin/{program}\"]")), "{rel} runs {program}");
        let line = text.lines().find(|l| l.trim_start().starts_with("args:")).unwrap_or_else(|| panic!("{rel}: no args"));
        let args: Vec<String> = serde_json::from_str(line.split_once(':').unwrap().1.trim()).unwrap_or_else(|e| panic!("{rel}: {e}"));
        for needle in ["runAsNonRoot: true", "readOnlyRootFilesystem: true", "secretRef:", "name: gpuledger-s3-env"] {
            assert!(text.contains(needle), "{rel} lacks {needle}");
        }
        std::iter::once(program.to_string()).chain(args).collect()
    };
    let scheduler = ballista_scheduler::config::Config::try_parse_from(args_of("deploy/kubernetes/ballista/ballista-scheduler.yaml", "ballista-scheduler"))
        .unwrap_or_else(|e| panic!("scheduler args: {e}"));
    assert_eq!(scheduler.bind_port, 50050);
    let sched_text = read("deploy/kubernetes/ballista/ballista-scheduler.yaml");
    assert!(sched_text.contains("kind: Service") && sched_text.contains("name: ballista-scheduler") && sched_text.contains("port: 50050"));
    let exec_text = read("deploy/kubernetes/ballista/ballista-executor.yaml");
    let executor = ballista_executor::config::Config::try_parse_from(args_of("deploy/kubernetes/ballista/ballista-executor.yaml", "ballista-executor"))
        .unwrap_or_else(|e| panic!("executor args: {e}"));
    assert_eq!((executor.scheduler_host.as_str(), executor.scheduler_port), ("ballista-scheduler.gpuledger.svc", 50050));
    assert_eq!(executor.external_host.as_deref(), Some("$(POD_IP)"), "registers its pod IP, which gpuledger fetches results from");
    assert!(exec_text.contains("fieldPath: status.podIP") && exec_text.contains("path: /readyz"), "ready once registered");
    assert!(exec_text.contains(&format!("containerPort: {}", executor.bind_health_port)));
    assert!(exec_text.contains("mountPath: /work") && executor.work_dir.as_deref() == Some("/work"), "shuffle files on the emptyDir");
    let replicas: usize = exec_text.lines().find_map(|l| l.trim().strip_prefix("replicas:")).unwrap().trim().parse().unwrap();
    assert!(replicas * executor.vcores >= 16, "{replicas} x {} task slots: the chargeback needs 16", executor.vcores);
    let secret = read("deploy/kubernetes/ballista/secret-s3-env.yaml");
    assert!(secret.contains("AWS_ACCESS_KEY_ID:") && secret.contains("AWS_SECRET_ACCESS_KEY:"));
}
