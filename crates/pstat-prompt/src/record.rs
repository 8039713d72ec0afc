//! Per-statement judgments on disk: one JSON line per held-out statement, one file per unit
//! (format, K, condition, draw), written whole or not at all, with a sidecar recording the
//! context drawn, the backend, the statements judged and the sha256 of the judgments file. A
//! unit whose files exist and match is complete and is not recomputed; one whose judgments no
//! longer match their hash (damaged on disk) is moved aside and recomputed, never used.
//!
//! While a unit is computed its judgments are checkpointed block by block into
//! `<stem>.partial.jsonl` (a header line with the unit's [`UnitMeta`], then one line per
//! judgment), so an interrupted unit resumes from its last whole block: the header must equal
//! the unit's, and the judgments must be those of the unit's first statements, in order.

use crate::context::BeliefContext;
use crate::error::PromptError;
use crate::progress::Progress;
use crate::scoring::{Answer, OptionProbs};
use crate::template::{PromptFormat, Protocol};
use pstat_data::artifact::{move_aside, sha256_hex, write_atomic, write_json_atomic};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// g_pr(s, Θ) for one statement, with everything it was computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgment {
    /// The statement id.
    pub id: String,
    /// Name of the condition Θ.
    pub condition: String,
    /// `main`, a resample number, or `shuffle`.
    pub draw: String,
    /// Chat or plain prompt.
    pub format: PromptFormat,
    /// Context size; absent for the empty-context baseline.
    pub k: Option<usize>,
    /// p(a): probability of option a (True), summed over its option tokens.
    pub p_a: f64,
    /// p(b): probability of option b (false), summed over its option tokens.
    pub p_b: f64,
    /// p(c): probability of option c (neither), summed over its option tokens.
    pub p_c: f64,
    /// 1 − (p_a + p_b + p_c).
    pub leftover: f64,
    /// The argmax of p(a), p(b), p(c) (ties go to the earlier label).
    pub answer: Answer,
    /// Whether the answer is a, i.e. the statement is judged True.
    pub judged_true: bool,
}

impl Judgment {
    /// The three option probabilities and the leftover, as scored.
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
    /// The belief context drawn for the unit.
    pub context: BeliefContext,
    /// Chat or plain prompt.
    pub format: PromptFormat,
    /// What scored the unit ([`OptionScorer::identity`](crate::OptionScorer::identity)): the
    /// model file's hash or the server and model.
    pub backend: String,
    /// sha256 over the judged statement ids, in order.
    pub statements_sha256: String,
    /// Number of statements judged.
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

/// The two files of a unit, and its checkpoint while it is computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitFiles {
    /// `<stem>.jsonl`: one judgment per line.
    pub judgments: PathBuf,
    /// `<stem>.context.json`: the sidecar ([`UnitMeta`] and the judgments' sha256); it exists
    /// once the unit is complete.
    pub meta: PathBuf,
    /// The exact text of the unit's first prompt (its first held-out statement under its
    /// context, rendered as the model reads it), so a reader sees what the model saw.
    pub prompt: PathBuf,
    /// `<stem>.partial.jsonl`: the checkpoint while the unit is computed.
    pub partial: PathBuf,
}

