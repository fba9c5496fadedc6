//! The default build (`cargo build --release`: what `cargo run --release -- demo` and a user's
//! `cargo install` make) has only the DataFusion function groups Cargo.toml names for the
//! `datafusion` dependency. The test build adds Ballista, whose crates turn on every group, so a
//! shipped query calling a function of a group the default build leaves out passes every test
//! and fails the user ("Substring could not be planned": the chargeback of a default build did,
//! until `unicode_expressions` was named). This test reads Cargo.toml and the shipped SQL and
//! refuses any such call.

use crate::common;

/// The function groups (DataFusion 55 features) and their functions, as called in SQL.
const GROUPS: &[(&str, &[&str])] = &[
    (
        "unicode_expressions",
        &[
            "character_length",
            "char_length",
            "length",
            "find_in_set",
            "left",
            "lpad",
            "reverse",
            "right",
            "rpad",
            "strpos",
            "instr",
            "substr",
            "substring",
            "substr_index",
            "substring_index",
            "translate",
            "initcap",
        ],
    ),
    ("regex_expressions", &["regexp_like", "regexp_match", "regexp_replace", "regexp_count", "regexp_instr"]),
    ("crypto_expressions", &["md5", "sha224", "sha256", "sha384", "sha512", "digest"]),
    ("encoding_expressions", &["encode", "decode"]),
    (
        "nested_expressions",
        &[
            "make_array",
            "make_list",
            "unnest",
            "flatten",
            "cardinality",
            "string_to_array",
            "array_to_string",
            "array_length",
            "array_has",
            "array_has_any",
            "array_has_all",
            "array_contains",
            "array_element",
            "array_slice",
            "array_append",
            "array_concat",
            "array_position",
            "array_distinct",
            "array_sort",
            "list_sort",
            "map_keys",
            "map_values",
            "map_extract",
        ],
    ),
    ("datetime_expressions", &["date_bin", "date_part", "date_trunc", "to_timestamp", "to_char", "from_unixtime", "make_date", "now", "to_date"]),
    ("math_expressions", &["round", "floor", "ceil", "abs", "power", "sqrt", "ln", "log", "exp", "trunc"]),
    (
        "string_expressions",
        &[
            "concat",
            "concat_ws",
            "split_part",
            "lower",
            "upper",
            "btrim",
            "ltrim",
            "rtrim",
            "replace",
            "repeat",
            "starts_with",
            "ends_with",
            "to_hex",
            "ascii",
            "chr",
            "octet_length",
            "bit_length",
            "levenshtein",
        ],
    ),
];

fn enabled_groups() -> Vec<String> {
    let manifest = std::fs::read_to_string(common::repo_root().join("Cargo.toml")).unwrap();
    let line = manifest.lines().find(|l| l.starts_with("datafusion = ")).expect("the datafusion dependency");
    assert!(line.contains("default-features = false"), "{line}: with DataFusion's default features every group is on");
    let features = line.split("features = [").nth(1).and_then(|r| r.split(']').next()).expect("a features list");
    features.split(',').map(|f| f.trim().trim_matches('"').to_string()).filter(|f| !f.is_empty()).collect()
}

/// Every function call (`name(`) in `sql`, comments left out, lower-cased.
fn calls(sql: &str) -> Vec<String> {
    let code: String = sql.lines().map(|l| l.split("--").next().unwrap_or("")).collect::<Vec<_>>().join("\n").to_lowercase();
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    for (i, _) in code.match_indices('(') {
        let mut j = i;
        while j > 0 && bytes[j - 1] == b' ' {
            j -= 1;
        }
        let end = j;
        while j > 0 && (bytes[j - 1].is_ascii_alphanumeric() || bytes[j - 1] == b'_') {
            j -= 1;
        }
        if j < end {
            out.push(code[j..end].to_string());
        }
    }
    out
}

#[test]
fn shipped_sql_calls_only_functions_of_the_default_build() {
    let enabled = enabled_groups();
    assert!(enabled.iter().any(|f| f == "unicode_expressions"), "the rollup SQL uses substr and strpos: {enabled:?}");
    let root = common::repo_root().join("queries");
    let mut files = Vec::new();
    for dir in [root.clone(), root.join("views"), root.join("examples")] {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "sql") {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 30, "the shipped SQL: {} files", files.len());
    let mut missing = Vec::new();
    let mut seen = 0;
    for file in &files {
        for name in calls(&std::fs::read_to_string(file).unwrap()) {
            for (group, functions) in GROUPS {
                if functions.contains(&name.as_str()) {
                    seen += 1;
                    if !enabled.iter().any(|f| f == group) {
                        missing.push(format!("{}: {name}() needs DataFusion's {group}", file.display()));
                    }
                }
            }
        }
    }
    assert!(seen > 50, "the scan finds the queries' function calls ({seen})");
    assert!(missing.is_empty(), "shipped SQL calls functions the default build does not have:\n{}", missing.join("\n"));
}

#[test]
fn the_scan_sees_a_call_of_a_missing_group() {
    assert_eq!(calls("SELECT substr(x, 16), COUNT (*) -- left(y)\nFROM t"), ["substr", "count"]);
}
