//! Per-statement judgments on disk: one JSON line per held-out statement, one file per unit
//! (format, K, condition, draw), written whole or not at all, with a sidecar recording the
//! context drawn, the backend and the statements judged. A unit whose files exist and match
//! is complete and is not recomputed.

use crate::context::BeliefContext;
use crate::error::PromptError;
use crate::scoring::{Answer, OptionProbs};
use crate::template::PromptFormat;
use pstat_data::artifact::{sha256_hex, write_atomic, write_json_atomic};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// g_pr(s, Θ) for one statement, with everything it was computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgment {
    pub id: String,
    pub condition: String,
    /// `main`, a resample number, or `shuffle`.
    pub draw: String,
    pub format: PromptFormat,
    /// Context size; absent for the empty-context baseline.
    pub k: Option<usize>,
    pub p_a: f64,
    pub p_b: f64,
    pub p_c: f64,
    /// 1 − (p_a + p_b + p_c).
    pub leftover: f64,
    pub answer: Answer,
    pub judged_true: bool,
}

impl Judgment {
    pub fn probs(&self) -> OptionProbs {
        OptionProbs {
            p: [self.p_a, self.p_b, self.p_c],
            leftover: self.leftover,
        }
    }
}

/// What a unit was computed from; a stored unit is reused only if this matches exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitMeta {
    pub context: BeliefContext,
    pub format: PromptFormat,
    pub backend: String,
    /// sha256 over the judged statement ids, in order.
    pub statements_sha256: String,
    pub n: usize,
}

/// The two files of a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitFiles {
    pub judgments: PathBuf,
    pub meta: PathBuf,
}

impl UnitFiles {
    /// `<stem>.jsonl` and `<stem>.context.json`.
    pub fn at(stem: &Path) -> Self {
        let with = |ext: &str| {
            let mut name = stem.file_name().unwrap_or_default().to_os_string();
            name.push(ext);
            stem.with_file_name(name)
        };
        UnitFiles {
            judgments: with(".jsonl"),
            meta: with(".context.json"),
        }
    }

    /// The stored judgments if the unit is complete and was made from `expected`.
    pub fn load_if_complete(
        &self,
        expected: &UnitMeta,
    ) -> Result<Option<Vec<Judgment>>, PromptError> {
        let Ok(text) = std::fs::read_to_string(&self.meta) else {
            return Ok(None);
        };
        match serde_json::from_str::<UnitMeta>(&text) {
            Ok(meta) if meta == *expected => {}
            _ => return Ok(None),
        }
        let Ok(text) = std::fs::read_to_string(&self.judgments) else {
            return Ok(None);
        };
        let judgments = parse_lines(&self.judgments, &text)?;
        Ok((judgments.len() == expected.n).then_some(judgments))
    }

    /// Judgments first, then the sidecar: a crash in between leaves no sidecar, so the unit
    /// is recomputed rather than trusted.
    pub fn store(&self, meta: &UnitMeta, judgments: &[Judgment]) -> Result<(), PromptError> {
        let mut bytes = Vec::new();
        for j in judgments {
            serde_json::to_writer(&mut bytes, j).map_err(|e| PromptError::File {
                path: self.judgments.clone(),
                message: e.to_string(),
            })?;
            bytes.push(b'\n');
        }
        let _ = std::fs::remove_file(&self.meta);
        write_atomic(&self.judgments, &bytes).map_err(|e| PromptError::io(&self.judgments, e))?;
        write_json_atomic(&self.meta, meta).map_err(|e| PromptError::io(&self.meta, e))
    }
}

/// Reads a judgments file, naming the line of any bad record.
pub fn parse_lines(path: &Path, text: &str) -> Result<Vec<Judgment>, PromptError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| PromptError::File {
                path: path.to_path_buf(),
                message: format!("line {}: {e}", i + 1),
            })
        })
        .collect()
}

/// sha256 over ids joined by newlines.
pub fn ids_sha256(ids: &[&str]) -> String {
    sha256_hex(ids.join("\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(n: usize) -> UnitMeta {
        UnitMeta {
            context: BeliefContext {
                condition: "fictional".into(),
                draw: "main".into(),
                k: 2,
                seed: 1,
                ids: vec!["x".into(), "y".into()],
                texts: vec!["X.".into(), "Y.".into()],
                fewer: None,
            },
            format: PromptFormat::Plain,
            backend: "fake".into(),
            statements_sha256: ids_sha256(&["s1"]),
            n,
        }
    }

    fn judgment() -> Judgment {
        let probs = OptionProbs::from_probs([0.5, 0.25, 0.125]);
        Judgment {
            id: "s1".into(),
            condition: "fictional".into(),
            draw: "main".into(),
            format: PromptFormat::Plain,
            k: Some(2),
            p_a: probs.p[0],
            p_b: probs.p[1],
            p_c: probs.p[2],
            leftover: probs.leftover,
            answer: probs.answer(),
            judged_true: probs.answer().judged_true(),
        }
    }

    #[test]
    fn a_stored_unit_is_reused_only_when_it_matches() {
        let dir = tempfile::tempdir().unwrap();
        let files = UnitFiles::at(&dir.path().join("k2/fictional.main"));
        assert_eq!(files.load_if_complete(&meta(1)).unwrap(), None);
        files.store(&meta(1), &[judgment()]).unwrap();
        assert_eq!(
            files.load_if_complete(&meta(1)).unwrap(),
            Some(vec![judgment()])
        );
        let mut other = meta(1);
        other.backend = "another".into();
        assert_eq!(files.load_if_complete(&other).unwrap(), None);
        // A judgments file without its sidecar is incomplete.
        std::fs::remove_file(&files.meta).unwrap();
        assert_eq!(files.load_if_complete(&meta(1)).unwrap(), None);
    }

    #[test]
    fn bad_lines_are_named() {
        let err = parse_lines(Path::new("u.jsonl"), "{\"id\": 1}\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("u.jsonl") && err.contains("line 1"), "{err}");
    }
}
