//! Ragged bags of instances: a bag is one statement, its instances are the statement's token
//! rows (every fed token, BOS and template tokens included, as upstream).

use crate::error::{Result, invalid};
use pstat_data::activations::Activations;

/// The upstream convention: the last two tokens of a bag are its known positives.
pub const KNOWN_POSITIVES: usize = 2;

/// The checks of [`Bags::new`] on borrowed rows, for callers that score bags in place
/// without copying them into a [`Bags`].
pub fn check_layout(dim: usize, values: &[f32], offsets: &[usize]) -> Result<()> {
    if dim == 0 {
        return invalid("bags: feature dimension is 0");
    }
    if !values.len().is_multiple_of(dim) {
        return invalid(format!(
            "bags: {} values is not a multiple of dim {dim}",
            values.len()
        ));
    }
    let rows = values.len() / dim;
    if offsets.first() != Some(&0) || offsets.last() != Some(&rows) {
        return invalid(format!(
            "bags: offsets must run from 0 to the {rows} instances, found first {:?} last {:?}",
            offsets.first(),
            offsets.last()
        ));
    }
    if let Some(i) = offsets.windows(2).position(|w| w[1] <= w[0]) {
        return invalid(format!("bags: bag {i} is empty or has decreasing offsets"));
    }
    if let Some(k) = values.iter().position(|v| !v.is_finite()) {
        return invalid(format!(
            "bags: instance {} feature {} is {}",
            k / dim,
            k % dim,
            values[k]
        ));
    }
    Ok(())
}

/// Bags stored without padding: bag i owns rows `offsets[i]..offsets[i+1]` of `values`.
#[derive(Debug, Clone, PartialEq)]
pub struct Bags {
    dim: usize,
    /// Row-major [instances, dim].
    values: Vec<f32>,
    /// Length bags + 1, starting at 0, non-decreasing.
    offsets: Vec<usize>,
}

impl Bags {
    /// Checks the ragged layout; every bag must hold at least one instance because a bag's
    /// score is a maximum (sAwMIL) or its last row (Mass-Mean).
    pub fn new(dim: usize, values: Vec<f32>, offsets: Vec<usize>) -> Result<Self> {
        check_layout(dim, &values, &offsets)?;
        Ok(Bags {
            dim,
            values,
            offsets,
        })
    }

    /// The statements `indices` of an activation cache, in that order.
    pub fn from_activations(acts: &Activations, indices: &[usize]) -> Result<Self> {
        let mut values = Vec::new();
        let mut offsets = vec![0];
        for &i in indices {
            if i >= acts.len() {
                return invalid(format!(
                    "statement index {i} out of range ({} statements)",
                    acts.len()
                ));
            }
            values.extend_from_slice(acts.statement(i));
            offsets.push(values.len() / acts.hidden);
        }
        Bags::new(acts.hidden, values, offsets)
    }

    /// Feature dimension of every instance row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of bags (statements).
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether there are no bags.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of instance rows over all bags.
    pub fn n_instances(&self) -> usize {
        self.values.len() / self.dim
    }

    /// Number of instance rows of bag i (at least 1). Panics if i ≥ [`Bags::len`].
    pub fn bag_len(&self, i: usize) -> usize {
        self.offsets[i + 1] - self.offsets[i]
    }

    /// Rows of bag i as a [n_i × dim] row-major slice.
    pub fn bag(&self, i: usize) -> &[f32] {
        &self.values[self.offsets[i] * self.dim..self.offsets[i + 1] * self.dim]
    }

    /// Instance rows of all bags, concatenated.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// Bag boundaries in rows: length [`Bags::len`] + 1, starting at 0, strictly increasing.
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// The bags `indices`, in that order.
    pub fn subset(&self, indices: &[usize]) -> Bags {
        let mut values = Vec::new();
        let mut offsets = vec![0];
        for &i in indices {
            values.extend_from_slice(self.bag(i));
            offsets.push(values.len() / self.dim);
        }
        Bags {
            dim: self.dim,
            values,
            offsets,
        }
    }
}

/// Bags with ±1 labels and, per instance, whether it is a known positive (sAwMIL's intra-bag
/// label; only read for positive bags).
#[derive(Debug, Clone)]
pub struct TrainingSet {
    /// The bags, one per statement.
    pub bags: Bags,
    /// Label of each bag, +1 or −1 (length = number of bags).
    pub labels: Vec<i8>,
    /// Per instance row, in row order of `bags`: whether it is a known positive (length = number
    /// of instances).
    pub known_positive: Vec<bool>,
}

impl TrainingSet {
    /// A training set; [`ProbeError::Invalid`](crate::ProbeError::Invalid) when the number of
    /// labels is not the number of bags, a label is not ±1, or the flags do not cover every
    /// instance.
    pub fn new(bags: Bags, labels: Vec<i8>, known_positive: Vec<bool>) -> Result<Self> {
        if labels.len() != bags.len() {
            return invalid(format!("{} labels for {} bags", labels.len(), bags.len()));
        }
        if let Some(i) = labels.iter().position(|&y| y != 1 && y != -1) {
            return invalid(format!(
                "label of bag {i} is {}, expected 1 or -1",
                labels[i]
            ));
        }
        if known_positive.len() != bags.n_instances() {
            return invalid(format!(
                "{} known-positive flags for {} instances",
                known_positive.len(),
                bags.n_instances()
            ));
        }
        Ok(TrainingSet {
            bags,
            labels,
            known_positive,
        })
    }

    /// The upstream convention: the last `k` tokens of every bag are its known positives.
    pub fn with_last_known(bags: Bags, labels: Vec<i8>, k: usize) -> Result<Self> {
        let mut known = Vec::with_capacity(bags.n_instances());
        for i in 0..bags.len() {
            let n = bags.bag_len(i);
            known.extend((0..n).map(|j| j + k >= n));
        }
        TrainingSet::new(bags, labels, known)
    }

    /// Number of bags.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no bags.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Known-positive flags of bag i.
    pub fn known(&self, i: usize) -> &[bool] {
        let o = self.bags.offsets();
        &self.known_positive[o[i]..o[i + 1]]
    }

    /// The bags `indices` with their labels and known-positive flags, in that order.
    pub fn subset(&self, indices: &[usize]) -> TrainingSet {
        TrainingSet {
            bags: self.bags.subset(indices),
            labels: indices.iter().map(|&i| self.labels[i]).collect(),
            known_positive: indices
                .iter()
                .flat_map(|&i| self.known(i).iter().copied())
                .collect(),
        }
    }

    /// Both classes must be present for any probe here.
    pub(crate) fn require_both_classes(&self, what: &str) -> Result<()> {
        let pos = self.labels.iter().filter(|&&y| y == 1).count();
        if pos == 0 || pos == self.len() {
            return invalid(format!(
                "{what}: needs positive and negative bags, found {pos} positive of {}",
                self.len()
            ));
        }
        Ok(())
    }
}
