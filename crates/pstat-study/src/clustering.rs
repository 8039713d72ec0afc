//! Retraction clustering per (model, domain) (Section 4.5, Appendix I): statements retracted
//! under at least one Θ by a main configuration (sAwMIL at the veracity layer; the prompt at
//! the main K, empty baseline and main format — no Mass-Mean, no robustness configuration),
//! represented by their standardized mean over the statement's own tokens (no BOS, no chat
//! template) at the veracity layer, clustered by PCA → UMAP → HDBSCAN with Algorithm 1's
//! selection; contrastive prompts per cluster (statements ranked by the number of
//! (instantiation, condition) pairs retracting them), optionally labelled by an
//! OpenAI-compatible chat endpoint.

use crate::config::RunConfig;
use crate::io::{read_record, write_json, write_manifest, write_record};
use crate::progress::Progress;
use crate::representational::veracity_activations;
use crate::stage::{Cell, CellPlan, Handoff, Retractions, Stage, Tables};
use crate::unit::{PlannedUnit, UnitKey, UnitKind, Work};
use anyhow::Context;
use pstat_cluster::{Grid, GridResult, Matrix, run_grid};
use pstat_contrast::labeler::Labeler;
use pstat_contrast::themes::LabeledCluster;
use pstat_contrast::{ClusterPrompt, PromptOptions, PromptPoint, build_prompts, prompts_markdown};
use pstat_data::Domain;
use pstat_data::activations::Activations;
use pstat_data::artifact::write_atomic;
use pstat_tables::{ClusterRow, ThemeRow};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Fewer retracted statements than this are not clustered (HDBSCAN needs a handful per cluster).
const MIN_POINTS: usize = 8;

/// A cell's clustering (`result.json`), stored as a record with its content hash: one garbled
/// on disk is moved aside and recomputed, never read as another clustering.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Stored {
    ids: Vec<String>,
    #[serde(flatten)]
    result: GridResult,
}

impl Stored {
    /// The stored clustering of exactly `ids`, if any: `None` when absent, made for other
    /// statements, or damaged (then moved aside to `result.json.corrupt` with a warning).
    fn read(
        path: &Path,
        ids: &[String],
        progress: &mut dyn Progress,
    ) -> anyhow::Result<Option<Self>> {
        Ok(read_record::<Stored>(path, progress)?.filter(|stored| stored.ids == ids))
    }
}

/// The clustering stage: the statements retracted in this cell, clustered at the veracity
/// layer (it needs the representational stage for the layer and its activations).
pub struct Clustering;

impl Stage for Clustering {
    fn name(&self) -> &'static str {
        "retraction clustering"
    }

    fn enabled(&self, config: &RunConfig) -> bool {
        config.clustering.enabled && config.representational.enabled
    }

    /// One unit: the grid over the cell's retracted statements.
    fn units(&self, plan: &CellPlan) -> Vec<PlannedUnit> {
        let dir = cell_dir(&plan.study.out, plan.model, plan.domain);
        let done = plan.reads_out()
            && ["result.json", "skipped.json"]
                .iter()
                .any(|f| dir.join(f).exists());
        vec![PlannedUnit::new(
            plan.key(UnitKind::Clustering),
            Work::Grid,
            done,
        )]
    }

    fn run(
        &self,
        cell: &Cell,
        handoff: &mut Handoff,
        tables: &mut Tables,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<()> {
        // It needs every retraction of the cell: it runs where the tables are assembled.
        if !cell.study.scope.assembles() {
            return Ok(());
        }
        let retractions = std::mem::take(&mut handoff.retractions);
        let (_, acts) = veracity_activations(cell, handoff, progress)?;
        let output = run(cell, &retractions, acts, progress)?;
        // Given back: the agreement between instantiations reads them after the stages.
        handoff.retractions = retractions;
        tables.clusters.extend(output.rows);
        tables.themes.extend(output.themes);
        tables.labeled.extend(output.labeled);
        Ok(())
    }
}

struct ClusterOutput {
    rows: Vec<ClusterRow>,
    themes: Vec<ThemeRow>,
    labeled: Vec<LabeledCluster>,
}

/// `<out>/clusters/<model>/<domain>`: where a cell's clustering is stored.
pub fn cell_dir(out: &Path, model: &str, domain: Domain) -> PathBuf {
    crate::layout::RunLayout::new(out).clusters(model, domain)
}

