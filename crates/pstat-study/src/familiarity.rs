//! The familiarity stage per (model, domain): Fam(s) — the mean object-token probability —
//! over a seeded sample of each kind (Tables A6–A8, Fig. 2e), and within-kind distances of
//! veracity-layer representations (Fig. 2d).

use crate::config::RunConfig;
use crate::io::{read_record, write_jsonl, write_record_vouching};
use crate::layout::RunLayout;
use crate::progress::Progress;
use crate::representational::veracity_activations;
use crate::stage::{Cell, CellPlan, Handoff, Stage, Tables};
use crate::unit::{PlannedUnit, UnitKey, UnitKind, Work};
use pstat_data::activations::Activations;
use pstat_data::{Kind, Statement};
use pstat_familiarity::distance::{pairwise_distances, standardize};
use pstat_familiarity::object_tokens::{entity_spans, familiarity, object_token_indices};
use pstat_familiarity::summary::mean_with_interval;
use pstat_tables::{DistanceRow, FamiliarityRow};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Fam(s) of one statement, kept per statement in `familiarity.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StatementFamiliarity {
    id: String,
    kind: Kind,
    object_tokens: usize,
    fam: Option<f64>,
}

/// The kinds of Tables A6–A8; "fictional" pools Fictional (T) and (F).
const TABLE_KINDS: [(&str, &[Kind]); 7] = [
    ("true", &[Kind::True]),
    ("false", &[Kind::False]),
    ("fictional", &[Kind::FictionalT, Kind::FictionalF]),
    ("fictional_t", &[Kind::FictionalT]),
    ("fictional_f", &[Kind::FictionalF]),
    ("synthetic_tf", &[Kind::SyntheticTf]),
    ("synthetic_fi", &[Kind::SyntheticFi]),
];

/// The familiarity stage: object-token probabilities per kind and, when the representational
/// stage runs, within-kind distances at the veracity layer.
pub struct Familiarity;

impl Stage for Familiarity {
    fn name(&self) -> &'static str {
        "familiarity"
    }

    fn enabled(&self, config: &RunConfig) -> bool {
        config.familiarity.enabled
    }

    /// One unit: the object-token probabilities of the sample of every kind.
    fn units(&self, plan: &CellPlan) -> Vec<PlannedUnit> {
        let data = plan.study.data(plan.domain);
        let n = plan.study.config.familiarity.statements_per_kind;
        let statements = Kind::TEXTUAL
            .iter()
            .map(|k| data.of_kind(*k).count().min(n))
            .sum();
        let done = plan.reads_out()
            && RunLayout::new(&plan.study.out)
                .familiarity(plan.model, plan.domain)
                .exists();
        vec![PlannedUnit::new(
            plan.key(UnitKind::ObjectTokens),
            Work::Statements(statements),
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
        tables
            .familiarity
            .extend(object_token_table(cell, progress)?);
        // Distances are not a unit: they are computed where the tables are assembled.
        if cell.study.config.representational.enabled && cell.study.scope.assembles() {
            let (layer, acts) = veracity_activations(cell, handoff, progress)?;
            tables.distances.extend(distance_table(cell, layer, acts));
        }
        Ok(())
    }
}

fn object_token_table(
    cell: &Cell,
    progress: &mut dyn Progress,
) -> anyhow::Result<Vec<FamiliarityRow>> {
    let Cell {
        study,
        model,
        domain,
    } = cell;
    let domain = *domain;
    let path = RunLayout::new(&study.out).familiarity(&model.name, domain);
    if let Some(rows) = read_record::<Vec<FamiliarityRow>>(&path, progress)? {
        return Ok(rows);
    }
    if !study
        .scope
        .computes(&UnitKey::new(&model.name, domain, UnitKind::ObjectTokens))?
    {
        return Ok(Vec::new());
    }
    progress.unit(&UnitKey::new(&model.name, domain, UnitKind::ObjectTokens));
    let data = study.data(domain);
    let n = study.config.familiarity.statements_per_kind;
    let mut rng = ChaCha8Rng::seed_from_u64(study.seed_for(&format!("familiarity:{domain}")));
    let mut sample: Vec<&Statement> = Vec::new();
    for kind in Kind::TEXTUAL {
        let mut group: Vec<&Statement> = data.of_kind(kind).collect();
        group.shuffle(&mut rng);
        sample.extend(group.into_iter().take(n));
    }
    let encoded: Vec<Vec<(u32, std::ops::Range<usize>)>> = sample
        .iter()
        .map(|s| model.encoder.encode_plain_with_offsets(&s.text))
        .collect::<Result<_, _>>()?;
    progress.start(
        &format!("{} {domain} object-token probabilities", model.name),
        sample.len(),
    );
    let mut per_statement = Vec::with_capacity(sample.len());
    for (chunk_s, chunk_e) in sample.chunks(64).zip(encoded.chunks(64)) {
        let ids: Vec<Vec<u32>> = chunk_e
            .iter()
            .map(|e| e.iter().map(|t| t.0).collect())
            .collect();
        let objects: Vec<Vec<usize>> = chunk_s
            .iter()
            .zip(chunk_e)
            .map(|(s, e)| {
                let spans: Vec<_> = e.iter().map(|t| t.1.clone()).collect();
                object_token_indices(&spans, &entity_spans(&s.text, &s.subject, &s.object))
            })
            .collect();
        // Only the object tokens' probabilities are read: the LM head runs at their rows.
        let probs = model.lm.token_probabilities_at(&ids, &objects)?;
        for ((s, objects), p) in chunk_s.iter().zip(&objects).zip(&probs) {
            per_statement.push(StatementFamiliarity {
                id: s.id.clone(),
                kind: s.kind,
                object_tokens: objects.len(),
                fam: familiarity(p),
            });
        }
        progress.advance(chunk_s.len());
    }
    progress.finish(false);
    let lines = path.with_extension("jsonl");
    write_jsonl(&lines, &per_statement)?;
    let seed = study.seed_for(&format!("familiarity-bootstrap:{}:{domain}", model.name));
    let rows: Vec<FamiliarityRow> = TABLE_KINDS
        .iter()
        .filter_map(|(name, kinds)| {
            let values: Vec<f64> = per_statement
                .iter()
                .filter(|s| kinds.contains(&s.kind))
                .filter_map(|s| s.fam)
                .collect();
            let (mean, lo, hi) =
                mean_with_interval(&values, study.config.bootstrap_resamples, seed)?;
            Some(FamiliarityRow {
                model: model.name.clone(),
                domain: domain.to_string(),
                kind: name.to_string(),
                n: values.len(),
                mean_object_token_prob: mean,
                lo,
                hi,
            })
        })
        .collect();
    write_record_vouching(&path, &rows, &[lines])?;
    Ok(rows)
}

/// Within-kind distances of standardized last-token representations at `layer`.
fn distance_table(cell: &Cell, layer: usize, acts: &Activations) -> Vec<DistanceRow> {
    let Cell {
        study,
        model,
        domain,
    } = cell;
    let domain = *domain;
    let kind: HashMap<&str, Kind> = study
        .data(domain)
        .statements
        .iter()
        .map(|s| (s.id.as_str(), s.kind))
        .collect();
    let mut rows: Vec<Vec<f32>> = (0..acts.len())
        .map(|i| acts.last_token(i).to_vec())
        .collect();
    standardize(&mut rows);
    let mut by_kind: BTreeMap<Kind, Vec<&[f32]>> = BTreeMap::new();
    for (i, id) in acts.statement_ids.iter().enumerate() {
        by_kind.entry(kind[id.as_str()]).or_default().push(&rows[i]);
    }
    let pairs = study.config.familiarity.distance_pairs;
    by_kind
        .into_iter()
        .filter_map(|(k, group)| {
            let seed = study.seed_for(&format!("distances:{}:{domain}:{k}", model.name));
            let d = pairwise_distances(&group, pairs, seed);
            let (mean, lo, hi) = mean_with_interval(&d, study.config.bootstrap_resamples, seed)?;
            Some(DistanceRow {
                model: model.name.clone(),
                domain: domain.to_string(),
                kind: k.to_string(),
                layer,
                n_pairs: d.len(),
                mean_distance: mean,
                lo,
                hi,
            })
        })
        .collect()
}
