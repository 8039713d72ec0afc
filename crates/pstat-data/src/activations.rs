//! Ragged per-token activations: every token's residual stream of every statement at one
//! layer, stored without padding. On disk it is a safetensors file that Python reads with
//! `safetensors.numpy.load_file`:
//!
//! | tensor      | dtype   | shape              | meaning                                      |
//! |-------------|---------|--------------------|----------------------------------------------|
//! | `values`    | F16/F32 | `[tokens, hidden]` | token rows of all statements, concatenated   |
//! | `offsets`   | I64     | `[statements + 1]` | statement i: rows `offsets[i]..offsets[i+1]` |
//! | `token_ids` | U32     | `[tokens]`         | the token fed at each row                    |
//!
//! The safetensors metadata holds `statement_ids` (JSON list), `content_xxh3` (the xxh3-64 of
//! everything after the header, checked on every read: a cache file garbled on disk must never
//! feed a probe) and any provenance the writer adds (model sha256, layer, template, data hash).

use crate::error::Malformed;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Metadata key of the content hash (of an activation file, and of a saved probe).
pub const CONTENT_HASH: &str = "content_xxh3";

/// One layer's per-token activations of a list of statements, in memory (values as f32
/// whatever the file's precision).
#[derive(Debug, Clone, PartialEq)]
pub struct Activations {
    /// Width of each token row (the model's hidden size).
    pub hidden: usize,
    /// Row-major `[tokens, hidden]`.
    pub values: Vec<f32>,
    /// Length statements + 1, starting at 0.
    pub offsets: Vec<usize>,
    /// The token fed at each row (`[tokens]`).
    pub token_ids: Vec<u32>,
    /// The statements, in row order: statement `i` owns rows `offsets[i]..offsets[i + 1]`.
    pub statement_ids: Vec<String>,
    /// The writer's provenance (model sha256, layer, template, data hash, …); read back without
    /// the `statement_ids`, `hidden` and [`CONTENT_HASH`] keys the file format itself uses.
    pub metadata: BTreeMap<String, String>,
}

/// On-disk precision of `values`. f16 halves the cache; probes read it back as f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// f16, unless a value lies beyond f16's range (±65504): then the file is written in f32.
    /// Gemma 3's residual stream reaches ~1e5 on its first (BOS) row, which f16 would turn
    /// into infinities.
    F16,
    /// f32: exact.
    F32,
}

/// Largest finite f16.
const F16_MAX: f32 = 65504.0;