fn run(
    cell: &Cell,
    retractions: &Retractions,
    acts: &Activations,
    progress: &mut dyn Progress,
) -> anyhow::Result<ClusterOutput> {
    let Cell {
        study,
        model,
        domain,
    } = cell;
    let domain = *domain;
    let dir = cell_dir(&study.out, &model.name, domain);
    let held_out = study.held_out_true(domain);
    let own = own_token_spans(model, study.data(domain), acts, &held_out)?;
    let representation = standardized_means(acts, &held_out, &own)?;
    let retracted: Vec<String> = held_out
        .iter()
        .filter(|id| retractions.types.contains_key(*id))
        .cloned()
        .collect();
    let mut output = ClusterOutput {
        rows: Vec::new(),
        themes: Vec::new(),
        labeled: Vec::new(),
    };
    if retracted.len() < MIN_POINTS {
        write_json(
            &dir.join("skipped.json"),
            &serde_json::json!({"retracted": retracted.len(), "reason": format!("fewer than {MIN_POINTS} retracted statements")}),
        )?;
        return Ok(output);
    }
    let result_path = dir.join("result.json");
    let stored = match Stored::read(&result_path, &retracted, progress)? {
        Some(stored) => stored,
        None => {
            let dim = representation[&retracted[0]].len();
            let flat: Vec<f64> = retracted
                .iter()
                .flat_map(|id| representation[id].clone())
                .collect();
            let x = Matrix::new(retracted.len(), dim, flat)?;
            progress.unit(&UnitKey::new(&model.name, domain, UnitKind::Clustering));
            progress.start(&format!("{} {domain} clustering", model.name), 1);
            let result = run_grid(
                &x,
                &Grid::default(),
                study.seed_for(&format!("cluster:{}:{domain}", model.name)),
            );
            progress.advance(1);
            progress.finish(false);
            let stored = Stored {
                ids: retracted.clone(),
                result,
            };
            write_record(&result_path, &stored)?;
            write_manifest(
                &study
                    .manifest(format!("clusters {} {domain}", model.name), domain)
                    .with_model(model.lm.sha256(), &model.lm.kernel_isa()),
                &result_path,
            )?;
            stored
        }
    };
    let cluster_of: BTreeMap<&str, i32> = stored
        .ids
        .iter()
        .map(String::as_str)
        .zip(stored.result.labels.iter().copied())
        .collect();
    output.rows = cluster_rows(&model.name, domain, &stored, retractions);
    let text = study.data(domain).texts();
    let points: Vec<PromptPoint> = held_out
        .iter()
        .map(|id| {
            let types = retractions.types.get(id);
            PromptPoint {
                id: id.clone(),
                text: text[id.as_str()].to_string(),
                retraction_count: types.map_or(0, |t| t.len()),
                retraction_types: types.map_or_else(Vec::new, |t| t.iter().cloned().collect()),
                believed_at_baseline: retractions.believed_at_baseline.contains(id),
                cluster: cluster_of.get(id.as_str()).copied().filter(|c| *c >= 0),
                representation: representation[id].clone(),
            }
        })
        .collect();
    let prompts = build_prompts(
        domain.as_str(),
        &model.name,
        &points,
        &PromptOptions::default(),
    )?;
    write_json(&dir.join("prompts.json"), &prompts)?;
    let markdown = dir.join("prompts.md");
    write_atomic(&markdown, prompts_markdown(&prompts).as_bytes())
        .with_context(|| format!("writing {}", markdown.display()))?;
    if let Some(url) = &study.config.clustering.labeler {
        label(cell, url, &prompts, &mut output, progress)?;
    }
    Ok(output)
}

fn label(
    cell: &Cell,
    url: &str,
    prompts: &[ClusterPrompt],
    output: &mut ClusterOutput,
    progress: &mut dyn Progress,
) -> anyhow::Result<()> {
    let Cell {
        study,
        model,
        domain,
    } = cell;
    let dir = cell_dir(&study.out, &model.name, *domain);
    let labeler = Labeler::from_config(&pstat_contrast::labeler::LabelerConfig {
        url: url.to_string(),
        http: study.config.clustering.http.clone(),
        ..Default::default()
    })?;
    for prompt in prompts {
        let path = dir.join(format!("label_{}.json", prompt.cluster_id));
        // Also a record: a garbled label is asked for again rather than reported.
        let outcome = match read_record(&path, progress)? {
            Some(label) => label,
            None => {
                let outcome = labeler.label(&prompt.prompt)?.label;
                write_record(&path, &outcome)?;
                outcome
            }
        };
        output.themes.push(ThemeRow {
            model: model.name.clone(),
            domain: domain.to_string(),
            cluster: prompt.cluster_id,
            cluster_label: outcome.cluster_label.clone(),
            shared_cluster_pattern: outcome.shared_cluster_pattern.clone(),
            retraction_hypothesis: outcome.retraction_hypothesis.clone(),
        });
        output.labeled.push(LabeledCluster {
            model: model.name.clone(),
            domain: domain.to_string(),
            cluster_id: prompt.cluster_id,
            n_retracted: prompt.n_retracted,
            label: outcome,
        });
    }
    Ok(())
}