impl UnitFiles {
    /// `<stem>.jsonl`, `<stem>.context.json` and `<stem>.partial.jsonl`.
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
            partial: with(".partial.jsonl"),
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
        write_json_atomic(&self.meta, &sidecar).map_err(|e| PromptError::io(&self.meta, e))?;
        match std::fs::remove_file(&self.partial) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(PromptError::io(&self.partial, e))
            }
            _ => Ok(()),
        }
    }

    /// The judgments an interrupted computation of this unit checkpointed: those of the first
    /// `k × block` statements of `ids` (whole blocks only: a block cut short by the interruption
    /// is computed again). The checkpoint is rewritten to hold exactly them, so that
    /// [`UnitFiles::checkpoint`] appends after them; a checkpoint of another computation
    /// (different header) is started afresh, and a damaged one is named in a warning, moved
    /// aside and started afresh.
    pub fn resume(
        &self,
        meta: &UnitMeta,
        ids: &[&str],
        block: usize,
        progress: &mut dyn Progress,
    ) -> Result<Vec<Judgment>, PromptError> {
        let header = header_line(&self.partial, meta)?;
        let kept = match std::fs::read(&self.partial) {
            Ok(bytes) => match checkpointed(&bytes, &header, ids, block) {
                Ok(kept) => kept,
                Err(reason) => {
                    let aside =
                        move_aside(&self.partial).map_err(|e| PromptError::io(&self.partial, e))?;
                    progress.warning(&format!(
                        "{}: {reason}; moved to {} and the unit computed from its start",
                        self.partial.display(),
                        aside.display()
                    ));
                    Vec::new()
                }
            },
            Err(_) => Vec::new(),
        };
        let mut bytes = header.into_bytes();
        for chunk in kept.chunks(block.max(1)) {
            bytes.extend(self.sealed_block(chunk)?);
        }
        write_atomic(&self.partial, &bytes).map_err(|e| PromptError::io(&self.partial, e))?;
        Ok(kept)
    }

    /// Appends one computed block of judgments to the checkpoint [`UnitFiles::resume`] began.
    pub fn checkpoint(&self, judgments: &[Judgment]) -> Result<(), PromptError> {
        use std::io::Write;
        let bytes = self.sealed_block(judgments)?;
        // One write per block: an interruption leaves at most one block cut short, and
        // `resume` keeps sealed blocks only.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&self.partial)
            .and_then(|mut f| f.write_all(&bytes))
            .map_err(|e| PromptError::io(&self.partial, e))
    }
}

impl UnitFiles {
    /// A block's judgment lines followed by its seal, the sha256 of those lines: a checkpoint is
    /// read back only as far as its blocks still match their seals.
    fn sealed_block(&self, judgments: &[Judgment]) -> Result<Vec<u8>, PromptError> {
        let mut bytes = Vec::new();
        for j in judgments {
            push_line(&self.partial, &mut bytes, j)?;
        }
        let seal = BlockSeal {
            block_sha256: sha256_hex(&bytes),
        };
        let line = serde_json::to_string(&seal).map_err(|e| PromptError::File {
            path: self.partial.clone(),
            message: e.to_string(),
        })?;
        bytes.extend(line.as_bytes());
        bytes.push(b'\n');
        Ok(bytes)
    }
}

/// The line that closes a checkpointed block.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockSeal {
    /// sha256 of the block's judgment lines, newlines included.
    block_sha256: String,
}

