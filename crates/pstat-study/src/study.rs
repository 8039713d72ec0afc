//! What every stage of a run shares: the config, the output folder, the data of each domain
//! and its saved split, the conditions, and the seeded subsamples a `--quick` run uses.

use crate::config::RunConfig;
use crate::progress::Progress;
use crate::shard::Scope;
use anyhow::Context;
use pstat_data::artifact::Manifest;
use pstat_data::split::exclusive_split;
use pstat_data::{ConditionSet, DataRoot, Dataset, Domain, Kind, SplitAssignment, load_domain};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A run opened on its folder: the config, the data and splits of every domain, the
/// condition set, and which units this process computes. What every stage reads.
pub struct Study {
    /// The run's config.
    pub config: RunConfig,
    /// sha256 of the config as stored, recorded in every manifest.
    pub config_hash: String,
    /// The run folder.
    pub out: PathBuf,
    /// Θ0 and the perturbations: Table 2's six and the config's own.
    pub conditions: ConditionSet,
    /// Every domain's data and split, in `Domain::ALL` order (index i belongs to domain i).
    pub datasets: Vec<Dataset>,
    /// Every domain's exclusive split, in the same order.
    pub splits: Vec<SplitAssignment>,
    /// Which units this process computes: all of them (set by [`Study::open`]), a shard's, or
    /// none (a merge).
    pub scope: Scope,
}

impl Study {
    /// Load the data, and build or reuse the split of every domain of the config. A saved
    /// split that fails its check is named in a warning on `progress`, moved aside and built
    /// again.
    pub fn open(
        config: RunConfig,
        out: &Path,
        progress: &mut dyn Progress,
    ) -> anyhow::Result<Self> {
        Self::load(config, out, Some(progress))
    }

    /// The study `open` would give, with nothing written: a split not yet saved in `out` (or
    /// failing its check) is built in memory (the plan of a dry run).
    pub fn preview(config: RunConfig, out: &Path) -> anyhow::Result<Self> {
        Self::load(config, out, None)
    }

    /// `progress` is `None` for a preview, which writes nothing.
    fn load(
        config: RunConfig,
        out: &Path,
        mut progress: Option<&mut dyn Progress>,
    ) -> anyhow::Result<Self> {
        let root = DataRoot::open(config.data.as_deref().map(Path::new))?;
        let conditions = config.conditions()?;
        let config_hash = config.hash();
        let mut datasets = Vec::new();
        let mut splits = Vec::new();
        // Every domain is loaded: the behavioral Noise context draws from the other domains.
        for domain in Domain::ALL {
            let data = load_domain(&root, domain)?;
            let path = out.join("splits").join(format!("{domain}.json"));
            // A reborrow for this call only (`as_deref_mut` would hold it for the whole loop).
            let reborrowed = progress.as_mut().map(|p| &mut **p as &mut dyn Progress);
            let split = match read_split(&path, reborrowed)? {
                Some(split)
                    if split.check_matches(&data).is_ok()
                        && split.config == config.split_config() =>
                {
                    split
                }
                _ if progress.is_none() => exclusive_split(&data, config.split_config())?,
                _ => {
                    let split = exclusive_split(&data, config.split_config())?;
                    pstat_data::artifact::write_sealed_json(
                        &path,
                        &crate::io::role_of(&path),
                        &split,
                    )
                    .with_context(|| format!("writing {}", path.display()))?;
                    crate::io::write_manifest(
                        &Manifest::new(
                            format!("split {domain}"),
                            &config_hash,
                            &data.data_hash,
                            config.seed,
                        ),
                        &path,
                    )?;
                    split
                }
            };
            datasets.push(data);
            splits.push(split);
        }
        let study = Study {
            config,
            config_hash,
            out: out.to_path_buf(),
            conditions,
            datasets,
            splits,
            scope: Scope::All,
        };
        study.check_statements()?;
        Ok(study)
    }