/// One `clusters.csv` row per clustered statement, with the (instantiation, condition) pairs
/// that retracted it.
fn cluster_rows(
    model: &str,
    domain: Domain,
    stored: &Stored,
    retractions: &Retractions,
) -> Vec<ClusterRow> {
    stored
        .ids
        .iter()
        .zip(&stored.result.labels)
        .map(|(id, c)| {
            let by: Vec<&str> = retractions
                .types
                .get(id)
                .map_or_else(Vec::new, |t| t.iter().map(String::as_str).collect());
            ClusterRow {
                model: model.to_string(),
                domain: domain.to_string(),
                statement_id: id.clone(),
                cluster: *c,
                retraction_count: by.len(),
                retracted_by: by.join(";"),
            }
        })
        .collect()
}

/// Per statement id, the rows of its activations that come from the statement's own text
/// (no BOS, no chat-template tokens): the model's input for it is encoded again, checked
/// against the tokens the activations were read at, and the statement's span taken from it.
fn own_token_spans(
    model: &crate::model::LoadedModel,
    data: &pstat_data::Dataset,
    acts: &Activations,
    ids: &[String],
) -> anyhow::Result<BTreeMap<String, std::ops::Range<usize>>> {
    let text = data.texts();
    let mut spans = BTreeMap::new();
    for id in ids {
        let i = acts
            .index_of(id)
            .ok_or_else(|| anyhow::anyhow!("no activations for `{id}`"))?;
        let statement = text
            .get(id.as_str())
            .ok_or_else(|| anyhow::anyhow!("statement `{id}` is not in {}", data.domain))?;
        let (tokens, span) = model.encoder.encode_with_statement_span(statement)?;
        let fed = &acts.token_ids[acts.offsets[i]..acts.offsets[i + 1]];
        if tokens != fed || span.is_empty() {
            anyhow::bail!(
                "{}: the activations of `{id}` were read at other tokens than the model's input \
                 for it, so the statement's own tokens cannot be told apart",
                model.name
            );
        }
        spans.insert(id.clone(), span);
    }
    Ok(spans)
}

/// Mean over each statement's own tokens (`own`), standardized over the held-out statements.
fn standardized_means(
    acts: &Activations,
    ids: &[String],
    own: &BTreeMap<String, std::ops::Range<usize>>,
) -> anyhow::Result<BTreeMap<String, Vec<f64>>> {
    let d = acts.hidden;
    let mut means: Vec<Vec<f64>> = Vec::with_capacity(ids.len());
    for id in ids {
        let i = acts
            .index_of(id)
            .ok_or_else(|| anyhow::anyhow!("no activations for `{id}`"))?;
        let span = own
            .get(id)
            .ok_or_else(|| anyhow::anyhow!("no token span for `{id}`"))?;
        let rows = &acts.statement(i)[span.start * d..span.end * d];
        let n = span.len() as f64;
        let mut m = vec![0.0f64; d];
        for row in rows.chunks(d) {
            for (a, v) in m.iter_mut().zip(row) {
                *a += *v as f64 / n;
            }
        }
        means.push(m);
    }
    for j in 0..d {
        let n = means.len() as f64;
        let mu = means.iter().map(|m| m[j]).sum::<f64>() / n;
        let sd = (means.iter().map(|m| (m[j] - mu).powi(2)).sum::<f64>() / n).sqrt();
        let sd = if sd > 0.0 { sd } else { 1.0 };
        for m in means.iter_mut() {
            m[j] = (m[j] - mu) / sd;
        }
    }
    Ok(ids.iter().cloned().zip(means).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Silent;

    /// A clustering of ten identical points: the grid stops at its no-structure check, so the
    /// result is real and costs nothing.
    fn stored(ids: &[String]) -> Stored {
        let x = Matrix::new(ids.len(), 2, vec![0.5; ids.len() * 2]).unwrap();
        Stored {
            ids: ids.to_vec(),
            result: run_grid(&x, &Grid::default(), 7),
        }
    }

    #[test]
    fn a_garbled_result_is_moved_aside_and_recomputed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("result.json");
        let ids: Vec<String> = (0..10).map(|i| format!("s{i}")).collect();
        let mut progress = Silent;
        assert_eq!(Stored::read(&path, &ids, &mut progress).unwrap(), None);
        write_record(&path, &stored(&ids)).unwrap();
        assert_eq!(
            Stored::read(&path, &ids, &mut progress).unwrap(),
            Some(stored(&ids)),
            "a stored clustering reads back"
        );
        assert_eq!(
            Stored::read(&path, &ids[1..], &mut progress).unwrap(),
            None,
            "another set of retracted statements is clustered again"
        );
        // Same-size damage that still parses: one statement id changed in place.
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replacen("\"s3\"", "\"s9\"", 1)).unwrap();
        assert_eq!(Stored::read(&path, &ids, &mut progress).unwrap(), None);
        assert!(!path.exists(), "the damaged record is moved aside");
        assert!(dir.path().join("result.json.corrupt").exists());
    }
}
