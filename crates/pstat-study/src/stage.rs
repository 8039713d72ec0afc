//! The stages of a run and what passes between them. A stage runs once per (model, domain)
//! [`Cell`]; it adds rows to the run's [`Tables`] and leaves in the [`Handoff`] what later
//! stages of the same cell need.

use crate::config::RunConfig;
use crate::layout::RunLayout;
use crate::model::LoadedModel;
use crate::progress::Progress;
use crate::study::Study;
use pstat_data::Domain;
use pstat_data::activations::Activations;
use pstat_stability::Judgments;
use pstat_tables::{
    ACROSS_MODELS_JSON, AcrossModelPairRow, AcrossModelRow, AgreementRow, AnswerRow, ClusterRow,
    ComparisonFamilyRow, ComparisonRow, ConditionTitle, DECISIONS_FILE, Decisions, DistanceRow,
    FamiliarityRow, FormatDecision, LAYERS_FILE, LayerChoice, RelabelledRow, ResampleRow,
    SignTestRow, StabilityRow, Table, ThemeRow, write_json, write_table,
};
use std::collections::{BTreeMap, BTreeSet};

/// One (model, domain) of a run.
pub struct Cell<'a> {
    /// The run.
    pub study: &'a Study,
    /// The model, loaded.
    pub model: &'a LoadedModel,
    /// The domain.
    pub domain: Domain,
}

impl Cell<'_> {
    /// `<out>/<model>/<domain>/<stage>`: where a stage keeps its units.
    pub fn dir(&self, stage: &str) -> std::path::PathBuf {
        stage_dir(&self.study.out, &self.model.name, self.domain, stage)
    }
}

/// `<out>/<model>/<domain>/<stage>` ([`RunLayout::stage`]).
pub fn stage_dir(
    out: &std::path::Path,
    model: &str,
    domain: Domain,
    stage: &str,
) -> std::path::PathBuf {
    RunLayout::new(out).stage(model, domain, stage)
}

/// What the stages of one cell hand each other.
#[derive(Default)]
pub struct Handoff {
    /// The veracity layer, once the representational stage has chosen (or read) it.
    pub layer: Option<LayerChoice>,
    /// Activations of the probed statements at the veracity layer, as the cache returns them.
    pub activations: Option<Activations>,
    /// What the main configurations retracted, for the clustering.
    pub retractions: Retractions,
}

/// The clustering input (Appendix I): which (instantiation, condition) pairs of the main
/// configurations retract each held-out True statement, as `representational:synthetic_tf`,
/// and which statements either instantiation believed at baseline. Only sAwMIL at the veracity
/// layer and the prompt at the main K, empty baseline and main format add to it.
#[derive(Debug, Default)]
pub struct Retractions {
    /// Per statement id: the `instantiation:condition` labels that retract it.
    pub types: BTreeMap<String, BTreeSet<String>>,
    /// Statements some instantiation believed at baseline.
    pub believed_at_baseline: BTreeSet<String>,
    /// Per `instantiation:condition` label, the baseline's and Θ's judgments (the agreement
    /// between instantiations, the study's `agreement` module).
    pub judged: BTreeMap<String, (Judgments, Judgments)>,
}

impl Retractions {
    /// Whether a probe unit feeds the clustering: the primary probe (sAwMIL) at the veracity
    /// layer only.
    pub fn takes_probe(probe: pstat_tables::Probe, layer: usize, veracity: usize) -> bool {
        probe == pstat_tables::Probe::PRIMARY && layer == veracity
    }

    /// Whether a behavioral study feeds the clustering: the main (largest) K of `ks`, the
    /// empty-context baseline and the main (first) of the `formats` prompted.
    pub fn takes_prompt(
        k: usize,
        baseline: pstat_tables::Baseline,
        format: pstat_tables::PromptFormat,
        ks: &[usize],
        formats: &[pstat_tables::PromptFormat],
    ) -> bool {
        baseline == pstat_tables::Baseline::Empty
            && Some(k) == pstat_tables::main_k(ks.iter().copied())
            && Some(&format) == formats.first()
    }

    /// Adds the statements `perturbed` retracts from `baseline` under `condition`: to the
    /// clustering's input and to the agreement's.
    pub fn add(
        &mut self,
        instantiation: pstat_tables::Instantiation,
        condition: &str,
        baseline: &Judgments,
        perturbed: &Judgments,
    ) {
        self.record(instantiation, condition, baseline, perturbed);
        let label = format!("{instantiation}:{condition}");
        for (id, believed) in baseline {
            if *believed {
                self.believed_at_baseline.insert(id.clone());
                if perturbed.get(id) == Some(&false) {
                    self.types
                        .entry(id.clone())
                        .or_default()
                        .insert(label.clone());
                }
            }
        }
    }
}

