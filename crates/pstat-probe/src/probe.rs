//! The trained linear probe shared by sAwMIL and Mass-Mean, its scoring rule and its file
//! format.
//!
//! File (safetensors, readable with `safetensors.numpy.load_file`):
//!
//! | tensor         | dtype | shape | meaning                                        |
//! |----------------|-------|-------|------------------------------------------------|
//! | `w`            | F64   | `[d]`   | unit direction in standardized space           |
//! | `b`            | F64   | `[1]`   | bias; decision = x_std·w + b, label = decision > 0 |
//! | `scaler_mean`  | F64   | `[d]`   | standardization mean                           |
//! | `scaler_scale` | F64   | `[d]`   | standardization scale                          |
//!
//! Metadata: `probe` (`sawmil` | `mass_mean`, the [`Probe`] spellings of the tables; files
//! written by earlier versions spell Mass-Mean `mass-mean`, still read), `content_xxh3` (the
//! xxh3-64 of the tensors and the other metadata, as for an activation file, checked on every
//! load: one changed byte makes the file refused, never scored) and, for sAwMIL, `C`, `eta` and
//! `converged` (`true` | `false`: whether its QPs met their tolerances before the solver's
//! caps).

use crate::bags::{Bags, TrainingSet};
use crate::error::{ProbeError, Result, invalid};
use crate::milfile::MilFile;
use crate::standardize::Standardizer;
use pstat_data::activations::Activations;
use pstat_data::activations::{CONTENT_HASH, content_hash, sort_header};
use pstat_data::error::Malformed;
use pstat_tables::Probe;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Fit-predict in the linfa style: parameters fit a training set into a probe. `Sync`, so that
/// the independent fits of one training set (one per Θ) can run on several threads. What a
/// study does with a probe beyond fitting it (its noise-floor refits, its C) is read from here,
/// so that the study treats every registered probe alike.
pub trait ProbeParams: Sync {
    /// Fit a probe on `set`; [`ProbeError::Invalid`] for unusable data or settings (e.g. a
    /// single class), [`ProbeError::Degenerate`] when no direction exists.
    fn fit(&self, set: &TrainingSet) -> Result<TrainedProbe>;
    /// How many of a training set's first bags the final fit sees when `available` are given
    /// (sAwMIL fits the first `train_bag_limit`; Mass-Mean all of them).
    fn training_bags(&self, available: usize) -> usize {
        available
    }
    /// How the representational noise floor refits the baseline with unchanged labels: the
    /// refit must differ from the baseline fit by chance alone, and what chance a fit has
    /// depends on the probe.
    fn noise_floor_refit(&self) -> NoiseFloorRefit;
    /// The regularization C of the settings, for a probe that has one.
    fn c(&self) -> CSetting {
        CSetting::Absent
    }
    /// Where [`ProbeParams::c`] is [`CSetting::Searched`]: choose C on the baseline's training
    /// set and return the settings with it fixed, which every Θ of a unit is then fit with.
    fn search_c(&self, _baseline: &TrainingSet) -> Result<SearchedC> {
        invalid("the probe's settings have no C to search")
    }
}

/// How a refit with unchanged labels draws its chance (the noise floor's refits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoiseFloorRefit {
    /// Another seeded shuffle of the same training statements, with another draw of the Noise
    /// bags: for a probe whose fit depends on the order, the capping or the limit of its bags.
    Reshuffle,
    /// A seeded bootstrap resample of the training bags: for a probe whose fit on the same
    /// bags in any order would be identical.
    Bootstrap,
}

/// The regularization C of a probe's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CSetting {
    /// The probe has no C.
    Absent,
    /// Fixed in the settings.
    Fixed(f64),
    /// Chosen by a search on the baseline's labels ([`ProbeParams::search_c`]).
    Searched,
}

/// What [`ProbeParams::search_c`] chose, and the baseline probe it fit on the way.
pub struct SearchedC {
    /// The settings with the chosen C fixed.
    pub params: Box<dyn ProbeParams>,
    /// The baseline probe fit at the chosen C, reused rather than fit twice.
    pub baseline: TrainedProbe,
    /// The chosen C.
    pub c: f64,
    /// The mean CV score per C of the grid (`None` where the C was skipped).
    pub scores: Vec<(f64, Option<f64>)>,
    /// The C values skipped because their fit was degenerate, with the reason.
    pub skipped: Vec<(f64, String)>,
}

/// How a probe's statement score reads the bag of a statement's token rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readout {
    /// The largest token score: a multiple-instance probe, which also scores bags of arbitrary
    /// instances.
    MaxOverTokens,
    /// The last token's score.
    LastToken,
}

