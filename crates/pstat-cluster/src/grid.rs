//! Algorithm 1: PCA → UMAP → HDBSCAN over a hyperparameter grid, each configuration scored as
//! silhouette − 0.25·noise fraction − 0.10 (a non-noise cluster with < 3 points) − 0.05 (< 3
//! non-noise clusters); the first configuration in grid order with the highest score wins.

use crate::hdbscan::{HdbscanParams, hdbscan};
use crate::matrix::Matrix;
use crate::metrics::silhouette;
use crate::pca::pca_scores;
use crate::umap::{UmapParams, umap_embed};
use serde::{Deserialize, Serialize};

/// The hyperparameters of one pipeline run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PipelineConfig {
    /// Principal components kept by PCA (clamped to the points' rank bound min(n, d)).
    pub pca_dims: usize,
    /// UMAP on the PCA scores.
    pub umap: UmapParams,
    /// HDBSCAN on the UMAP embedding.
    pub hdbscan: HdbscanParams,
}

/// The grid: every combination, iterated with PCA outermost and min_samples innermost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grid {
    /// Values of [`PipelineConfig::pca_dims`].
    pub pca_dims: Vec<usize>,
    /// Values of [`UmapParams::n_neighbors`].
    pub n_neighbors: Vec<usize>,
    /// Values of [`UmapParams::min_dist`].
    pub min_dist: Vec<f64>,
    /// Values of [`UmapParams::n_components`].
    pub n_components: Vec<usize>,
    /// Values of [`HdbscanParams::min_cluster_size`].
    pub min_cluster_size: Vec<usize>,
    /// Values of [`HdbscanParams::min_samples`].
    pub min_samples: Vec<usize>,
}

impl Default for Grid {
    /// 2·3·2·2 = 24 UMAP runs × 3·3 HDBSCAN settings = 216 configurations; a few seconds for a
    /// few hundred points. min_cluster_size 3 is the smallest size Algorithm 1 does not penalise.
    fn default() -> Self {
        Grid {
            pca_dims: vec![10, 30],
            n_neighbors: vec![5, 15, 30],
            min_dist: vec![0.0, 0.1],
            n_components: vec![2, 5],
            min_cluster_size: vec![3, 5, 10],
            min_samples: vec![1, 3, 5],
        }
    }
}

