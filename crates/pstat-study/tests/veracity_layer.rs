//! The veracity-layer selection on a bundled model (pulled through the registry on first use):
//! the layer it chooses does not move when the training sample of the selection probes does.

use pstat_data::Domain;
use pstat_study::representational::select_layer;
use pstat_study::{LoadedModel, RunConfig, Silent, Study};

#[test]
fn the_selected_layer_is_stable_under_a_change_of_training_sample() {
    let out = tempfile::tempdir().unwrap();
    // 800 of City's ~1,800 calibration statements keep the test to a few minutes on 2 cores.
    let mut config = RunConfig::default();
    config.representational.selection_calibration = Some(800);
    let study = Study::open(config, out.path(), &mut Silent).unwrap();
    let model = LoadedModel::load("smollm2-135m-instruct", pstat_lm::Precision::F32).unwrap();
    let domain = Domain::CityLocations;
    let train = study.train_ids(domain);
    let n = study.config.representational.selection_statements;
    let samples = [
        study.stratified(domain, &train, n, "selection-train"),
        study.stratified(domain, &train, n, "another selection sample"),
    ];
    assert_ne!(samples[0], samples[1]);
    let [a, b] =
        samples.map(|sample| select_layer(&study, &model, domain, &sample, &mut Silent).unwrap());
    let curve = |c: &pstat_tables::LayerChoice| {
        c.scores
            .iter()
            .map(|s| format!("{}:{:.4}", s.layer, s.average_precision.unwrap_or(f64::NAN)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        a.veracity_layer,
        b.veracity_layer,
        "sample A: {}\nsample B: {}",
        curve(&a),
        curve(&b)
    );
    // The layer the selection chose is one of the scored candidates, and its neighbours exist.
    assert!((3..=model.lm.n_layers() - 2).contains(&a.veracity_layer));
    assert_eq!(a.scores.len(), model.lm.n_layers() - 4);
}
