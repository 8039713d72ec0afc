//! Where a run's activations come from: the cache under `$PSTAT_HOME/activations` (extracted
//! by the embedded runtime on a miss), or a folder of activations computed elsewhere
//! (`representational.activations`), checked against the run before any probe sees them.
//! [`crate::export`] writes that folder's layout from a run config (docs/activations.md).
//!
//! An activation folder holds, per model and domain, `<model>/<domain>/`:
//! - `layer_LL.safetensors`: the ragged per-token activations of one layer
//!   ([`pstat_data::activations`]) with the provenance metadata [`Provenance`] lists;
//! - `statements.jsonl`: the statements in the run's order, `{"id", "text", "token_ids"}`, the
//!   token ids being those pstat feeds (what an outside extractor must feed too);
//! - `export.json`: the [`Provenance`] and the layers the run reads;
//! - `contextual/<context>/`: the held-out statements after each belief context, for the
//!   contextual stage (`context.json` and layer files; [`crate::contextual`]).

use crate::lock::WorkLock;
use crate::model::LoadedModel;
use crate::progress::Progress;
use crate::study::Study;
use anyhow::bail;
use pstat_data::activations::{Activations, ActivationsError, Precision, move_aside};
use pstat_data::artifact::sha256_hex;
use pstat_data::error::Malformed;
use pstat_data::{Dataset, Domain};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Activations of the statements a run probes (its training statements and held-out True
/// statements) at `layers`: from `representational.activations` when the config names a
/// folder, else from the cache.
pub(crate) fn extract_layers(
    study: &Study,
    model: &LoadedModel,
    domain: Domain,
    layers: &[usize],
    progress: &mut dyn Progress,
) -> anyhow::Result<BTreeMap<usize, Activations>> {
    let ids = run_statements(study, domain);
    match &study.config.representational.activations {
        Some(dir) => imported_activations(Path::new(dir), model, study.data(domain), &ids, layers),
        None => cached_activations(model, study.data(domain), &ids, layers, progress),
    }
}

/// The statements whose activations a run reads, in the order it reads them.
pub(crate) fn run_statements(study: &Study, domain: Domain) -> Vec<String> {
    let mut ids = study.train_ids(domain);
    ids.extend(study.held_out_true(domain));
    ids
}

/// Statements per block of an extraction (at least; a block ends on a batch boundary): about
/// 10–20 s of SmolLM2-135M or Gemma 3 270M on two cores, the most an interrupted extraction
/// has to redo.
pub const BLOCK_STATEMENTS: usize = 768;

/// Activations of `ids` at `layers`, from the cache under `$PSTAT_HOME/activations` when
/// present, else extracted and stored (f16). The cache key covers the model file, the input
/// format and template, the data and the ids, so nothing stale is ever reused. Either way the
/// caller gets what the cache returns (a fresh extraction is read back from its file), so a
/// run resumed after the cache was written trains on the same numbers as one that was not.
/// An extraction resumes where it was interrupted, to the block of [`BLOCK_STATEMENTS`].
pub fn cached_activations(
    model: &LoadedModel,
    data: &Dataset,
    ids: &[String],
    layers: &[usize],
    progress: &mut dyn Progress,
) -> anyhow::Result<BTreeMap<usize, Activations>> {
    cached_activations_in_blocks(model, data, ids, layers, BLOCK_STATEMENTS, progress)
}

/// [`cached_activations`] extracting in blocks of at least `block` statements: each finished
/// block is stored in the cache entry's folder (one f32 file per layer, with its content hash)
/// and read back instead of recomputed when an interrupted extraction is run again. The blocks
/// are whole batches of one pass ([`pstat_lm::extract::blocks`]), so the layer files are
/// byte-identical whatever the block size and however often the extraction was interrupted.
pub fn cached_activations_in_blocks(
    model: &LoadedModel,
    data: &Dataset,
    ids: &[String],
    layers: &[usize],
    block: usize,
    progress: &mut dyn Progress,
) -> anyhow::Result<BTreeMap<usize, Activations>> {
    check_layers(model, layers)?;
    let domain = data.domain;
    // The leading tag versions the cache layout: v2 stopped writing f16 infinities, v3 files
    // carry a content hash checked on every read, v4's hash covers the metadata (statement ids).
    let key_input = format!(
        "activations-v4\n{}\n{}\n{}\n{}",
        model.lm.sha256(),
        model.input_signature(),
        data.data_hash,
        ids.join("\n")
    );
    let dir = cache_dir()?
        .join(&model.lm.sha256()[..16])
        .join(domain.as_str())
        .join(&sha256_hex(key_input.as_bytes())[..16]);
    let path = |l: usize| layer_path(&dir, l);
    // Processes sharing the cache (shards of a run on one machine or one shared filesystem)
    // extract an entry once: the others wait here and then read it.
    let _lock = WorkLock::wait(&dir.join(".lock"))?;
    let mut out = BTreeMap::new();
    let mut missing = Vec::new();
    for &l in layers {
        if !path(l).exists() {
            missing.push(l);
            continue;
        }
        // A damaged cache file is never used: it is moved aside and its layer recomputed.
        match Activations::read(&path(l)) {
            Ok(a) => {
                out.insert(l, a);
            }
            Err(err @ ActivationsError::Corrupt { .. }) => {
                let aside = move_aside(&path(l))?;
                progress.note(&format!(
                    "warning: {err}; moved to {} and recomputed",
                    aside.display()
                ));
                missing.push(l);
            }
            Err(err) => return Err(err.into()),
        }
    }
    tracing::debug!(
        "activations of {} {domain}: layers {layers:?}, {} in the cache at {}",
        model.name,
        layers.len() - missing.len(),
        dir.display()
    );
    if missing.is_empty() {
        return Ok(out);
    }
    let tokens = model.encode_statements(data, ids)?;
    let provenance = Provenance::of(model, data);
    let blocks = pstat_lm::extract::blocks(&tokens, block);
    let job = BlockJob {
        model,
        dir: &dir,
        ids,
        tokens: &tokens,
        layers: &missing,
        provenance: &provenance,
    };
    let label = format!("{} {domain} activations", model.name);
    let acts = job.run(&blocks, &label, progress)?;
    // One worker per layer file: converting, hashing and writing hundreds of megabytes.
    let stored: Vec<(usize, Activations)> = missing
        .par_iter()
        .zip(acts)
        .map(|(&layer, mut a)| -> anyhow::Result<(usize, Activations)> {
            provenance.stamp(&mut a, layer);
            a.write(&path(layer), Precision::F16)?;
            // Every use sees what the cache holds (f16, checked against its hash on the
            // read), so a run that extracts a layer and one that resumes from the cache
            // compute the same.
            Ok((layer, Activations::read(&path(layer))?))
        })
        .collect::<anyhow::Result<_>>()?;
    out.extend(stored);
    // The layer files now hold every block: the partial files are no longer needed.
    for range in &blocks {
        for &layer in &missing {
            let part = job.partial_path(layer, range);
            match std::fs::remove_file(&part) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    bail!("{}: {e}", part.display())
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

/// One extraction of `layers` of `ids` into the cache entry `dir`, block by block.
struct BlockJob<'a> {
    model: &'a LoadedModel,
    dir: &'a Path,
    ids: &'a [String],
    tokens: &'a [Vec<u32>],
    layers: &'a [usize],
    provenance: &'a Provenance,
}

impl BlockJob<'_> {
    /// The partial file of `layer` for the statements `range`.
    fn partial_path(&self, layer: usize, range: &Range<usize>) -> PathBuf {
        self.dir.join(format!(
            "partial_{:06}-{:06}_layer_{layer:02}.safetensors",
            range.start, range.end
        ))
    }

    /// Every layer, whole: the finished blocks read from their partial files, the others
    /// extracted and stored as they finish.
    fn run(
        &self,
        blocks: &[Range<usize>],
        label: &str,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<Vec<Activations>> {
        let mut parts = Vec::with_capacity(blocks.len());
        for range in blocks {
            parts.push(self.read_block(range, progress)?);
        }
        let finished: usize = blocks
            .iter()
            .zip(&parts)
            .filter(|(_, p)| p.is_some())
            .map(|(r, _)| r.len())
            .sum();
        progress.start(label, self.ids.len());
        if finished > 0 {
            progress.note(&format!(
                "{label}: resuming, {finished} of {} statements already extracted",
                self.ids.len()
            ));
            progress.advance(finished);
        }
        let mut extractor = None;
        for (range, part) in blocks.iter().zip(&mut parts) {
            if part.is_some() {
                continue;
            }
            let extractor = match &mut extractor {
                Some(e) => e,
                None => extractor.insert(pstat_lm::extract::Extractor::new(
                    &self.model.lm,
                    self.ids,
                    self.tokens,
                    self.layers,
                )?),
            };
            let mut acts = extractor.block(range.clone(), |n| progress.advance(n))?;
            self.layers
                .par_iter()
                .zip(&mut acts)
                .try_for_each(|(&layer, a)| {
                    self.provenance.stamp(a, layer);
                    // f32: exact, so the layer files assembled from blocks hold what one pass
                    // would have written.
                    a.write(&self.partial_path(layer, range), Precision::F32)
                })?;
            *part = Some(acts);
        }
        progress.finish(false);
        let hidden = self.model.lm.hidden_size();
        let parts: Vec<Vec<Activations>> = parts.into_iter().flatten().collect();
        // Each layer is assembled from its blocks by a worker of its own.
        let whole: Vec<Activations> = (0..self.layers.len())
            .into_par_iter()
            .map(|layer| {
                let mut w = Activations::new(hidden);
                let blocks = parts.iter().map(|part| &part[layer]);
                w.reserve(
                    blocks.clone().map(Activations::len).sum(),
                    blocks.clone().map(Activations::n_tokens).sum(),
                );
                for p in blocks {
                    for i in 0..p.len() {
                        let tokens = &p.token_ids[p.offsets[i]..p.offsets[i + 1]];
                        w.push(&p.statement_ids[i], tokens, p.statement(i));
                    }
                }
                w
            })
            .collect();
        Ok(whole)
    }

    /// The block `range` from its partial files, or `None` when a layer's is missing or
    /// damaged (a damaged one is moved aside: it is recomputed, never used).
    fn read_block(
        &self,
        range: &Range<usize>,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<Option<Vec<Activations>>> {
        let mut out = Vec::with_capacity(self.layers.len());
        for &layer in self.layers {
            let path = self.partial_path(layer, range);
            if !path.exists() {
                return Ok(None);
            }
            let reason = match Activations::read(&path) {
                Ok(a)
                    if a.hidden == self.model.lm.hidden_size()
                        && a.statement_ids[..] == self.ids[range.clone()] =>
                {
                    out.push(a);
                    continue;
                }
                Ok(_) => format!(
                    "{}: not the statements {}..{} of this extraction",
                    path.display(),
                    range.start,
                    range.end
                ),
                Err(err @ ActivationsError::Corrupt { .. }) => err.to_string(),
                Err(err) => return Err(err.into()),
            };
            let aside = move_aside(&path)?;
            progress.note(&format!(
                "warning: {reason}; moved to {} and recomputed",
                aside.display()
            ));
            return Ok(None);
        }
        Ok(Some(out))
    }
}

fn check_layers(model: &LoadedModel, layers: &[usize]) -> anyhow::Result<()> {
    if let Some(&l) = layers.iter().find(|&&l| l > model.lm.n_layers()) {
        bail!(
            "layer {l} is beyond the {} layers of {}",
            model.lm.n_layers(),
            model.name
        );
    }
    Ok(())
}

/// `$PSTAT_HOME/activations`, beside the model cache (`$PSTAT_HOME/models`).
fn cache_dir() -> anyhow::Result<PathBuf> {
    let models = pstat_lm::registry::Cache::from_env()?;
    Ok(models
        .dir()
        .parent()
        .unwrap_or(models.dir())
        .join("activations"))
}

/// `layer_LL.safetensors` in `dir` (the cache's and an activation folder's name alike).
pub(crate) fn layer_path(dir: &Path, layer: usize) -> PathBuf {
    dir.join(format!("layer_{layer:02}.safetensors"))
}

/// `<dir>/<model>/<domain>`: one cell of an activation folder.
pub fn cell_dir(dir: &Path, model: &str, domain: Domain) -> PathBuf {
    dir.join(model).join(domain.as_str())
}

/// What an activation file must have been computed from, stored in its safetensors metadata
/// (and in an export's `export.json`); an imported file that disagrees on any field is refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// sha256 of the model file pstat runs (the GGUF, or a Hugging Face folder's weights).
    pub model_sha256: String,
    /// How a statement is fed ([`LoadedModel::input_signature`]): plain, or chat with the
    /// template's hash.
    pub input: String,
    /// sha256 of the domain's data files.
    pub data_hash: String,
}

impl Provenance {
    /// The provenance of activations of `model` on `data`.
    pub fn of(model: &LoadedModel, data: &Dataset) -> Self {
        Provenance {
            model_sha256: model.lm.sha256().to_string(),
            input: model.input_signature(),
            data_hash: data.data_hash.clone(),
        }
    }

    fn fields(&self) -> [(&'static str, &str); 3] {
        [
            ("model_sha256", &self.model_sha256),
            ("input", &self.input),
            ("data_hash", &self.data_hash),
        ]
    }

    /// Writes the provenance and `layer` into the metadata of `acts`.
    pub(crate) fn stamp(&self, acts: &mut Activations, layer: usize) {
        for (key, value) in self.fields() {
            acts.metadata.insert(key.into(), value.into());
        }
        acts.metadata.insert("layer".into(), layer.to_string());
    }
}

/// Activations of `ids` at `layers` read from an activation folder computed elsewhere. Every
/// file is checked against the run (content hash, model, input format, data, layer, hidden
/// size, statement ids and every statement's token ids) and refused with its path and field;
/// an imported file is never moved or recomputed.
pub fn imported_activations(
    dir: &Path,
    model: &LoadedModel,
    data: &Dataset,
    ids: &[String],
    layers: &[usize],
) -> anyhow::Result<BTreeMap<usize, Activations>> {
    check_layers(model, layers)?;
    let cell = cell_dir(dir, &model.name, data.domain);
    let expected = Provenance::of(model, data);
    let tokens = model.encode_statements(data, ids)?;
    let mut out = BTreeMap::new();
    for &layer in layers {
        let path = layer_path(&cell, layer);
        let (acts, _) = read_imported(&path, || {
            format!(
                "representational.activations = {:?} has no layer {layer} of {} {}",
                dir.display().to_string(),
                model.name,
                data.domain
            )
        })?;
        check_import(
            &acts,
            &expected,
            layer,
            model.lm.hidden_size(),
            ids,
            &tokens,
        )
        .map_err(|e| anyhow::anyhow!("{}: refused: {e}", path.display()))?;
        out.insert(layer, acts);
    }
    Ok(out)
}

/// The imported activation file `path` and its bytes: refused, naming the file, when it is
/// missing (`lacking` says what the folder lacks) or is not a valid, undamaged activation file.
pub(crate) fn read_imported(
    path: &Path,
    lacking: impl FnOnce() -> String,
) -> anyhow::Result<(Activations, Vec<u8>)> {
    if !path.exists() {
        bail!(
            "{}: missing ({}; `pstat activations export` writes it)",
            path.display(),
            lacking()
        );
    }
    let bytes = std::fs::read(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let acts = Activations::from_bytes(&bytes).map_err(|Malformed(reason)| {
        anyhow::anyhow!(
            "{}: refused: not a valid activation file, or damaged ({reason})",
            path.display()
        )
    })?;
    Ok((acts, bytes))
}

/// Whether `acts` is the run's layer `layer`: the reason it is not, naming the field.
pub(crate) fn check_import(
    acts: &Activations,
    expected: &Provenance,
    layer: usize,
    hidden: usize,
    ids: &[String],
    tokens: &[Vec<u32>],
) -> Result<(), String> {
    let layer = layer.to_string();
    let mut fields = expected.fields().to_vec();
    fields.push(("layer", &layer));
    check_metadata(acts, &fields)?;
    if acts.hidden != hidden {
        return Err(format!(
            "`values` has {} columns, but the model's hidden size is {hidden}",
            acts.hidden
        ));
    }
    if acts.statement_ids.len() != ids.len() {
        return Err(format!(
            "`statement_ids` lists {} statements, but the run reads {}",
            acts.statement_ids.len(),
            ids.len()
        ));
    }
    if let Some((i, (found, want))) = acts
        .statement_ids
        .iter()
        .zip(ids)
        .enumerate()
        .find(|(_, (f, w))| f != w)
    {
        return Err(format!(
            "`statement_ids`[{i}] is {found:?}, but the run reads {want:?} there"
        ));
    }
    for (i, want) in tokens.iter().enumerate() {
        let found = &acts.token_ids[acts.offsets[i]..acts.offsets[i + 1]];
        if found.len() != want.len() {
            return Err(format!(
                "statement {:?} has {} tokens, but pstat feeds {} (`offsets`)",
                ids[i],
                found.len(),
                want.len()
            ));
        }
        if found != want.as_slice() {
            return Err(format!(
                "statement {:?}: `token_ids` differ from the ids pstat feeds",
                ids[i]
            ));
        }
    }
    Ok(())
}

/// Whether the metadata of `acts` holds every `(key, value)` of `fields`: the first that it
/// lacks or that differs, named.
pub(crate) fn check_metadata(acts: &Activations, fields: &[(&str, &str)]) -> Result<(), String> {
    for &(key, want) in fields {
        match acts.metadata.get(key) {
            None => return Err(format!("metadata lacks `{key}` (expected {want:?})")),
            Some(found) if found != want => {
                return Err(format!(
                    "metadata `{key}` is {found:?}, but the run has {want:?}"
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provenance() -> Provenance {
        Provenance {
            model_sha256: "ab".repeat(32),
            input: "plain: BOS + statement".into(),
            data_hash: "cd".repeat(32),
        }
    }

    /// Two statements of 2 and 3 tokens in 2 dimensions, stamped as layer 4.
    fn acts() -> Activations {
        let mut a = Activations::new(2);
        a.push("s1", &[1, 7], &[0.5, 1.0, 1.5, 2.0]);
        a.push("s2", &[1, 8, 9], &[0.0; 6]);
        provenance().stamp(&mut a, 4);
        a
    }

    #[test]
    fn an_import_that_disagrees_with_the_run_is_refused_naming_the_field() {
        let ids = ["s1".to_string(), "s2".to_string()];
        let tokens = [vec![1, 7], vec![1, 8, 9]];
        let check = |a: &Activations, layer: usize, hidden: usize, ids: &[String]| {
            check_import(a, &provenance(), layer, hidden, ids, &tokens)
        };
        check(&acts(), 4, 2, &ids).unwrap();

        let err = check(&acts(), 5, 2, &ids).unwrap_err();
        assert!(
            err.contains("`layer` is \"4\"") && err.contains("\"5\""),
            "{err}"
        );
        assert!(
            check(&acts(), 4, 3, &ids)
                .unwrap_err()
                .contains("hidden size is 3")
        );
        for key in ["model_sha256", "input", "data_hash"] {
            let mut a = acts();
            a.metadata.insert(key.into(), "other".into());
            let err = check(&a, 4, 2, &ids).unwrap_err();
            assert!(err.contains(&format!("`{key}` is \"other\"")), "{err}");
            a.metadata.remove(key);
            let err = check(&a, 4, 2, &ids).unwrap_err();
            assert!(err.contains(&format!("lacks `{key}`")), "{err}");
        }
        let swapped = ["s2".to_string(), "s1".to_string()];
        let err = check(&acts(), 4, 2, &swapped).unwrap_err();
        assert!(err.contains("`statement_ids`[0] is \"s1\""), "{err}");
        let err = check(&acts(), 4, 2, &ids[..1]).unwrap_err();
        assert!(
            err.contains("lists 2 statements, but the run reads 1"),
            "{err}"
        );

        let mut a = Activations::new(2);
        a.push("s1", &[1, 7, 7], &[0.0; 6]);
        a.push("s2", &[1, 8, 9], &[0.0; 6]);
        provenance().stamp(&mut a, 4);
        let err = check(&a, 4, 2, &ids).unwrap_err();
        assert!(
            err.contains("\"s1\" has 3 tokens, but pstat feeds 2"),
            "{err}"
        );
        let mut a = Activations::new(2);
        a.push("s1", &[1, 7], &[0.0; 4]);
        a.push("s2", &[1, 8, 10], &[0.0; 6]);
        provenance().stamp(&mut a, 4);
        let err = check(&a, 4, 2, &ids).unwrap_err();
        assert!(err.contains("\"s2\": `token_ids` differ"), "{err}");
    }
}