    /// Every studied domain has held-out True statements to judge and the statements each
    /// condition relabels or draws its context from: a data folder lacking a kind (a file left
    /// out or empty) would otherwise fail after the models load, or report conditions that
    /// relabel nothing as if they were perturbations.
    fn check_statements(&self) -> anyhow::Result<()> {
        let origin = self.config.data.as_deref().unwrap_or("the bundled data");
        for &domain in &self.config.domains {
            if self.held_out_true(domain).is_empty() {
                anyhow::bail!(
                    "{domain}: the test split holds no True statement to judge ({} of {origin} has {} True statements in all)",
                    domain,
                    self.data(domain).of_kind(Kind::True).count()
                );
            }
            for condition in &self.conditions.conditions {
                let context = match &condition.context {
                    pstat_data::ContextSource::Kinds { kinds } => kinds.as_slice(),
                    _ => &[],
                };
                let needed = condition
                    .probe_true
                    .iter()
                    .chain(context)
                    .filter(|k| **k != Kind::Noise);
                for &kind in needed {
                    if self.data(domain).of_kind(kind).next().is_none() {
                        anyhow::bail!(
                            "{domain}: condition `{}` needs {kind} statements, and {origin} has none for {domain} (is its file in the data folder?)",
                            condition.name
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// The statements of `domain`.
    pub fn data(&self, domain: Domain) -> &Dataset {
        &self.datasets[domain_index(domain)]
    }

    /// The split of `domain`.
    pub fn split(&self, domain: Domain) -> &SplitAssignment {
        &self.splits[domain_index(domain)]
    }

    /// Seed for one named purpose, derived from the run seed so that every random choice of a
    /// run follows from the config.
    pub fn seed_for(&self, purpose: &str) -> u64 {
        let digest =
            pstat_data::artifact::sha256_hex(format!("{}:{purpose}", self.config.seed).as_bytes());
        u64::from_str_radix(&digest[..16], 16).expect("hex digest")
    }

    /// Training statements used in this run: the whole training split, or (with
    /// `train_limit`) a seeded sample stratified by kind.
    pub fn train_ids(&self, domain: Domain) -> Vec<String> {
        let split = self.split(domain);
        match self.config.train_limit {
            None => split.train.clone(),
            Some(limit) => self.stratified(domain, &split.train, limit, "train"),
        }
    }

    /// Held-out True test statements: R and E are computed over these.
    pub fn held_out_true(&self, domain: Domain) -> Vec<String> {
        let data = self.data(domain);
        let kind: BTreeMap<&str, Kind> = data
            .statements
            .iter()
            .map(|s| (s.id.as_str(), s.kind))
            .collect();
        let mut ids: Vec<String> = self
            .split(domain)
            .test
            .iter()
            .filter(|id| kind[id.as_str()] == Kind::True)
            .cloned()
            .collect();
        if let Some(limit) = self.config.test_limit.filter(|l| *l < ids.len()) {
            ids.shuffle(&mut ChaCha8Rng::seed_from_u64(
                self.seed_for(&format!("test-limit:{domain}")),
            ));
            ids.truncate(limit);
            ids.sort_by_key(|id| data.statements.iter().position(|s| &s.id == id));
        }
        ids
    }

    /// Up to `limit` training statements, stratified by kind (veracity-layer selection).
    pub fn stratified_train(&self, domain: Domain, limit: usize) -> Vec<String> {
        self.stratified(domain, &self.train_ids(domain), limit, "selection-train")
    }

    /// Calibration statements on which the veracity layer is selected: the whole calibration
    /// split, or a seeded sample stratified by kind (`representational.selection_calibration`).
    pub fn selection_calibration(&self, domain: Domain) -> Vec<String> {
        let calibration = &self.split(domain).calibration;
        match self.config.representational.selection_calibration {
            None => calibration.clone(),
            Some(limit) => self.stratified(domain, calibration, limit, "calibration"),
        }
    }

    /// Up to `limit` of `ids`, an equal share per kind where possible, in dataset order; the
    /// sample is seeded by the run's seed and `purpose`.
    pub fn stratified(
        &self,
        domain: Domain,
        ids: &[String],
        limit: usize,
        purpose: &str,
    ) -> Vec<String> {
        if ids.len() <= limit {
            return ids.to_vec();
        }
        let data = self.data(domain);
        let position: BTreeMap<&str, (usize, Kind)> = data
            .statements
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), (i, s.kind)))
            .collect();
        let mut by_kind: BTreeMap<Kind, Vec<&String>> = BTreeMap::new();
        for id in ids {
            by_kind.entry(position[id.as_str()].1).or_default().push(id);
        }
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed_for(&format!("{purpose}:{domain}")));
        for group in by_kind.values_mut() {
            group.shuffle(&mut rng);
        }
        // Round-robin over kinds so small kinds keep all their members.
        let mut chosen = Vec::with_capacity(limit);
        let mut round = 0;
        while chosen.len() < limit {
            let before = chosen.len();
            for group in by_kind.values() {
                if chosen.len() < limit
                    && let Some(id) = group.get(round)
                {
                    chosen.push((*id).clone());
                }
            }
            if chosen.len() == before {
                break;
            }
            round += 1;
        }
        chosen.sort_by_key(|id| position[id.as_str()].0);
        chosen
    }

    /// sha256 over the data hashes of the run's domains (identifies the data of a table).
    pub fn data_hash(&self) -> String {
        let joined: Vec<&str> = self
            .config
            .domains
            .iter()
            .map(|d| self.data(*d).data_hash.as_str())
            .collect();
        pstat_data::artifact::sha256_hex(joined.join("\n").as_bytes())
    }

    /// The manifest of an artifact of `domain`: the config's and the data's hashes and the seed.
    pub fn manifest(&self, artifact: impl Into<String>, domain: Domain) -> Manifest {
        Manifest::new(
            artifact,
            &self.config_hash,
            &self.data(domain).data_hash,
            self.config.seed,
        )
    }
}

fn domain_index(domain: Domain) -> usize {
    Domain::ALL
        .iter()
        .position(|d| *d == domain)
        .expect("every domain is in Domain::ALL")
}

/// The split saved at `path`, checked against the sha256 it carries (of its content and its
/// place, `splits/<domain>.json`): one edited in place (an id swapped keeps it valid JSON of
/// the same size, and would draw other contexts and train other probes) or damaged is named in
/// a warning and moved aside (`<file>.corrupt`) so that it is built again from the data and
/// the seed; a preview (`progress` = `None`) only ignores it.
fn read_split(
    path: &Path,
    progress: Option<&mut dyn Progress>,
) -> anyhow::Result<Option<SplitAssignment>> {
    match pstat_data::artifact::read_sealed_json(path, &crate::io::role_of(path)) {
        Ok(split) => Ok(split),
        Err(_) if progress.is_none() => Ok(None),
        Err(corrupt) => {
            let aside = pstat_data::artifact::move_aside(path)
                .with_context(|| format!("moving {} aside", path.display()))?;
            if let Some(progress) = progress {
                progress.note(&format!(
                    "warning: {corrupt}; moved to {} and built again from the data",
                    aside.display()
                ));
            }
            Ok(None)
        }
    }
}