impl Retractions {
    /// Keeps the judgments of `instantiation` under `condition` for the agreement between
    /// instantiations only: the clustering's input stays Appendix I's.
    pub fn record(
        &mut self,
        instantiation: pstat_tables::Instantiation,
        condition: &str,
        baseline: &Judgments,
        perturbed: &Judgments,
    ) {
        self.judged.insert(
            format!("{instantiation}:{condition}"),
            (baseline.clone(), perturbed.clone()),
        );
    }
}

/// One (model, domain) of a plan, before any model is loaded.
pub struct CellPlan<'a> {
    /// The study planned.
    pub study: &'a Study,
    /// The model's name in the run folder ([`crate::model::display_name`]).
    pub model: &'a str,
    /// The domain.
    pub domain: Domain,
    /// What is known of the model and of the out folder.
    pub known: Known,
}

/// What a plan knows of a cell beyond its config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// Nothing: every unit the cell can have, whatever the model and its choices turn out to
    /// be, none of them stored (which units a shard owns, decided before anything is computed).
    Nothing,
    /// What the registry or the model file's header tells without loading weights, and what
    /// the out folder holds (a run's plan).
    Stored {
        /// Whether the model has a chat template (`None`: unknown; chat is assumed).
        chat_template: Option<bool>,
        /// The model's number of decoder blocks (`None`: unknown).
        depth: Option<usize>,
    },
}

impl CellPlan<'_> {
    /// The key of this cell's unit of `kind`.
    pub fn key(&self, kind: crate::unit::UnitKind) -> crate::unit::UnitKey {
        crate::unit::UnitKey::new(self.model, self.domain, kind)
    }

    /// `<out>/<model>/<domain>/<stage>`.
    pub fn dir(&self, stage: &str) -> std::path::PathBuf {
        stage_dir(&self.study.out, self.model, self.domain, stage)
    }

    /// Whether the out folder is read for what it holds.
    pub fn reads_out(&self) -> bool {
        matches!(self.known, Known::Stored { .. })
    }
}