/// Why an activation file could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ActivationsError {
    /// The file is damaged (truncated, garbled, hash mismatch): recompute it after
    /// [`move_aside`], never use it.
    #[error("{path}: corrupt activation file: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl Activations {
    /// No statements yet, rows `hidden` wide.
    pub fn new(hidden: usize) -> Self {
        Activations {
            hidden,
            values: Vec::new(),
            offsets: vec![0],
            token_ids: Vec::new(),
            statement_ids: Vec::new(),
            metadata: BTreeMap::new(),
        }
    }

    /// Number of statements.
    pub fn len(&self) -> usize {
        self.statement_ids.len()
    }

    /// Whether it holds no statement.
    pub fn is_empty(&self) -> bool {
        self.statement_ids.is_empty()
    }

    /// Number of token rows, over all statements.
    pub fn n_tokens(&self) -> usize {
        self.token_ids.len()
    }

    /// Makes room for `statements` more statements of `tokens` token rows in all, so that
    /// pushing them never moves the rows already held.
    pub fn reserve(&mut self, statements: usize, tokens: usize) {
        self.values.reserve(tokens * self.hidden);
        self.token_ids.reserve(tokens);
        self.offsets.reserve(statements);
        self.statement_ids.reserve(statements);
    }

    /// Append one statement's token rows (`rows.len() == ids.len() * hidden`).
    pub fn push(&mut self, statement_id: &str, token_ids: &[u32], rows: &[f32]) {
        assert_eq!(
            rows.len(),
            token_ids.len() * self.hidden,
            "rows must be tokens × hidden"
        );
        self.values.extend_from_slice(rows);
        self.token_ids.extend_from_slice(token_ids);
        self.offsets.push(self.token_ids.len());
        self.statement_ids.push(statement_id.to_string());
    }

    /// Token rows of statement `i`, as a `[n_i, hidden]` row-major slice.
    pub fn statement(&self, i: usize) -> &[f32] {
        &self.values[self.offsets[i] * self.hidden..self.offsets[i + 1] * self.hidden]
    }

    /// Number of token rows of statement `i` (panics when `i` is out of range).
    pub fn statement_len(&self, i: usize) -> usize {
        self.offsets[i + 1] - self.offsets[i]
    }

    /// The last token's row of statement `i`.
    pub fn last_token(&self, i: usize) -> &[f32] {
        let end = self.offsets[i + 1];
        &self.values[(end - 1) * self.hidden..end * self.hidden]
    }

    /// Position of a statement, or `None` when it is not held (a linear scan).
    pub fn index_of(&self, statement_id: &str) -> Option<usize> {
        self.statement_ids.iter().position(|s| s == statement_id)
    }

    /// The safetensors file (see the module docs), its content hash in the metadata; values
    /// in `precision`, except f16 falls back to f32 when a value is beyond f16's range.
    pub fn to_bytes(&self, precision: Precision) -> Vec<u8> {
        let precision = if precision == Precision::F16
            && self
                .values
                .iter()
                .any(|v| v.is_finite() && v.abs() > F16_MAX)
        {
            Precision::F32
        } else {
            precision
        };
        let (dtype, value_bytes) = match precision {
            Precision::F32 => (
                Dtype::F32,
                self.values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            ),
            Precision::F16 => (
                Dtype::F16,
                self.values
                    .iter()
                    .flat_map(|v| f32_to_f16_bits(*v).to_le_bytes())
                    .collect::<Vec<u8>>(),
            ),
        };
        let offsets: Vec<u8> = self
            .offsets
            .iter()
            .flat_map(|o| (*o as i64).to_le_bytes())
            .collect();
        let ids: Vec<u8> = self
            .token_ids
            .iter()
            .flat_map(|t| t.to_le_bytes())
            .collect();
        let tensors = [
            (
                "values",
                TensorView::new(dtype, vec![self.n_tokens(), self.hidden], &value_bytes).unwrap(),
            ),
            (
                "offsets",
                TensorView::new(Dtype::I64, vec![self.offsets.len()], &offsets).unwrap(),
            ),
            (
                "token_ids",
                TensorView::new(Dtype::U32, vec![self.token_ids.len()], &ids).unwrap(),
            ),
        ];
        let mut meta: HashMap<String, String> = self.metadata.clone().into_iter().collect();
        meta.insert(
            "statement_ids".into(),
            serde_json::to_string(&self.statement_ids).unwrap(),
        );
        meta.insert("hidden".into(), self.hidden.to_string());
        // The data section does not depend on the metadata, so its hash can be stored there.
        let unhashed = safetensors::serialize(tensors.clone(), Some(meta.clone()))
            .expect("in-memory safetensors serialization");
        let sorted: BTreeMap<String, String> = meta.clone().into_iter().collect();
        meta.insert(
            CONTENT_HASH.into(),
            format!(
                "{:016x}",
                content_hash(&unhashed, &sorted).expect("well-formed")
            ),
        );
        let mut bytes = safetensors::serialize(tensors, Some(meta))
            .expect("in-memory safetensors serialization");
        sort_header(&mut bytes);
        bytes
    }

    /// Writes [`Self::to_bytes`] to `path` atomically (parent folders created).
    pub fn write(&self, path: &Path, precision: Precision) -> Result<(), ActivationsError> {
        crate::artifact::write_atomic(path, &self.to_bytes(precision)).map_err(|source| {
            ActivationsError::Io {
                path: path.display().to_string(),
                source,
            }
        })
    }

    /// Reads a file written by [`Self::write`]: [`ActivationsError::Io`] when it cannot be
    /// read, [`ActivationsError::Corrupt`] when it fails [`Self::from_bytes`].
    pub fn read(path: &Path) -> Result<Self, ActivationsError> {
        let bytes = std::fs::read(path).map_err(|source| ActivationsError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_bytes(&bytes).map_err(|Malformed(reason)| ActivationsError::Corrupt {
            path: path.display().to_string(),
            reason,
        })
    }

    /// Parses a file written by [`Self::to_bytes`], checking its content hash.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Malformed> {
        Self::parse(bytes).map_err(Malformed)
    }

    fn parse(bytes: &[u8]) -> Result<Self, String> {
        let (_, header) = SafeTensors::read_metadata(bytes).map_err(|e| e.to_string())?;
        let tensors = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let mut metadata: BTreeMap<String, String> = header
            .metadata()
            .clone()
            .map(|m| m.into_iter().collect())
            .unwrap_or_default();
        let stored = metadata
            .remove(CONTENT_HASH)
            .ok_or(format!("metadata lacks `{CONTENT_HASH}`"))?;
        let actual = format!("{:016x}", content_hash(bytes, &metadata)?);
        if stored != actual {
            return Err(format!(
                "content hash mismatch (stored {stored}, computed {actual})"
            ));
        }
        let statement_ids: Vec<String> = serde_json::from_str(
            &metadata
                .remove("statement_ids")
                .ok_or("metadata lacks `statement_ids`")?,
        )
        .map_err(|e| format!("metadata `statement_ids`: {e}"))?;
        metadata.remove("hidden");
        let values = tensors
            .tensor("values")
            .map_err(|e| format!("tensor `values`: {e}"))?;
        let shape = values.shape();
        if shape.len() != 2 {
            return Err(format!(
                "tensor `values` must be 2-D, found shape {shape:?}"
            ));
        }
        let hidden = shape[1];
        let values: Vec<f32> = match values.dtype() {
            Dtype::F32 => values
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Dtype::F16 => values
                .data()
                .chunks_exact(2)
                .map(|c| f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
            other => {
                return Err(format!(
                    "tensor `values` has dtype {other:?}, expected F16 or F32"
                ));
            }
        };
        let offsets_t = tensors
            .tensor("offsets")
            .map_err(|e| format!("tensor `offsets`: {e}"))?;
        if offsets_t.dtype() != Dtype::I64 {
            return Err("tensor `offsets` must be I64".into());
        }
        let offsets: Vec<usize> = offsets_t
            .data()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as usize)
            .collect();
        let ids_t = tensors
            .tensor("token_ids")
            .map_err(|e| format!("tensor `token_ids`: {e}"))?;
        if ids_t.dtype() != Dtype::U32 {
            return Err("tensor `token_ids` must be U32".into());
        }
        let token_ids: Vec<u32> = ids_t
            .data()
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let n_tokens = shape[0];
        let consistent = offsets.first() == Some(&0)
            && offsets.last() == Some(&n_tokens)
            && offsets.windows(2).all(|w| w[0] <= w[1])
            && offsets.len() == statement_ids.len() + 1
            && token_ids.len() == n_tokens;
        if !consistent {
            return Err(format!(
                "inconsistent ragged layout: {} statement ids, {} offsets, {} token ids, {} rows",
                statement_ids.len(),
                offsets.len(),
                token_ids.len(),
                n_tokens
            ));
        }
        // An imported file (or one written outside pstat) can hold a valid hash over NaN: a
        // non-finite activation would score as a silent NaN, so the file is refused.
        if let Some(at) = values.iter().position(|v| !v.is_finite()) {
            let row = at / hidden.max(1);
            let statement = offsets.partition_point(|&o| o <= row).saturating_sub(1);
            return Err(format!(
                "value {} at token row {row}, column {} (statement `{}`): activations must be finite",
                values[at],
                at % hidden.max(1),
                statement_ids[statement]
            ));
        }
        Ok(Activations {
            hidden,
            values,
            offsets,
            token_ids,
            statement_ids,
            metadata,
        })
    }
}