/// A fitted linear probe h_Θ: standardization, unit direction w and bias b; decision
/// x_std·w + b, True when positive.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainedProbe {
    /// One of [`Probe::REPRESENTATIONAL`] (never [`Probe::Prompt`]: fitting and loading make
    /// only the trained kinds), which fixes the statement score.
    pub(crate) kind: Probe,
    /// Unit-norm direction in standardized space.
    pub direction: Vec<f64>,
    /// Bias b of the decision x_std·w + b.
    pub bias: f64,
    /// The standardization fitted on the training bags, applied before w.
    pub scaler: Standardizer,
    /// sAwMIL: the C of the final fit (fixed or chosen by the search); `None` for Mass-Mean.
    pub c: Option<f64>,
    /// sAwMIL: η, the share of known positives among the capped instances; `None` for
    /// Mass-Mean.
    pub eta: Option<f64>,
    /// sAwMIL: whether every QP of the fit converged (`None` for Mass-Mean, which has no
    /// iterative solver, and for probe files written before it was recorded).
    pub converged: Option<bool>,
}

impl TrainedProbe {
    /// Feature dimension the probe expects.
    pub fn dim(&self) -> usize {
        self.direction.len()
    }

    /// Decision value of one token row: standardize, then x·w + b.
    pub fn token_score(&self, row: &[f32]) -> f64 {
        row.iter()
            .zip(&self.scaler.mean)
            .zip(&self.scaler.scale)
            .zip(&self.direction)
            .map(|(((&x, m), s), w)| (x as f64 - m) / s * w)
            .sum::<f64>()
            + self.bias
    }

    /// How this kind of probe reads a bag ([`crate::readout`]).
    fn readout(&self) -> Readout {
        crate::readout(self.kind).expect("a trained probe is of a representational kind")
    }

    /// Statement score of a bag (row-major [n × d], n ≥ 1), as the probe's [`Readout`] reads
    /// it: sAwMIL takes the max over all tokens, Mass-Mean the last token.
    pub fn score(&self, bag: &[f32]) -> f32 {
        let d = self.dim();
        let s = match self.readout() {
            Readout::MaxOverTokens => bag
                .chunks_exact(d)
                .map(|r| self.token_score(r))
                .fold(f64::NEG_INFINITY, f64::max),
            Readout::LastToken => self.token_score(&bag[bag.len() - d..]),
        };
        s as f32
    }

    /// Statement score of every bag, in bag order.
    pub fn scores(&self, bags: &Bags) -> Vec<f32> {
        (0..bags.len()).map(|i| self.score(bags.bag(i))).collect()
    }

    /// Scores of every statement of an activation file (a run's cache or an imported one), in
    /// file order, exactly as a run judges them.
    pub fn score_activations(&self, acts: &Activations) -> Result<Vec<f32>> {
        self.check_dim(acts.hidden, "the activation file")?;
        let scores: Vec<f32> = (0..acts.len())
            .map(|i| self.score(acts.statement(i)))
            .collect();
        finite(&scores, |i| {
            format!("statement `{}`", acts.statement_ids[i])
        })?;
        Ok(scores)
    }

    /// Scores of a bags file's bags, in bag order. Only a multiple-instance probe (sAwMIL)
    /// scores bags of arbitrary instances; one that reads a statement's last token (Mass-Mean)
    /// scores statements.
    pub fn score_bags_file(&self, file: &MilFile) -> Result<Vec<f32>> {
        if self.readout() != Readout::MaxOverTokens {
            return invalid(format!(
                "a {} probe scores statements, not bags (give it an activation file)",
                self.kind
            ));
        }
        self.check_dim(file.bags.dim(), "tensor `X`")?;
        let scores = self.scores(&file.bags);
        finite(&scores, |i| format!("bag {i}"))?;
        Ok(scores)
    }

    fn check_dim(&self, found: usize, what: &str) -> Result<()> {
        if found == self.dim() {
            return Ok(());
        }
        invalid(format!(
            "{what} has {found} features but the probe expects {}",
            self.dim()
        ))
    }

    /// Which probe this is: one of [`Probe::REPRESENTATIONAL`].
    pub fn kind(&self) -> Probe {
        self.kind
    }

    /// Upstream's default label: strictly positive decision.
    pub fn label(score: f32) -> i8 {
        if score > 0.0 { 1 } else { -1 }
    }

