//! `pstat activations export`: the activation folder of a run config (docs/activations.md),
//! to copy to another run or to fill on another machine (tools/extract/hf_extract.py) and read
//! back with `representational.activations` and `contextual.activations`.

use crate::activations::{Provenance, cached_activations, cell_dir, layer_path, run_statements};
use crate::config::RunConfig;
use crate::contextual::Contextual;
use crate::model::LoadedModel;
use crate::progress::Progress;
use crate::stage::{Cell, Stage};
use crate::study::Study;
use anyhow::bail;
use pstat_data::Domain;
use pstat_data::activations::Precision;
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One line of `statements.jsonl`.
#[derive(Serialize)]
struct StatementLine<'a> {
    id: &'a str,
    text: &'a str,
    token_ids: &'a [u32],
}

/// `export.json`: what the files of a cell must match, and which layers the run reads.
#[derive(Serialize)]
struct ExportRecord<'a> {
    model: &'a str,
    domain: Domain,
    #[serde(flatten)]
    provenance: &'a Provenance,
    hidden: usize,
    n_layers: usize,
    layers: &'a [usize],
    statements: usize,
}

/// Writes the activation folder of `config` into `out`: for every model and domain the
/// statements it reads with their token ids, `export.json`, and (unless `statements_only`)
/// the layer files, taken from the cache or extracted into it. The layers are the veracity
/// layer (fixed in the config, else the paper's) with the probes' offsets, or every layer
/// when the veracity layer is chosen by the run. Where the config runs the contextual stage,
/// every context of a cell is written too (`contextual/<context>/`: `context.json` and the
/// held-out statements' layer files after it). Returns the cell folders written.
pub fn activations(
    config: RunConfig,
    out: &Path,
    statements_only: bool,
    progress: &mut dyn Progress,
) -> anyhow::Result<Vec<PathBuf>> {
    config.validate()?;
    for (key, set) in [
        (
            "representational",
            config.representational.activations.is_some(),
        ),
        ("contextual", config.contextual.activations.is_some()),
    ] {
        if set {
            bail!(
                "{key}.activations is set: the export computes activations, leave it out of the config"
            );
        }
    }
    // The split is the run's (same config, same split), built in memory: nothing is written
    // beside the export.
    let study = Study::preview(config, out)?;
    let mut written = Vec::new();
    for name in &study.config.models {
        let model = LoadedModel::load(name, study.config.precision)?;
        for &domain in &study.config.domains {
            let layers = export_layers(&study, &model, domain)?;
            let data = study.data(domain);
            let ids = run_statements(&study, domain);
            let tokens = model.encode_statements(data, &ids)?;
            let provenance = Provenance::of(&model, data);
            let cell = cell_dir(out, &model.name, domain);
            let text = data.texts();
            let lines: Vec<StatementLine> = ids
                .iter()
                .zip(&tokens)
                .map(|(id, token_ids)| StatementLine {
                    id,
                    text: text[id.as_str()],
                    token_ids,
                })
                .collect();
            crate::io::write_jsonl(&cell.join("statements.jsonl"), &lines)?;
            crate::io::write_json(
                &cell.join("export.json"),
                &ExportRecord {
                    model: &model.name,
                    domain,
                    provenance: &provenance,
                    hidden: model.lm.hidden_size(),
                    n_layers: model.lm.n_layers(),
                    layers: &layers,
                    statements: ids.len(),
                },
            )?;
            if !statements_only {
                progress.stage(&format!("{} {domain}: activations", model.name));
                let acts = cached_activations(&model, data, &ids, &layers, progress)?;
                for (layer, a) in acts {
                    a.write(&layer_path(&cell, layer), Precision::F16)?;
                }
            }
            if Contextual.enabled(&study.config) {
                progress.stage(&format!("{} {domain}: contexts", model.name));
                let run_cell = Cell {
                    study: &study,
                    model: &model,
                    domain,
                };
                crate::contextual::export(&run_cell, out, &layers, statements_only, progress)?;
            }
            written.push(cell);
        }
    }
    Ok(written)
}

/// The layers a run of `study` reads for (`model`, `domain`) when its veracity layer is known
/// before the run (fixed in the config, or the paper's), else every layer.
fn export_layers(study: &Study, model: &LoadedModel, domain: Domain) -> anyhow::Result<Vec<usize>> {
    let cfg = &study.config.representational;
    let n = model.lm.n_layers();
    let Some(veracity) = cfg
        .veracity_layer
        .or_else(|| pstat_lm::paper::paper_layer(&model.lm, domain))
    else {
        return Ok((1..=n).collect());
    };
    let mut layers = BTreeSet::from([veracity]);
    for &probe in &cfg.probes {
        let window = cfg.window(probe, veracity, n, &model.name)?;
        layers.extend(window.all());
    }
    Ok(layers.into_iter().collect())
}