/// xxh3-64 of the data section of a safetensors file (everything after the 8-byte length and
/// the JSON header) followed by its metadata entries in key order (the statement ids live
/// there), the content hash itself left out.
pub fn content_hash(bytes: &[u8], metadata: &BTreeMap<String, String>) -> Result<u64, String> {
    let header_len = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
        .ok_or("shorter than a safetensors header")?;
    let data = usize::try_from(header_len)
        .ok()
        .and_then(|n| n.checked_add(8))
        .and_then(|start| bytes.get(start..))
        .ok_or("header length beyond the end of the file")?;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(data);
    for (key, value) in metadata.iter().filter(|(k, _)| *k != CONTENT_HASH) {
        hasher.update(key.as_bytes());
        hasher.update(&[0]);
        hasher.update(value.as_bytes());
        hasher.update(&[0]);
    }
    Ok(hasher.digest())
}

/// Rewrites a safetensors header in place with every object's keys sorted: the writer lays its
/// metadata out in a `HashMap`'s order, which changes from one map to the next, and a file pstat
/// writes (activations, probes) must have the same bytes in every run. The keys and values are
/// the same, so the header keeps its length and the data section does not move.
pub fn sort_header(bytes: &mut [u8]) {
    fn sorted(value: serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::Object(map) => {
                let mut entries: Vec<(String, serde_json::Value)> = map.into_iter().collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                serde_json::Value::Object(
                    entries.into_iter().map(|(k, v)| (k, sorted(v))).collect(),
                )
            }
            other => other,
        }
    }
    let len = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + len]).expect("safetensors writes UTF-8");
    let written = header.trim_end().len();
    let value: serde_json::Value =
        serde_json::from_str(&header[..written]).expect("safetensors writes JSON");
    let text = serde_json::to_string(&sorted(value)).expect("JSON serializes");
    // Compact JSON of the same keys and values: the same length, in another order.
    assert_eq!(text.len(), written, "a sorted header keeps its length");
    bytes[8..8 + written].copy_from_slice(text.as_bytes());
}

