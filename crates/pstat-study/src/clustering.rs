//! Retraction clustering per (model, domain) (Section 4.5, Appendix I): statements retracted
//! under at least one Θ in either instantiation, represented by their standardized mean over
//! all fed tokens at the veracity layer, clustered by PCA → UMAP → HDBSCAN with Algorithm 1's
//! selection; contrastive prompts per cluster, optionally labelled by an OpenAI-compatible
//! chat endpoint.

use crate::config::RunConfig;
use crate::io::{read_json, write_json, write_manifest};
use crate::progress::Progress;
use crate::representational::veracity_activations;
use crate::stage::{Cell, Handoff, Retractions, Stage, Tables};
use crate::unit::{UnitKey, UnitKind};
use anyhow::Context;
use pstat_cluster::contrast::labeler::Labeler;
use pstat_cluster::contrast::themes::LabeledCluster;
use pstat_cluster::contrast::{
    ClusterPrompt, PromptOptions, PromptPoint, build_prompts, prompts_markdown,
};
use pstat_cluster::{Grid, GridResult, Matrix, run_grid};
use pstat_data::Domain;
use pstat_data::activations::Activations;
use pstat_data::artifact::write_atomic;
use pstat_tables::{ClusterRow, ThemeRow};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Fewer retracted statements than this are not clustered (HDBSCAN needs a handful per cluster).
const MIN_POINTS: usize = 8;

#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    ids: Vec<String>,
    #[serde(flatten)]
    result: GridResult,
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
    out.join("clusters").join(model).join(domain.as_str())
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
    let representation = standardized_means(acts, &held_out)?;
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
    let stored = match read_json::<Stored>(&result_path, progress)? {
        Some(stored) if stored.ids == retracted => stored,
        _ => {
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
            write_json(&result_path, &stored)?;
            write_manifest(
                &study
                    .manifest(format!("clusters {} {domain}", model.name), domain)
                    .with_model(model.lm.sha256(), pstat_lm::kernel_isa()),
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
    output.rows = stored
        .ids
        .iter()
        .zip(&stored.result.labels)
        .map(|(id, c)| ClusterRow {
            model: model.name.clone(),
            domain: domain.to_string(),
            statement_id: id.clone(),
            cluster: *c,
        })
        .collect();
    let text: BTreeMap<&str, &str> = study
        .data(domain)
        .statements
        .iter()
        .map(|s| (s.id.as_str(), s.text.as_str()))
        .collect();
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
    let dir = study
        .out
        .join("clusters")
        .join(&model.name)
        .join(domain.as_str());
    let labeler = Labeler::new(url, "default", 3, Duration::from_secs(300));
    for prompt in prompts {
        let path = dir.join(format!("label_{}.json", prompt.cluster_id));
        let outcome = match read_json(&path, progress)? {
            Some(label) => label,
            None => {
                let outcome = labeler.label(&prompt.prompt)?.label;
                write_json(&path, &outcome)?;
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

/// Mean over each statement's tokens, standardized over the held-out statements.
fn standardized_means(
    acts: &Activations,
    ids: &[String],
) -> anyhow::Result<BTreeMap<String, Vec<f64>>> {
    let d = acts.hidden;
    let mut means: Vec<Vec<f64>> = Vec::with_capacity(ids.len());
    for id in ids {
        let i = acts
            .index_of(id)
            .ok_or_else(|| anyhow::anyhow!("no activations for `{id}`"))?;
        let rows = acts.statement(i);
        let n = acts.statement_len(i) as f64;
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