impl Grid {
    /// Every combination, in grid order (empty when any list is).
    pub fn configs(&self) -> Vec<PipelineConfig> {
        let mut out = Vec::new();
        for &pca_dims in &self.pca_dims {
            for &n_neighbors in &self.n_neighbors {
                for &min_dist in &self.min_dist {
                    for &n_components in &self.n_components {
                        for &min_cluster_size in &self.min_cluster_size {
                            for &min_samples in &self.min_samples {
                                out.push(PipelineConfig {
                                    pca_dims,
                                    umap: UmapParams {
                                        n_neighbors,
                                        min_dist,
                                        n_components,
                                    },
                                    hdbscan: HdbscanParams {
                                        min_cluster_size,
                                        min_samples,
                                    },
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// Algorithm 1's score terms for one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigScore {
    /// The configuration scored.
    pub config: PipelineConfig,
    /// Silhouette on the UMAP embedding over non-noise points; `None` when undefined (< 2
    /// clusters), in which case the score uses −1, the worst possible silhouette.
    pub silhouette: Option<f64>,
    /// Share of points labelled noise (1 when there are no points).
    pub noise_fraction: f64,
    /// Number of non-noise clusters.
    pub n_clusters: usize,
    /// 0.10 when some non-noise cluster has fewer than 3 points, else 0.
    pub tiny_penalty: f64,
    /// 0.05 when there are fewer than 3 non-noise clusters, else 0.
    pub few_penalty: f64,
    /// silhouette (or −1) − 0.25·`noise_fraction` − `tiny_penalty` − `few_penalty`.
    pub score: f64,
}

/// Algorithm 1's score of the labels (−1 = noise, clusters 0..k−1) HDBSCAN gave the rows of
/// `embedding` under `config`.
pub fn score_labels(config: PipelineConfig, embedding: &Matrix, labels: &[i32]) -> ConfigScore {
    let n = labels.len();
    let noise = labels.iter().filter(|&&l| l < 0).count();
    let n_clusters = labels
        .iter()
        .copied()
        .max()
        .map_or(0, |m| (m + 1).max(0) as usize);
    let mut sizes = vec![0usize; n_clusters];
    for &l in labels.iter().filter(|&&l| l >= 0) {
        sizes[l as usize] += 1;
    }
    let s = silhouette(embedding, labels);
    let noise_fraction = if n == 0 { 1.0 } else { noise as f64 / n as f64 };
    let tiny_penalty = if sizes.iter().any(|&s| s < 3) {
        0.10
    } else {
        0.0
    };
    let few_penalty = if n_clusters < 3 { 0.05 } else { 0.0 };
    let score = s.unwrap_or(-1.0) - 0.25 * noise_fraction - tiny_penalty - few_penalty;
    ConfigScore {
        config,
        silhouette: s,
        noise_fraction,
        n_clusters,
        tiny_penalty,
        few_penalty,
        score,
    }
}

/// The selected clustering plus everything needed to report and plot it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridResult {
    /// The winning configuration (the grid's first when no configuration ran).
    pub chosen: PipelineConfig,
    /// Its position in grid order (0 when no configuration ran).
    pub chosen_index: usize,
    /// Its score ([`ConfigScore::score`]); without the grid, the score of the labels on the
    /// 2-D PCA.
    pub score: f64,
    /// Every configuration's score, in grid order (empty when no configuration ran).
    pub scores: Vec<ConfigScore>,
    /// One label per input row; −1 is noise.
    pub labels: Vec<i32>,
    /// 2-D UMAP of the chosen PCA projection with the chosen neighbours/min_dist (the clustering
    /// embedding itself when it is 2-D), for the scatter figure.
    pub embedding_2d: Vec<[f64; 2]>,
    /// The seed of every PCA and UMAP run.
    pub seed: u64,
    /// Why the input has no structure to cluster, when it has none (see [`no_structure`]):
    /// then no configuration ran, every point is noise and `embedding_2d` is the 2-D PCA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_structure: Option<String>,
}

/// Below this ratio of the second to the first principal variance the points lie on a line.
const RANK_ONE_RATIO: f64 = 1e-8;

/// What Algorithm 1 can find in `x`.
enum Shape {
    /// Nothing (the reason): see [`no_structure`].
    Nothing(String),
    /// The points lie on a line in separated groups: one label per point (see
    /// [`groups_on_a_line`]).
    Line(Vec<i32>),
    /// Spread in two directions or more: the grid runs.
    Spread,
}

/// Why Algorithm 1 has nothing to find in `x`, if so: no points, fewer points than the grid's
/// smallest `min_cluster_size` (HDBSCAN cannot form a cluster), every point the same (zero
/// variance), or points that vary along one direction only with no gap between groups (rank
/// 1: UMAP's neighbour graph of a line is a chain that HDBSCAN cuts into arbitrary pieces; 100
/// identical points gave 17 "clusters" and unimodal 1-D noise 18 before this check). Points on
/// a line in separated groups are structure: [`run_grid`] labels the groups.
pub fn no_structure(x: &Matrix, grid: &Grid, seed: u64) -> Option<String> {
    match shape(x, grid, seed) {
        Shape::Nothing(reason) => Some(reason),
        Shape::Line(_) | Shape::Spread => None,
    }
}

fn shape(x: &Matrix, grid: &Grid, seed: u64) -> Shape {
    let n = x.rows();
    if n == 0 {
        return Shape::Nothing("no points".into());
    }
    let smallest = grid
        .min_cluster_size
        .iter()
        .copied()
        .min()
        .unwrap_or_else(|| Grid::default().min_cluster_size[0]);
    if n < smallest {
        return Shape::Nothing(format!(
            "{n} points, fewer than the smallest min_cluster_size ({smallest})"
        ));
    }
    let scores = pca_scores(x, 2, seed);
    let variance = |c: usize| {
        if c < scores.cols() {
            (0..n).map(|i| scores.get(i, c).powi(2)).sum::<f64>() / n as f64
        } else {
            0.0
        }
    };
    let mean_square = (0..n)
        .flat_map(|i| x.row(i).iter())
        .map(|v| v * v)
        .sum::<f64>()
        / (n * x.cols()).max(1) as f64;
    let (first, second) = (variance(0), variance(1));
    // Relative to the magnitude of the values, so float rounding of identical rows counts as 0.
    if first <= 1e-12 * mean_square.max(f64::MIN_POSITIVE) {
        return Shape::Nothing(format!("zero variance: all {n} points are the same"));
    }
    if second <= RANK_ONE_RATIO * first {
        let along: Vec<f64> = (0..n).map(|i| scores.get(i, 0)).collect();
        return match groups_on_a_line(&along, smallest) {
            Some(labels) => Shape::Line(labels),
            None => Shape::Nothing(format!(
                "rank-1 input: the {n} points vary along a single direction, in one group"
            )),
        };
    }
    Shape::Spread
}

/// The groups of points at positions `t` along a line: split, recursively, at the widest gap
/// that leaves at least `smallest` points on each side, when that gap is wider than the
/// standard deviation of the points on either side (two groups apart, not the spread of one
/// unimodal group, whose widest inner gap is a fraction of its deviation). Labels 0, 1, … in
/// order along the line; `None` when the points form one group.
fn groups_on_a_line(t: &[f64], smallest: usize) -> Option<Vec<i32>> {
    fn deviation(v: &[f64]) -> f64 {
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
    }
    fn split(v: &[f64], offset: usize, smallest: usize, cuts: &mut Vec<usize>) {
        let smallest = smallest.max(1);
        if v.len() < 2 * smallest {
            return;
        }
        let widest = (smallest..=v.len() - smallest)
            .max_by(|&a, &b| (v[a] - v[a - 1]).total_cmp(&(v[b] - v[b - 1])))
            .expect("at least one place to cut");
        let gap = v[widest] - v[widest - 1];
        if gap > deviation(&v[..widest]).max(deviation(&v[widest..])) {
            cuts.push(offset + widest);
            split(&v[..widest], offset, smallest, cuts);
            split(&v[widest..], offset + widest, smallest, cuts);
        }
    }
    let mut order: Vec<usize> = (0..t.len()).collect();
    order.sort_by(|&a, &b| t[a].total_cmp(&t[b]));
    let sorted: Vec<f64> = order.iter().map(|&i| t[i]).collect();
    let mut cuts = Vec::new();
    split(&sorted, 0, smallest, &mut cuts);
    if cuts.is_empty() {
        return None;
    }
    let mut labels = vec![0i32; t.len()];
    for (rank, &i) in order.iter().enumerate() {
        labels[i] = cuts.iter().filter(|&&c| c <= rank).count() as i32;
    }
    Some(labels)
}

/// Runs Algorithm 1 on the rows of `x`. Every UMAP uses `seed`, so a grid point's result does not
/// depend on which other grid points run. An empty grid falls back to the default grid.
/// An input with [`no_structure`] gets no clustering: every point is noise. Points on a line in
/// separated groups get one cluster per group (`groups_on_a_line`) without the grid, whose
/// UMAP would cut each group's chain into pieces.
pub fn run_grid(x: &Matrix, grid: &Grid, seed: u64) -> GridResult {
    let mut configs = grid.configs();
    if configs.is_empty() {
        configs = Grid::default().configs();
    }
    let (labels, no_structure) = match shape(x, grid, seed) {
        Shape::Nothing(reason) => (vec![-1; x.rows()], Some(reason)),
        Shape::Line(labels) => (labels, None),
        Shape::Spread => return run_configs(x, &configs, seed),
    };
    let pca = pca_scores(x, 2, seed);
    let at = |i: usize, c: usize| if c < pca.cols() { pca.get(i, c) } else { 0.0 };
    let scored = score_labels(configs[0], &pca, &labels);
    GridResult {
        chosen: configs[0],
        chosen_index: 0,
        score: scored.score,
        scores: Vec::new(),
        labels,
        embedding_2d: (0..x.rows()).map(|i| [at(i, 0), at(i, 1)]).collect(),
        seed,
        no_structure,
    }
}

/// The grid over `configs` (Algorithm 1 proper).
fn run_configs(x: &Matrix, configs: &[PipelineConfig], seed: u64) -> GridResult {
    let mut best: Option<(usize, Vec<i32>, Matrix)> = None;
    let mut scores: Vec<ConfigScore> = Vec::with_capacity(configs.len());
    let mut cache: Option<((usize, UmapParams), Matrix)> = None;
    let mut pca_cache: Option<(usize, Matrix)> = None;
    for (index, &config) in configs.iter().enumerate() {
        if pca_cache.as_ref().map(|(k, _)| *k) != Some(config.pca_dims) {
            pca_cache = Some((config.pca_dims, pca_scores(x, config.pca_dims, seed)));
        }
        let reduced = &pca_cache.as_ref().expect("set above").1;
        let key = (config.pca_dims, config.umap);
        if cache.as_ref().map(|(k, _)| *k) != Some(key) {
            cache = Some((key, umap_embed(reduced, &config.umap, seed)));
        }
        let embedding = &cache.as_ref().expect("set above").1;
        let labels = hdbscan(embedding, &config.hdbscan);
        let scored = score_labels(config, embedding, &labels);
        let better = best
            .as_ref()
            .is_none_or(|(b, _, _)| scored.score > scores[*b].score);
        if better {
            best = Some((index, labels, embedding.clone()));
        }
        scores.push(scored);
    }
    let (chosen_index, labels, embedding) = best.expect("the grid has at least one configuration");
    let chosen = configs[chosen_index];
    let embedding_2d = if chosen.umap.n_components == 2 {
        embedding
    } else {
        let reduced = pca_scores(x, chosen.pca_dims, seed);
        umap_embed(
            &reduced,
            &UmapParams {
                n_components: 2,
                ..chosen.umap
            },
            seed,
        )
    };
    GridResult {
        chosen,
        chosen_index,
        score: scores[chosen_index].score,
        scores,
        labels,
        embedding_2d: (0..embedding_2d.rows())
            .map(|i| [embedding_2d.get(i, 0), embedding_2d.get(i, 1)])
            .collect(),
        seed,
        no_structure: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> PipelineConfig {
        PipelineConfig {
            pca_dims: 2,
            umap: UmapParams {
                n_neighbors: 5,
                min_dist: 0.0,
                n_components: 2,
            },
            hdbscan: HdbscanParams {
                min_cluster_size: 2,
                min_samples: 1,
            },
        }
    }

    #[test]
    fn score_applies_algorithm_1_penalties() {
        let e = Matrix::new(6, 1, vec![0.0, 0.1, 10.0, 10.1, 20.0, 50.0]).unwrap();
        let s = score_labels(config(), &e, &[0, 0, 1, 1, 2, -1]);
        assert_eq!(
            (s.n_clusters, s.tiny_penalty, s.few_penalty),
            (3, 0.10, 0.0)
        );
        assert!((s.noise_fraction - 1.0 / 6.0).abs() < 1e-12);
        let expected = s.silhouette.unwrap() - 0.25 / 6.0 - 0.10;
        assert!((s.score - expected).abs() < 1e-12);
        let all_noise = score_labels(config(), &e, &[-1; 6]);
        assert_eq!(all_noise.silhouette, None);
        assert!((all_noise.score - (-1.0 - 0.25 - 0.05)).abs() < 1e-12);
    }

    #[test]
    fn tiny_inputs_give_defined_results() {
        let grid = Grid {
            pca_dims: vec![5],
            n_neighbors: vec![15],
            min_dist: vec![0.1],
            n_components: vec![5],
            min_cluster_size: vec![5],
            min_samples: vec![5],
        };
        for n in [0usize, 1, 2, 4] {
            let x = Matrix::new(n, 3, (0..n * 3).map(|v| v as f64).collect()).unwrap();
            let r = run_grid(&x, &grid, 0);
            assert_eq!(r.labels, vec![-1; n]);
            assert_eq!(r.embedding_2d.len(), n);
            let reason = r.no_structure.unwrap();
            let want = if n == 0 {
                "no points"
            } else {
                "fewer than the smallest min_cluster_size (5)"
            };
            assert!(reason.contains(want), "{reason}");
        }
    }

    fn noise(n: usize, d: usize, seed: u64) -> Vec<f64> {
        use rand::SeedableRng;
        use rand_distr::{Distribution, StandardNormal};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        (0..n * d)
            .map(|_| StandardNormal.sample(&mut rng))
            .collect()
    }

    #[test]
    fn identical_points_have_no_structure() {
        let row = [0.3, -1.7, 2.5, 1e4];
        let data: Vec<f64> = (0..100).flat_map(|_| row).collect();
        let r = run_grid(&Matrix::new(100, 4, data).unwrap(), &Grid::default(), 42);
        assert!(r.no_structure.unwrap().starts_with("zero variance"));
        assert!(r.labels.iter().all(|&l| l == -1) && r.scores.is_empty());
    }

    #[test]
    fn points_on_a_line_have_no_structure() {
        // Unimodal 1-D noise, as a column and embedded along a direction of 8-D space.
        let t = noise(100, 1, 7);
        let r = run_grid(
            &Matrix::new(100, 1, t.clone()).unwrap(),
            &Grid::default(),
            42,
        );
        assert!(r.no_structure.unwrap().starts_with("rank-1"));
        let direction = [1.0, -2.0, 0.5, 3.0, 0.0, 1.0, 1.0, -1.0];
        let data: Vec<f64> = t
            .iter()
            .flat_map(|v| direction.map(|c| 5.0 + c * v))
            .collect();
        let x = Matrix::new(100, 8, data).unwrap();
        assert!(
            no_structure(&x, &Grid::default(), 42)
                .unwrap()
                .starts_with("rank-1")
        );
        // Two groups apart on a line are structure: one cluster each, in the column and
        // along the 8-D direction.
        let two: Vec<f64> = t
            .iter()
            .enumerate()
            .map(|(i, v)| v + if i % 2 == 0 { 0.0 } else { 20.0 })
            .collect();
        for x in [
            Matrix::new(100, 1, two.clone()).unwrap(),
            Matrix::new(
                100,
                8,
                two.iter()
                    .flat_map(|v| direction.map(|c| 5.0 + c * v))
                    .collect(),
            )
            .unwrap(),
        ] {
            let r = run_grid(&x, &Grid::default(), 42);
            assert_eq!(r.no_structure, None);
            let first = r.labels[0];
            assert!(r.labels.iter().step_by(2).all(|&l| l == first));
            assert!(
                r.labels.iter().skip(1).step_by(2).all(|&l| l == 1 - first),
                "{:?}",
                r.labels
            );
        }
        // Two directions of spread is not rank 1.
        let x = Matrix::new(100, 2, noise(100, 2, 8)).unwrap();
        assert_eq!(no_structure(&x, &Grid::default(), 42), None);
    }
}
