//! Per-statement judgments on disk: one JSON line per held-out statement, one file per unit
//! (format, K, condition, draw), written whole or not at all, with a sidecar recording the
//! context drawn, the backend, the statements judged and the sha256 of the judgments file. A
//! unit whose files exist and match is complete and is not recomputed; one whose judgments no
//! longer match their hash (damaged on disk) is moved aside and recomputed, never used.

use crate::context::BeliefContext;
use crate::error::PromptError;
use crate::scoring::{Answer, OptionProbs};
use crate::study::Progress;
use crate::template::{PromptFormat, Protocol};
use pstat_data::artifact::{move_aside, sha256_hex, write_atomic, write_json_atomic};
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
    /// Recorded for the authors' protocol only, so units of the paper's read back unchanged.
    #[serde(default, skip_serializing_if = "Protocol::is_paper")]
    pub protocol: Protocol,
}

/// The sidecar file: what the unit was made from, and the sha256 of its judgments file.
#[derive(Serialize, Deserialize)]
struct Sidecar {
    #[serde(flatten)]
    meta: UnitMeta,
    judgments_sha256: String,
}

/// The two files of a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitFiles {
    pub judgments: PathBuf,
    pub meta: PathBuf,
    /// The exact text of the unit's first prompt (its first held-out statement under its
    /// context, rendered as the model reads it), so a reader sees what the model saw.
    pub prompt: PathBuf,
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
            prompt: with(".prompt.txt"),
        }
    }

    /// Writes `<stem>.prompt.txt` unless it already holds `text`.
    pub fn store_prompt(&self, text: &str) -> Result<(), PromptError> {
        if std::fs::read(&self.prompt).is_ok_and(|held| held == text.as_bytes()) {
            return Ok(());
        }
        write_atomic(&self.prompt, text.as_bytes()).map_err(|e| PromptError::io(&self.prompt, e))
    }

    /// The stored judgments if the unit is complete and was made from `expected`. A unit
    /// made from something else is recomputed silently; a damaged one (sidecar or judgments
    /// that do not parse, judgments that no longer match their hash or count) is named in a
    /// warning and its files moved aside (`*.corrupt`) before it is recomputed.
    pub fn load_if_complete(
        &self,
        expected: &UnitMeta,
        progress: &mut dyn Progress,
    ) -> Result<Option<Vec<Judgment>>, PromptError> {
        match self.check(expected) {
            Ok(judgments) => Ok(judgments),
            Err((path, reason)) => {
                let mut moved = Vec::new();
                for file in [&self.judgments, &self.meta] {
                    if file.exists() {
                        let aside = move_aside(file).map_err(|e| PromptError::io(file, e))?;
                        moved.push(aside.display().to_string());
                    }
                }
                progress.warning(&format!(
                    "{}: {reason}; moved to {} and recomputed",
                    path.display(),
                    moved.join(" and ")
                ));
                Ok(None)
            }
        }
    }

    /// `Ok(None)`: not computed (or computed from something else); `Err`: the damaged file
    /// and what is wrong with it.
    fn check(&self, expected: &UnitMeta) -> Result<Option<Vec<Judgment>>, (PathBuf, String)> {
        let Ok(text) = std::fs::read_to_string(&self.meta) else {
            return Ok(None);
        };
        let sidecar = serde_json::from_str::<Sidecar>(&text)
            .map_err(|e| (self.meta.clone(), format!("unreadable unit record ({e})")))?;
        if sidecar.meta != *expected {
            return Ok(None);
        }
        let Ok(bytes) = std::fs::read(&self.judgments) else {
            return Ok(None);
        };
        let damaged = |reason: String| (self.judgments.clone(), reason);
        if sha256_hex(&bytes) != sidecar.judgments_sha256 {
            return Err(damaged(
                "judgments do not match the sha256 recorded in the unit's sidecar (damaged on disk)"
                    .into(),
            ));
        }
        let text = String::from_utf8(bytes).map_err(|e| damaged(e.to_string()))?;
        let judgments = parse_lines(&self.judgments, &text).map_err(|e| damaged(e.to_string()))?;
        if judgments.len() != expected.n {
            return Err(damaged(format!(
                "{} judgments where the unit has {}",
                judgments.len(),
                expected.n
            )));
        }
        Ok(Some(judgments))
    }

    /// Judgments first, then the sidecar with their hash: a crash in between leaves no
    /// sidecar, so the unit is recomputed rather than trusted.
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
        let sidecar = Sidecar {
            meta: meta.clone(),
            judgments_sha256: sha256_hex(&bytes),
        };
        write_json_atomic(&self.meta, &sidecar).map_err(|e| PromptError::io(&self.meta, e))
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
    use crate::study::Silent;

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
            protocol: Protocol::Paper,
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
        let load = |expected: &UnitMeta| files.load_if_complete(expected, &mut Silent).unwrap();
        assert_eq!(load(&meta(1)), None);
        files.store(&meta(1), &[judgment()]).unwrap();
        assert_eq!(load(&meta(1)), Some(vec![judgment()]));
        let mut other = meta(1);
        other.backend = "another".into();
        assert_eq!(load(&other), None);
        // A judgments file without its sidecar is incomplete.
        std::fs::remove_file(&files.meta).unwrap();
        assert_eq!(load(&meta(1)), None);
    }

    /// Records the warnings it is given.
    struct Warnings(Vec<String>);

    impl Progress for Warnings {
        fn start(&mut self, _: &str, _: usize) {}
        fn advance(&mut self, _: usize) {}
        fn finish(&mut self, _: bool) {}
        fn warning(&mut self, message: &str) {
            self.0.push(message.to_string());
        }
    }

    #[test]
    fn a_garbled_judgment_file_is_named_moved_aside_and_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let files = UnitFiles::at(&dir.path().join("k2/fictional.main"));
        files.store(&meta(1), &[judgment()]).unwrap();
        // Same size, still valid JSON lines: only the hash tells.
        let text = std::fs::read_to_string(&files.judgments).unwrap();
        let garbled = text.replacen("\"judged_true\":true", "\"judged_true\":fals", 1);
        let garbled = if garbled == text {
            text.replacen("\"judged_true\":false", "\"judged_true\":true ", 1)
        } else {
            garbled
        };
        assert_eq!(garbled.len(), text.len());
        std::fs::write(&files.judgments, garbled).unwrap();
        let mut warnings = Warnings(Vec::new());
        assert_eq!(
            files.load_if_complete(&meta(1), &mut warnings).unwrap(),
            None
        );
        let [warning] = warnings.0.as_slice() else {
            panic!("{:?}", warnings.0)
        };
        assert!(
            warning.contains("fictional.main.jsonl") && warning.contains("sha256"),
            "{warning}"
        );
        assert!(!files.judgments.exists() && !files.meta.exists());
        assert!(dir.path().join("k2/fictional.main.jsonl.corrupt").exists());
        // A sidecar garbled beyond parsing is named too.
        files.store(&meta(1), &[judgment()]).unwrap();
        std::fs::write(&files.meta, "{\"context\": ").unwrap();
        let mut warnings = Warnings(Vec::new());
        assert_eq!(
            files.load_if_complete(&meta(1), &mut warnings).unwrap(),
            None
        );
        assert!(
            warnings.0[0].contains("fictional.main.context.json"),
            "{:?}",
            warnings.0
        );
    }

    #[test]
    fn bad_lines_are_named() {
        let err = parse_lines(Path::new("u.jsonl"), "{\"id\": 1}\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("u.jsonl") && err.contains("line 1"), "{err}");
    }
}
