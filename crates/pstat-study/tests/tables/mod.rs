//! The representational tables of two runs compared: the in-process run and one that read
//! its activations from elsewhere (hf_extract.py, vLLM).

use serde_json::Value;
use std::path::{Path, PathBuf};

/// Every `unit.json` under the run's representational folders.
pub fn unit_records(run: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![run.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "unit.json")
                && path
                    .components()
                    .any(|c| c.as_os_str() == "representational")
            {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Two records equal in everything but floating-point values, which agree within
/// 1e-2·(1 + |x|); content hashes (which cover those values) are not compared, neither the
/// record's own nor those it keeps of the unit's files (`files`: the saved probes differ within
/// the same tolerance), only which files it vouches for.
pub fn same_tables(a: &Value, b: &Value, at: &str, worst: &mut f64) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys = |m: &serde_json::Map<String, Value>| -> Vec<String> {
                m.keys()
                    .filter(|k| !k.ends_with("sha256"))
                    .cloned()
                    .collect()
            };
            assert_eq!(keys(x), keys(y), "{at}: fields differ");
            for key in keys(x) {
                let at = format!("{at}.{key}");
                match (key.as_str(), &x[&key], &y[&key]) {
                    ("files", Value::Object(u), Value::Object(v)) => {
                        assert!(u.keys().eq(v.keys()), "{at}: other files")
                    }
                    (_, u, v) => same_tables(u, v, &at, worst),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}: lengths differ");
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                same_tables(u, v, &format!("{at}[{i}]"), worst);
            }
        }
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (u, v) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            let d = (u - v).abs();
            assert!(
                d <= 1e-2 * (1.0 + v.abs()),
                "{at}: {u} (in-process) vs {v} (imported)"
            );
            *worst = worst.max(d);
        }
        _ => assert_eq!(a, b, "{at}: differs"),
    }
}
