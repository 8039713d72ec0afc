//! Ranking metrics for probe scores with ±1 labels.

/// ROC AUC (the Mann–Whitney statistic, ties count ½); `None` without both classes. This is
/// the veracity-layer criterion: how well a layer's probe separates the classes.
pub fn auc(scores: &[f32], labels: &[i8]) -> Option<f64> {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let n_pos = labels.iter().filter(|&&y| y == 1).count();
    let n_neg = labels.len() - n_pos;
    if n_pos == 0 || n_neg == 0 {
        return None;
    }
    // Sum of the positives' midranks.
    let mut rank_sum = 0.0;
    let mut start = 0;
    while start < idx.len() {
        let mut end = start;
        while end + 1 < idx.len() && scores[idx[end + 1]] == scores[idx[start]] {
            end += 1;
        }
        let midrank = (start + end) as f64 / 2.0 + 1.0;
        rank_sum += midrank * idx[start..=end].iter().filter(|&&i| labels[i] == 1).count() as f64;
        start = end + 1;
    }
    let (p, n) = (n_pos as f64, n_neg as f64);
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * n))
}

/// Average precision as sklearn's `average_precision_score` with positive label +1:
/// Σ_k (R_k − R_{k−1})·P_k over the distinct score thresholds, high to low. `None` without
/// positives.
pub fn average_precision(scores: &[f64], labels: &[i8]) -> Option<f64> {
    let n_pos = labels.iter().filter(|&&y| y == 1).count();
    if n_pos == 0 {
        return None;
    }
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let (mut tp, mut fp, mut ap, mut prev_recall) = (0usize, 0usize, 0.0, 0.0);
    let mut k = 0;
    while k < idx.len() {
        let t = scores[idx[k]];
        while k < idx.len() && scores[idx[k]] == t {
            if labels[idx[k]] == 1 {
                tp += 1
            } else {
                fp += 1
            }
            k += 1;
        }
        let recall = tp as f64 / n_pos as f64;
        ap += (recall - prev_recall) * tp as f64 / (tp + fp) as f64;
        prev_recall = recall;
    }
    Some(ap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_with_ties() {
        assert_eq!(auc(&[0.1, 0.4, 0.35, 0.8], &[-1, -1, 1, 1]), Some(0.75));
        assert_eq!(auc(&[0.5, 0.5], &[-1, 1]), Some(0.5));
        assert_eq!(auc(&[0.5], &[1]), None);
    }

    #[test]
    fn average_precision_matches_sklearn() {
        // sklearn: average_precision_score([0,0,1,1], [0.1,0.4,0.35,0.8]) = 0.8333…
        let ap = average_precision(&[0.1, 0.4, 0.35, 0.8], &[-1, -1, 1, 1]).unwrap();
        assert!((ap - 5.0 / 6.0).abs() < 1e-12);
        // A tie between a positive and a negative at the top: P = 1/2 at R = 1/2, then 2/3 at R = 1.
        let ap = average_precision(&[0.9, 0.9, 0.5], &[1, -1, 1]).unwrap();
        assert!((ap - (0.5 * 0.5 + 0.5 * 2.0 / 3.0)).abs() < 1e-12);
    }
}
