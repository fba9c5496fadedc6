//! The layering of `docs/architecture.md`, checked on the source: every module of `src/` imports
//! only from layers below its own (`crate::<module>` paths outside `#[cfg(test)]` code), and no
//! file imports a file that imports it back, directly or round a circle (its `use` lines and
//! `crate::`/`super::` paths, resolved to files). A new top-level module needs a line in
//! `LAYERS` and in the document.

use std::collections::BTreeMap;
use std::path::Path;

/// Top-level modules by layer, lowest first; a module may use only modules of lower layers.
const LAYERS: &[&[&str]] = &[
    &["domain"],
    &["atomic", "error_chain", "exit", "failpoint", "limits", "progress", "queries", "redact", "render"],
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

/// Module path of a file under `src/` (`lake/rollup.rs` is `lake::rollup`, `lake/mod.rs` is `lake`).
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel.trim_end_matches(".rs").split('/').map(String::from).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// Every path a `use` tree names, its groups expanded (`a::{b, c::{d, self}}` is `a::b`, `a::c::d`, `a::c`).
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    fn split_top(s: &str) -> Vec<&str> {
        let (mut depth, mut start, mut out) = (0, 0, Vec::new());
        for (i, c) in s.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(&s[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        out.push(&s[start..]);
        out
    }
    fn walk(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
        let tree = tree.trim();
        if tree.is_empty() {
            return;
        }
        if let Some(open) = tree.find('{') {
            let head: Vec<String> = tree[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
            let close = tree.rfind('}').filter(|&c| c > open).unwrap_or(tree.len());
            let inner = &tree[open + 1..close];
            let base: Vec<String> = prefix.iter().cloned().chain(head).collect();
            for part in split_top(inner) {
                walk(&base, part, out);
            }
        } else {
            let path = tree.split(" as ").next().unwrap_or(tree);
            let mut full: Vec<String> = prefix.to_vec();
            for seg in path.split("::").map(str::trim).filter(|s| !s.is_empty()) {
                if seg != "self" {
                    full.push(seg.to_string());
                }
            }
            out.push(full);
        }
    }
    let mut out = Vec::new();
    walk(&[], tree, &mut out);
    out
}

/// The files under `src/` that `code` (of the file whose module is `own`) imports: its `use`
/// items and its `crate::`/`super::` paths, each resolved to the deepest module file it names.
fn imported_files(code: &str, own: &[String], modules: &BTreeMap<Vec<String>, String>) -> Vec<String> {
    let code = inline_modules_as_self(code);
    let code = code.as_str();
    let mut paths: Vec<Vec<String>> = Vec::new();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    // `use` items start a line (as rustfmt writes them), `pub`/`pub(crate)` before them or not.
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        let line = line.trim_start();
        let item = line.strip_prefix("pub ").or_else(|| line.strip_prefix("pub(crate) ")).or_else(|| line.strip_prefix("pub(super) ")).unwrap_or(line);
        let Some(tree) = item.strip_prefix("use ") else { continue };
        let mut tree = tree.to_string();
        while !tree.contains(';') {
            let Some(more) = lines.next() else { break };
            tree.push_str(more);
        }
        paths.extend(expand_use(tree.split(';').next().unwrap_or("")));
    }
    for prefix in ["crate::", "super::", "self::"] {
        let mut rest = code;
        while let Some(i) = rest.find(prefix) {
            let before_ok = rest[..i].chars().last().is_none_or(|c| !ident(c) && c != ':');
            let tail = &rest[i..];
            let path: String = tail.chars().take_while(|c| ident(*c) || *c == ':').collect();
            if before_ok {
                paths.push(path.split("::").filter(|s| !s.is_empty()).map(String::from).collect());
            }
            rest = &tail[prefix.len()..];
        }
    }
    let mut out = Vec::new();
    for path in paths {
        let mut segs = path.into_iter().peekable();
        let mut base: Vec<String> = match segs.peek().map(String::as_str) {
            Some("crate") => {
                segs.next();
                Vec::new()
            }
            Some("self") => {
                segs.next();
                let mut b = own.to_vec();
                while segs.peek().is_some_and(|s| s == "super") {
                    segs.next();
                    b.pop();
                }
                b
            }
            Some("super") => {
                let mut b = own.to_vec();
                while segs.peek().is_some_and(|s| s == "super") {
                    segs.next();
                    b.pop();
                }
                b
            }
            // A child module declared in this file (`use passes::rolled;` in `lake/mod.rs`); else an
            // outside crate.
            Some(first) if modules.contains_key(&own.iter().cloned().chain([first.to_string()]).collect::<Vec<_>>()) => own.to_vec(),
            _ => continue,
        };
        for seg in segs {
            let mut next = base.clone();
            next.push(seg);
            if !modules.contains_key(&next) {
                break;
            }
            base = next;
        }
        if base != own {
            if let Some(file) = modules.get(&base) {
                out.push(file.clone());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// `code` with each `super::` inside an inline `mod name { .. }` that names the file's own
/// module rewritten as `self::` (inside one, `super` is the file, not its parent).
fn inline_modules_as_self(code: &str) -> String {
    let mut out = String::new();
    let (mut depth, mut inline_at): (i64, Vec<i64>) = (0, Vec::new());
    for line in code.lines() {
        let t = line.trim_start();
        let item = t.strip_prefix("pub ").or_else(|| t.strip_prefix("pub(crate) ")).or_else(|| t.strip_prefix("pub(super) ")).unwrap_or(t);
        let opens_inline = item.strip_prefix("mod ").is_some_and(|rest| rest.trim_end().ends_with('{'));
        let mut text = line.to_string();
        if !inline_at.is_empty() {
            let mut rewritten = String::new();
            let mut rest = text.as_str();
            while let Some(i) = rest.find("super::") {
                rewritten.push_str(&rest[..i]);
                let before_ok = rewritten.chars().last().is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
                rewritten.push_str(if before_ok { "self::" } else { "super::" });
                rest = &rest[i + "super::".len()..];
            }
            rewritten.push_str(rest);
            text = rewritten;
        }
        if opens_inline {
            inline_at.push(depth);
        }
        depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
        while inline_at.last().is_some_and(|&d| depth <= d) {
            inline_at.pop();
        }
        out.push_str(&text);
        out.push('\n');
    }
    out
}

/// Groups of files that import each other, directly or round a circle (Tarjan's strongly
/// connected components of more than one file).
fn import_circles(edges: &BTreeMap<String, Vec<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, Vec<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: std::collections::BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w.as_str()) {
                visit(s, w);
                let lw = s.low[w.as_str()];
                let lv = s.low[v];
                s.low.insert(v, lv.min(lw));
            } else if s.on_stack.contains(w.as_str()) {
                let iw = s.index[w.as_str()];
                let lv = s.low[v];
                s.low.insert(v, lv.min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                s.out.push(group);
            }
        }
    }
    let mut s = State { edges, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), on_stack: Default::default(), out: Vec::new() };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The import graph between files under `src/` (outside `#[cfg(test)]` code), file to files.
fn file_imports() -> BTreeMap<String, Vec<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let rels: Vec<String> = files.iter().map(|f| f.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/")).filter(|r| r != "main.rs").collect();
    let modules: BTreeMap<Vec<String>, String> = rels.iter().map(|r| (module_of(r), r.clone())).collect();
    rels.iter()
        .map(|rel| {
            let text = std::fs::read_to_string(src.join(rel)).unwrap();
            let code: String =
                text.split("#[cfg(test)]").next().unwrap_or("").lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
            (rel.clone(), imported_files(&code, &module_of(rel), &modules))
        })
        .collect()
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let edges = file_imports();
    assert!(edges.get("lake/rollup/mod.rs").is_some_and(|e| !e.is_empty()), "the graph sees imports: {edges:#?}");
    let shown: Vec<String> = import_circles(&edges)
        .iter()
        .map(|group| {
            let inside = |f: &String| group.contains(f);
            group.iter().map(|f| format!("{f} -> {:?}", edges[f].iter().filter(|t| inside(t)).collect::<Vec<_>>())).collect::<Vec<_>>().join("; ")
        })
        .collect();
    assert!(shown.is_empty(), "files that import each other (round a circle): {shown:#?}");
}

/// The file graph's reader: `use` trees, `super`, `self`, child modules, and circles of any length.
#[test]
fn the_file_graph_reads_use_trees_and_finds_circles() {
    assert_eq!(
        expand_use("super::{buckets::{self, BUCKET_MS}, Table}"),
        [vec!["super", "buckets"], vec!["super", "buckets", "BUCKET_MS"], vec!["super", "Table"]]
    );
    let modules: BTreeMap<Vec<String>, String> =
        ["lib.rs", "lake/mod.rs", "lake/rollup.rs", "lake/passes/mod.rs", "lake/passes/idle.rs"].iter().map(|r| (module_of(r), r.to_string())).collect();
    let own = module_of("lake/passes/idle.rs");
    let code = "use super::super::rollup::Kind;\nuse crate::lake::{passes, Table};\nlet x = self::helper();\nuse std::io;";
    assert_eq!(imported_files(code, &own, &modules), ["lake/mod.rs", "lake/passes/mod.rs", "lake/rollup.rs"]);
    assert_eq!(imported_files("use passes::idle::Run;", &module_of("lake/mod.rs"), &modules), ["lake/passes/idle.rs"]);
    // Inside an inline module `super` is the file itself, `super::super` the file's parent.
    let inline = "mod lease {\n    use super::Lock;\n    use super::super::super::rollup::Kind;\n}\nuse super::Table;";
    assert_eq!(imported_files(inline, &own, &modules), ["lake/passes/mod.rs", "lake/rollup.rs"]);
    let edges: BTreeMap<String, Vec<String>> = [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"]), ("d", vec!["a"])]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
        .collect();
    assert_eq!(import_circles(&edges), [vec!["a", "b", "c"]]);
}