fn push_line(path: &Path, bytes: &mut Vec<u8>, judgment: &Judgment) -> Result<(), PromptError> {
    serde_json::to_writer(&mut *bytes, judgment).map_err(|e| PromptError::File {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    bytes.push(b'\n');
    Ok(())
}

/// The checkpoint's first line: the unit's meta, so a checkpoint is resumed only by the same
/// computation.
fn header_line(path: &Path, meta: &UnitMeta) -> Result<String, PromptError> {
    let mut line = serde_json::to_string(meta).map_err(|e| PromptError::File {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    line.push('\n');
    Ok(line)
}

/// The whole blocks of judgments a checkpoint holds after `header`; none when its header is
/// another computation's. `Err`: what is wrong with a checkpoint of this computation.
fn checkpointed(
    bytes: &[u8],
    header: &str,
    ids: &[&str],
    block: usize,
) -> Result<Vec<Judgment>, String> {
    let Some(body) = bytes.strip_prefix(header.as_bytes()) else {
        return Ok(Vec::new());
    };
    // Only lines ended by a newline were written whole, and only sealed blocks are kept: the
    // lines after the last seal are a block cut short.
    let whole = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let text = std::str::from_utf8(&body[..whole]).map_err(|e| e.to_string())?;
    let mut judgments = Vec::new();
    let mut pending: Vec<Judgment> = Vec::new();
    let mut pending_bytes: Vec<u8> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 2;
        if let Ok(seal) = serde_json::from_str::<BlockSeal>(line) {
            if seal.block_sha256 != sha256_hex(&pending_bytes) {
                return Err(format!(
                    "line {number}: the block before it no longer matches its sha256 (edited or damaged)"
                ));
            }
            judgments.append(&mut pending);
            pending_bytes.clear();
            continue;
        }
        let judgment: Judgment =
            serde_json::from_str(line).map_err(|e| format!("line {number}: {e}"))?;
        let index = judgments.len() + pending.len();
        if ids.get(index) != Some(&judgment.id.as_str()) {
            return Err(format!(
                "line {number} judges {}, where the unit's statement {} is {}",
                judgment.id,
                index + 1,
                ids.get(index).unwrap_or(&"(none)")
            ));
        }
        pending_bytes.extend(line.as_bytes());
        pending_bytes.push(b'\n');
        pending.push(judgment);
    }
    judgments.truncate(judgments.len() / block * block);
    Ok(judgments)
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
    use crate::progress::Silent;

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
    fn a_checkpoint_resumes_whole_blocks_of_the_same_computation_only() {
        let dir = tempfile::tempdir().unwrap();
        let files = UnitFiles::at(&dir.path().join("k2/fictional.main"));
        std::fs::create_dir_all(dir.path().join("k2")).unwrap();
        let judged = |id: &str| Judgment {
            id: id.into(),
            ..judgment()
        };
        let ids = ["s1", "s2", "s3", "s4", "s5"];
        let resume = |meta: &UnitMeta, progress: &mut dyn Progress| {
            files.resume(meta, &ids, 2, progress).unwrap()
        };
        assert_eq!(resume(&meta(5), &mut Silent), vec![]);
        files.checkpoint(&[judged("s1"), judged("s2")]).unwrap();
        files.checkpoint(&[judged("s3"), judged("s4")]).unwrap();
        // A block cut short by a kill: one whole line and a torn one.
        let torn = serde_json::to_string(&judged("s5")).unwrap();
        let mut bytes = std::fs::read(&files.partial).unwrap();
        bytes.extend_from_slice(format!("{torn}\n{}", &torn[..10]).as_bytes());
        std::fs::write(&files.partial, bytes).unwrap();
        let kept = resume(&meta(5), &mut Silent);
        assert_eq!(kept, ["s1", "s2", "s3", "s4"].map(judged));
        // Rewritten to exactly what was kept (each block with its seal), so the next block
        // appends after it.
        files.checkpoint(&[judged("s5")]).unwrap();
        let text = std::fs::read_to_string(&files.partial).unwrap();
        assert_eq!(text.lines().count(), 1 + 3 + 3 + 2);
        // A judgment edited in place, still valid and of the right statement, breaks its
        // block's seal: named, moved aside, computed afresh.
        let edited = text.replacen("\"p_a\":0.5", "\"p_a\":0.6", 1);
        assert_ne!(edited, text);
        std::fs::write(&files.partial, edited).unwrap();
        let mut warnings = Warnings(Vec::new());
        assert_eq!(resume(&meta(5), &mut warnings), vec![]);
        assert!(
            warnings.0[0].contains("partial.jsonl") && warnings.0[0].contains("sha256"),
            "{:?}",
            warnings.0
        );
        files.checkpoint(&[judged("s1"), judged("s2")]).unwrap();
        assert_eq!(resume(&meta(5), &mut Silent), ["s1", "s2"].map(judged));
        // Another computation's checkpoint is not used.
        let mut other = meta(5);
        other.backend = "another".into();
        assert_eq!(resume(&other, &mut Silent), vec![]);
        // One that judged other statements is named and moved aside.
        files.checkpoint(&[judged("s9"), judged("s2")]).unwrap();
        let mut warnings = Warnings(Vec::new());
        assert_eq!(resume(&other, &mut warnings), vec![]);
        assert!(
            warnings.0[0].contains("partial.jsonl") && warnings.0[0].contains("s9"),
            "{:?}",
            warnings.0
        );
        // Storing the unit removes its checkpoint.
        files.store(&meta(5), &ids.map(judged)).unwrap();
        assert!(!files.partial.exists());
    }

    #[test]
    fn bad_lines_are_named() {
        let err = parse_lines(Path::new("u.jsonl"), "{\"id\": 1}\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("u.jsonl") && err.contains("line 1"), "{err}");
    }
}