/// A stage of the study.
pub trait Stage: Sync {
    /// Its name in headings and in the run folder.
    fn name(&self) -> &'static str;
    /// Whether `config` runs it.
    fn enabled(&self, config: &RunConfig) -> bool;
    /// The units it computes for `cell`, in the order it computes them.
    fn units(&self, cell: &CellPlan) -> Vec<crate::unit::PlannedUnit>;
    /// Computes (or reads back) its units of `cell` and adds their rows to `tables`.
    fn run(
        &self,
        cell: &Cell,
        handoff: &mut Handoff,
        tables: &mut Tables,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<()>;
}

/// The tables at the top of the run folder, rebuilt from the units' results.
#[derive(Default)]
pub struct Tables {
    /// `stability.csv`.
    pub stability: Vec<StabilityRow>,
    /// Paired tests of the compared conditions, before Holm's correction within families.
    pub comparisons: Vec<ComparisonRow>,
    /// `layers.json`.
    pub layers: Vec<LayerChoice>,
    /// Per probe unit, Θ and kind: training bags seen and relabelled relative to Θ0.
    pub relabelled: Vec<RelabelledRow>,
    /// `familiarity.csv`.
    pub familiarity: Vec<FamiliarityRow>,
    /// `distances.csv`.
    pub distances: Vec<DistanceRow>,
    /// `answers.csv`.
    pub answers: Vec<AnswerRow>,
    /// `resamples.csv`.
    pub resamples: Vec<ResampleRow>,
    /// `clusters.csv`.
    pub clusters: Vec<ClusterRow>,
    /// `agreement.csv`.
    pub agreement: Vec<AgreementRow>,
    /// `themes.csv`.
    pub themes: Vec<ThemeRow>,
    /// The labelled clusters the theme table is built from (`themes.json`).
    pub labeled: Vec<pstat_contrast::themes::LabeledCluster>,
    /// The prompt formats chosen per (model, domain).
    pub formats: Vec<FormatDecision>,
}

impl Tables {
    /// Writes every table, `decisions.json` and their manifests into the run folder.
    pub fn write(&self, study: &Study, progress: &mut dyn Progress) -> anyhow::Result<()> {
        let out = &study.out;
        write_table(out, &self.stability)?;
        write_json(&out.join("stability.json"), &self.stability)?;
        crate::comparisons::write_tables(study, &self.stability, &self.comparisons, &self.layers)?;
        write_json(&out.join(LAYERS_FILE), &self.layers)?;
        write_table(out, &self.relabelled)?;
        write_table(out, &self.familiarity)?;
        write_table(out, &self.distances)?;
        write_table(out, &self.clusters)?;
        write_table(out, &self.agreement)?;
        write_table(out, &self.answers)?;
        write_table(out, &self.resamples)?;
        if !self.themes.is_empty() {
            write_table(out, &self.themes)?;
            let themes = pstat_contrast::themes::tabulate_themes(&self.labeled);
            write_json(&out.join("themes.json"), &themes)?;
        }
        let decisions = Decisions {
            conditions: study
                .conditions
                .conditions
                .iter()
                .map(|c| ConditionTitle {
                    name: c.name.clone(),
                    title: c.title.clone(),
                    compare_with: c.compare_with.clone(),
                })
                .collect(),
            formats: self.formats.clone(),
        };
        write_json(&out.join(DECISIONS_FILE), &decisions)?;
        for path in [
            StabilityRow::FILE,
            ComparisonRow::FILE,
            ComparisonFamilyRow::FILE,
            AcrossModelRow::FILE,
            AcrossModelPairRow::FILE,
            SignTestRow::FILE,
            ACROSS_MODELS_JSON,
            FamiliarityRow::FILE,
            DistanceRow::FILE,
            LAYERS_FILE,
            RelabelledRow::FILE,
            ClusterRow::FILE,
            AgreementRow::FILE,
            AnswerRow::FILE,
            DECISIONS_FILE,
        ] {
            let Ok(bytes) = std::fs::read(out.join(path)) else {
                continue;
            };
            crate::io::write_manifest(
                &pstat_data::artifact::Manifest::new(
                    path,
                    &study.config_hash,
                    &study.data_hash(),
                    study.config.seed,
                )
                .with_content(&bytes),
                &out.join(path),
            )?;
        }
        progress.note(&format!(
            "wrote {} ({} rows)",
            out.join(StabilityRow::FILE).display(),
            self.stability.len()
        ));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pstat_tables::{Baseline, Instantiation, Probe, PromptFormat};

    #[test]
    fn only_the_main_configurations_feed_the_clustering() {
        // Probes: sAwMIL at the veracity layer; not Mass-Mean, not a neighbouring layer.
        assert!(Retractions::takes_probe(Probe::Sawmil, 12, 12));
        assert!(!Retractions::takes_probe(Probe::MassMean, 12, 12));
        assert!(!Retractions::takes_probe(Probe::Sawmil, 13, 12));
        // Prompts: the largest K, the empty baseline, the first format prompted.
        let ks = [20, 50, 100];
        let formats = [PromptFormat::Chat, PromptFormat::Plain];
        let takes = |k, b, f| Retractions::takes_prompt(k, b, f, &ks, &formats);
        assert!(takes(100, Baseline::Empty, PromptFormat::Chat));
        assert!(!takes(50, Baseline::Empty, PromptFormat::Chat));
        assert!(!takes(20, Baseline::Empty, PromptFormat::Chat));
        assert!(!takes(100, Baseline::True, PromptFormat::Chat));
        assert!(!takes(100, Baseline::Empty, PromptFormat::Plain));
    }

    #[test]
    fn retractions_are_keyed_by_instantiation_and_condition() {
        let judged = |pairs: &[(&str, bool)]| -> Judgments {
            pairs.iter().map(|(id, b)| (id.to_string(), *b)).collect()
        };
        let base = judged(&[("s1", true), ("s2", true), ("s3", false)]);
        let mut r = Retractions::default();
        r.add(
            Instantiation::Representational,
            "synthetic_tf",
            &base,
            &judged(&[("s1", false), ("s2", true), ("s3", false)]),
        );
        r.add(
            Instantiation::Behavioral,
            "fictional",
            &base,
            &judged(&[("s1", false), ("s2", false), ("s3", true)]),
        );
        let of = |id: &str| r.types[id].iter().cloned().collect::<Vec<_>>();
        assert_eq!(
            of("s1"),
            ["behavioral:fictional", "representational:synthetic_tf"]
        );
        assert_eq!(of("s2"), ["behavioral:fictional"]);
        assert!(
            !r.types.contains_key("s3"),
            "an expansion is not a retraction"
        );
        assert_eq!(r.believed_at_baseline.len(), 2);
    }
}