    /// The probe file's bytes (safetensors, see the module docs), content hash included.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.serialize(self.kind.as_str())
    }

    /// The file's bytes with `kind` as the `probe` metadata (tests write earlier versions'
    /// spelling with it).
    fn serialize(&self, kind: &str) -> Vec<u8> {
        let bytes = |v: &[f64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let named = [
            ("w", bytes(&self.direction)),
            ("b", bytes(&[self.bias])),
            ("scaler_mean", bytes(&self.scaler.mean)),
            ("scaler_scale", bytes(&self.scaler.scale)),
        ];
        let views = named.iter().map(|(name, data)| {
            (
                *name,
                TensorView::new(Dtype::F64, vec![data.len() / 8], data)
                    .expect("shape matches data"),
            )
        });
        let mut meta = HashMap::from([("probe".to_string(), kind.to_string())]);
        if let Some(c) = self.c {
            meta.insert("C".into(), c.to_string());
        }
        if let Some(eta) = self.eta {
            meta.insert("eta".into(), eta.to_string());
        }
        if let Some(converged) = self.converged {
            meta.insert("converged".into(), converged.to_string());
        }
        let views: Vec<_> = views.collect();
        // The data section does not depend on the metadata, so its hash can be stored there.
        let unhashed = safetensors::serialize(views.clone(), Some(meta.clone()))
            .expect("in-memory safetensors serialization");
        let sorted: BTreeMap<String, String> = meta.clone().into_iter().collect();
        let hash = content_hash(&unhashed, &sorted).expect("a well-formed file");
        meta.insert(CONTENT_HASH.into(), format!("{hash:016x}"));
        let mut bytes =
            safetensors::serialize(views, Some(meta)).expect("in-memory safetensors serialization");
        sort_header(&mut bytes);
        bytes
    }

    /// Parse a probe file's bytes; refused when the content hash, a tensor's shape or dtype, or
    /// a metadata value does not check out.
    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<Self, Malformed> {
        Self::parse(bytes).map_err(Malformed)
    }

    fn parse(bytes: &[u8]) -> std::result::Result<Self, String> {
        let (_, header) = SafeTensors::read_metadata(bytes).map_err(|e| e.to_string())?;
        let mut meta: BTreeMap<String, String> = header
            .metadata()
            .clone()
            .map(|m| m.into_iter().collect())
            .unwrap_or_default();
        let stored = meta.remove(CONTENT_HASH).ok_or(format!(
            "metadata lacks `{CONTENT_HASH}` (not a probe pstat saved, or saved before probes \
             carried a content hash: fit it again)"
        ))?;
        let actual = format!("{:016x}", content_hash(bytes, &meta)?);
        if stored != actual {
            return Err(format!(
                "content hash mismatch (stored {stored}, computed {actual}): damaged or edited"
            ));
        }
        let tensors = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let vector = |name: &str| -> std::result::Result<Vec<f64>, String> {
            let t = tensors
                .tensor(name)
                .map_err(|e| format!("tensor `{name}`: {e}"))?;
            if t.dtype() != Dtype::F64 || t.shape().len() != 1 {
                return Err(format!(
                    "tensor `{name}` must be 1-D F64, found {:?} {:?}",
                    t.dtype(),
                    t.shape()
                ));
            }
            Ok(t.data()
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect())
        };
        let direction = vector("w")?;
        let b = vector("b")?;
        let mean = vector("scaler_mean")?;
        let scale = vector("scaler_scale")?;
        if b.len() != 1
            || mean.len() != direction.len()
            || scale.len() != direction.len()
            || direction.is_empty()
        {
            return Err(format!(
                "shapes disagree: w [{}], b [{}], scaler_mean [{}], scaler_scale [{}]",
                direction.len(),
                b.len(),
                mean.len(),
                scale.len()
            ));
        }
        let values = || direction.iter().chain(&b).chain(&mean).chain(&scale);
        if values().any(|v| !v.is_finite()) || scale.iter().any(|s| *s <= 0.0) {
            return Err(
                "a weight, the bias or the scaler is not a finite number (or a scale is not above 0)"
                    .into(),
            );
        }
        let expected = || {
            let kinds: Vec<String> = Probe::REPRESENTATIONAL
                .iter()
                .map(|p| format!("\"{p}\""))
                .collect();
            format!("(expected {})", kinds.join(" or "))
        };
        let kind = match meta.get("probe").map(String::as_str) {
            // Earlier versions spelled Mass-Mean `mass-mean`.
            Some("mass-mean") => Probe::MassMean,
            Some(name) => match name.parse::<Probe>() {
                Ok(kind) if kind.is_representational() => kind,
                Ok(kind) => {
                    return Err(format!(
                        "metadata `probe` is \"{kind}\", the behavioral judgment, which is not a \
                         trained probe {}",
                        expected()
                    ));
                }
                Err(e) => return Err(format!("metadata `probe`: {e}")),
            },
            None => return Err(format!("metadata lacks `probe` {}", expected())),
        };
        let number = |key: &str| -> std::result::Result<Option<f64>, String> {
            meta.get(key)
                .map(|v| {
                    v.parse::<f64>()
                        .map_err(|e| format!("metadata `{key}` = {v:?}: {e}"))
                })
                .transpose()
        };
        let converged = meta
            .get("converged")
            .map(|v| {
                v.parse::<bool>()
                    .map_err(|_| format!("metadata `converged` = {v:?}, expected true or false"))
            })
            .transpose()?;
        Ok(TrainedProbe {
            kind,
            direction,
            bias: b[0],
            scaler: Standardizer { mean, scale },
            c: number("C")?,
            eta: number("eta")?,
            converged,
        })
    }

    /// Write the probe file atomically; [`ProbeError::File`] naming the path on failure.
    pub fn save(&self, path: &Path) -> Result<()> {
        pstat_data::artifact::write_atomic(path, &self.to_bytes()).map_err(|e| ProbeError::File {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Read and check a probe file; [`ProbeError::File`] naming the path when it cannot be read
    /// or is malformed.
    pub fn load(path: &Path) -> Result<Self> {
        let file_error = |message: String| ProbeError::File {
            path: path.display().to_string(),
            message,
        };
        let bytes = std::fs::read(path).map_err(|e| file_error(e.to_string()))?;
        Self::from_bytes(&bytes).map_err(|Malformed(message)| file_error(message))
    }
}

/// An error naming the first item (`what(i)`) whose score is not a finite number.
fn finite(scores: &[f32], what: impl Fn(usize) -> String) -> Result<()> {
    match scores.iter().position(|s| !s.is_finite()) {
        None => Ok(()),
        Some(i) => invalid(format!(
            "the score of {} is {}, not a number",
            what(i),
            scores[i]
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(kind: Probe) -> TrainedProbe {
        TrainedProbe {
            kind,
            direction: vec![1.0, 0.0],
            bias: -0.5,
            scaler: Standardizer {
                mean: vec![1.0, 0.0],
                scale: vec![2.0, 1.0],
            },
            c: Some(0.5),
            eta: Some(0.2),
            converged: Some(false),
        }
    }

    #[test]
    fn sawmil_takes_max_over_all_tokens_mass_mean_the_last() {
        // Token scores: (x0 − 1)/2 − 0.5 → 0.5, −1.0, 2.0, −0.5.
        let bag = [3.0f32, 9.0, -1.0, 9.0, 6.0, 9.0, 1.0, 9.0];
        assert_eq!(probe(Probe::Sawmil).score(&bag), 2.0);
        assert_eq!(probe(Probe::MassMean).score(&bag), -0.5);
        assert_eq!(TrainedProbe::label(0.0), -1);
        assert_eq!(TrainedProbe::label(1e-6), 1);
    }

    #[test]
    fn file_round_trip() {
        let p = probe(Probe::Sawmil);
        assert_eq!(TrainedProbe::from_bytes(&p.to_bytes()).unwrap(), p);
        let mut m = probe(Probe::MassMean);
        m.c = None;
        m.eta = None;
        m.converged = None;
        assert_eq!(TrainedProbe::from_bytes(&m.to_bytes()).unwrap(), m);
    }

    #[test]
    fn mass_mean_is_written_in_the_tables_spelling_and_the_old_one_still_read() {
        let mut m = probe(Probe::MassMean);
        m.c = None;
        m.eta = None;
        m.converged = None;
        let bytes = m.to_bytes();
        let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
        let meta = header.metadata().clone().unwrap();
        assert_eq!(meta["probe"], "mass_mean");
        let old = m.serialize("mass-mean");
        assert_ne!(old, bytes);
        assert_eq!(TrainedProbe::from_bytes(&old).unwrap(), m);
    }

    #[test]
    fn the_prompt_kind_or_an_unknown_one_is_refused() {
        let p = probe(Probe::Sawmil);
        let err = TrainedProbe::from_bytes(&p.serialize("prompt"))
            .unwrap_err()
            .0;
        assert!(err.contains("not a trained probe"), "{err}");
        let err = TrainedProbe::from_bytes(&p.serialize("svm")).unwrap_err().0;
        assert!(err.contains("unknown probe `svm`"), "{err}");
    }

    #[test]
    fn one_changed_byte_anywhere_is_refused() {
        let bytes = probe(Probe::Sawmil).to_bytes();
        let header = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        // Every byte of the data section, and the digits of the metadata's `C`.
        let c_at = String::from_utf8_lossy(&bytes[8..header])
            .find("\"C\":\"0.5")
            .unwrap()
            + 8
            + 7;
        for at in (header..bytes.len()).chain([c_at]) {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x01;
            let err = TrainedProbe::from_bytes(&damaged).unwrap_err().0;
            assert!(
                err.contains("hash") || err.contains("finite"),
                "byte {at}: {err}"
            );
        }
    }
}