/// Moves a corrupt file aside ([`crate::artifact::move_aside`]).
pub fn move_aside(path: &Path) -> Result<PathBuf, ActivationsError> {
    crate::artifact::move_aside(path).map_err(|source| ActivationsError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// IEEE 754 binary16 conversion, round-to-nearest-even (what numpy's astype(float16) does).
pub fn f32_to_f16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let mant = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = mant | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let halfway = 1 << (shift - 1);
        let round = rem > halfway || (rem == halfway && (half & 1) == 1);
        return sign | (half + round as u32) as u16;
    }
    let half = ((e as u32) << 10) | (mant >> 13);
    let rem = mant & 0x1fff;
    let round = rem > 0x1000 || (rem == 0x1000 && (half & 1) == 1);
    sign | (half + round as u32) as u16
}

/// The f32 value of IEEE 754 half-precision bits (exact: subnormals, infinities and NaN
/// included).
pub fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let mant = (h & 0x3ff) as u32;
    let bits = match (exp, mant) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: normalise.
            let shift = m.leading_zeros() - 21;
            let m = (m << shift) & 0x3ff;
            sign | ((127 - 15 + 1 - shift) << 23) | (m << 13)
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_activations_give_the_same_bytes() {
        let mut acts = Activations::new(2);
        acts.push("s1", &[1, 2], &[0.5, -1.0, 2.0, 0.25]);
        for key in [
            "model_sha256",
            "input",
            "data_hash",
            "layer",
            "domain",
            "origin",
        ] {
            acts.metadata
                .insert(key.to_string(), format!("{key} value"));
        }
        let first = acts.to_bytes(Precision::F16);
        // Each serialization builds its own map: before the header was sorted, their orders
        // differed in most of these.
        for _ in 0..16 {
            assert_eq!(acts.to_bytes(Precision::F16), first);
        }
        assert_eq!(
            Activations::from_bytes(&first).unwrap().statement_ids,
            ["s1"]
        );
    }

    #[test]
    fn f16_round_trip_matches_known_values() {
        for (x, bits) in [
            (1.0f32, 0x3c00u16),
            (-2.0, 0xc000),
            (65504.0, 0x7bff),
            (6.1035156e-5, 0x0400),
            (5.9604645e-8, 0x0001),
            (0.0, 0),
        ] {
            assert_eq!(f32_to_f16_bits(x), bits, "{x}");
            assert_eq!(f16_bits_to_f32(bits), x);
        }
        assert_eq!(f32_to_f16_bits(1e6), 0x7c00);
        let x = 0.333_333_3f32;
        assert!((f16_bits_to_f32(f32_to_f16_bits(x)) - x).abs() < 1e-3);
    }

    #[test]
    fn ragged_round_trip() {
        let mut a = Activations::new(2);
        a.push("s:0", &[1, 2, 3], &[0.5, 1.0, 1.5, 2.0, 2.5, 3.0]);
        a.push("s:1", &[4], &[-1.0, 1.0]);
        a.metadata.insert("layer".into(), "3".into());
        let back = Activations::from_bytes(&a.to_bytes(Precision::F32)).unwrap();
        assert_eq!(back, a);
        assert_eq!(back.last_token(0), &[2.5, 3.0]);
        let half = Activations::from_bytes(&a.to_bytes(Precision::F16)).unwrap();
        assert_eq!(half.values, a.values);
    }

    #[test]
    fn values_beyond_f16_range_are_kept_in_f32() {
        let mut a = Activations::new(2);
        a.push("s:0", &[2, 5], &[-1.2e5, 0.1, 3.0, 70000.5]);
        let back = Activations::from_bytes(&a.to_bytes(Precision::F16)).unwrap();
        assert_eq!(back.values, a.values, "no infinities, no rounding");
    }

    fn written(dir: &Path) -> (Activations, PathBuf) {
        let mut a = Activations::new(4);
        for i in 0..20u32 {
            let rows: Vec<f32> = (0..8).map(|k| (i * 8 + k) as f32 * 0.25).collect();
            a.push(&format!("s:{i}"), &[i, i + 1], &rows);
        }
        let path = dir.join("layer_3.safetensors");
        a.write(&path, Precision::F32).unwrap();
        assert_eq!(Activations::read(&path).unwrap(), a);
        (a, path)
    }

    fn assert_corrupt_and_moved_aside(path: &Path) {
        let err = Activations::read(path).unwrap_err();
        let ActivationsError::Corrupt { path: named, .. } = &err else {
            panic!("expected Corrupt, got {err}");
        };
        assert_eq!(named, &path.display().to_string());
        let aside = move_aside(path).unwrap();
        assert!(!path.exists());
        assert_eq!(aside.file_name().unwrap(), "layer_3.safetensors.corrupt");
        assert!(aside.exists());
    }

    #[test]
    fn a_zeroed_region_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (_, path) = written(dir.path());
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 200..n - 100].fill(0);
        std::fs::write(&path, &bytes).unwrap();
        assert_corrupt_and_moved_aside(&path);
    }

    #[test]
    fn a_changed_statement_id_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (_, path) = written(dir.path());
        let bytes = std::fs::read(&path).unwrap();
        // `s:12` becomes `s:19` in the header: same size, still valid, another statement.
        let at = bytes
            .windows(5)
            .position(|w| w == b"s:12\\")
            .unwrap_or_else(|| {
                bytes
                    .windows(5)
                    .position(|w| w == b"\"s:12")
                    .expect("the id is in the header")
                    + 1
            });
        let mut garbled = bytes.clone();
        garbled[at + 3] = b'9';
        std::fs::write(&path, &garbled).unwrap();
        assert_corrupt_and_moved_aside(&path);
    }

    #[test]
    fn a_truncated_file_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (_, path) = written(dir.path());
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        assert_corrupt_and_moved_aside(&path);
    }

    #[test]
    fn a_non_finite_value_under_a_valid_hash_is_corrupt_naming_the_statement() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Activations::new(2);
        a.push("s:0", &[1], &[0.5, 1.0]);
        a.push("s:1", &[2, 3], &[0.5, 1.0, f32::NAN, 2.0]);
        let path = dir.path().join("layer_3.safetensors");
        a.write(&path, Precision::F32).unwrap();
        let err = Activations::read(&path).unwrap_err().to_string();
        assert!(err.contains("s:1") && err.contains("finite"), "{err}");
        assert_corrupt_and_moved_aside(&path);
    }

    #[test]
    fn a_file_without_content_hash_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (a, path) = written(dir.path());
        // Re-serialize the same tensors without the hash.
        let bytes = a.to_bytes(Precision::F32);
        let back = SafeTensors::deserialize(&bytes).unwrap();
        let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
        let mut meta = meta.metadata().clone().unwrap();
        meta.remove(CONTENT_HASH);
        let plain = safetensors::serialize(back.tensors(), Some(meta)).unwrap();
        std::fs::write(&path, plain).unwrap();
        assert_corrupt_and_moved_aside(&path);
    }
}
