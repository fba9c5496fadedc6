//! The layering of `docs/architecture.md`, checked on the source: every module of `src/` imports
//! only from layers below its own (`crate::<module>` paths outside `#[cfg(test)]` code). A new
//! top-level module needs a line in `LAYERS` and in the document.

use std::collections::BTreeMap;
use std::path::Path;

/// Top-level modules by layer, lowest first; a module may use only modules of lower layers.
const LAYERS: &[&[&str]] = &[
    &["domain"],
    &["atomic", "exit", "failpoint", "limits", "progress", "queries", "redact", "render"],
    &["config"],
    &["lake"],
    &["pricing", "distributed"],
    &["engine", "collect", "simulate"],
    &["report"],
    &["plan"],
    &["adhoc", "check", "cronjob"],
    &["serve"],
    &["cli"],
    &["commands"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The `crate::<name>` modules `source` refers to outside comments and `#[cfg(test)]` items.
fn referenced(source: &str) -> Vec<String> {
    let code = source.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = Vec::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // `use crate::{a, b::c};`
                let inner = group.split('}').next().unwrap_or("");
                out.extend(inner.split(',').filter_map(|p| p.trim().split("::").next()).filter(|n| !n.is_empty()).map(String::from));
            } else {
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                out.push(name);
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn modules_import_only_from_layers_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut unplaced = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
        if rel == "lib.rs" || rel == "main.rs" {
            continue;
        }
        let module = rel.split('/').next().unwrap().trim_end_matches(".rs").to_string();
        let Some(own) = layer_of(&module) else {
            unplaced.push(module);
            continue;
        };
        for used in referenced(&std::fs::read_to_string(file).unwrap()) {
            if used == module {
                continue;
            }
            match layer_of(&used) {
                Some(l) if l < own => {}
                _ => wrong.entry(rel.clone()).or_default().push(used),
            }
        }
    }
    unplaced.dedup();
    assert!(unplaced.is_empty(), "modules in no layer (add them to LAYERS and docs/architecture.md): {unplaced:?}");
    for v in wrong.values_mut() {
        v.sort();
        v.dedup();
    }
    assert!(wrong.is_empty(), "imports from the same or a higher layer: {wrong:#?}");
}

/// The checker itself: it sees plain paths, grouped `use` lists, and ignores comments and tests.
#[test]
fn the_check_reads_paths_groups_and_skips_comments_and_tests() {
    let text = "use crate::config::Config;\nuse crate::{lake, report::Format};\n// crate::commands in a comment\nlet x = crate::engine::run_query; // crate::cli\n#[cfg(test)]\nmod tests { use crate::commands; }";
    assert_eq!(referenced(text), ["config", "lake", "report", "engine"]);
    assert!(layer_of("report") > layer_of("engine") && layer_of("domain") == Some(0) && layer_of("nothing").is_none());
}
