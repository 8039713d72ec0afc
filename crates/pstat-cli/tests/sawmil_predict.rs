//! `pstat sawmil predict --activations` scores every statement of an activation file exactly as
//! a run judges it (`pstat_probe::perturbation::judge`), so a run's saved probes reproduce its
//! judgments.

use pstat_data::activations::{Activations, Precision};
use pstat_probe::perturbation::judge;
use pstat_probe::{Bags, ProbeParams, SawMilParams, TrainingSet};
use std::process::Command;

#[test]
fn predict_on_an_activation_file_reproduces_the_judgments() {
    let dir = tempfile::tempdir().unwrap();
    // 40 statements of 3 tokens in 4 dimensions; the first feature of the last token tells the
    // class, the rest is deterministic clutter.
    let mut acts = Activations::new(4);
    let mut labels = Vec::new();
    for i in 0..40 {
        let y: i8 = if i % 2 == 0 { 1 } else { -1 };
        let rows: Vec<f32> = (0..12)
            .map(|j| {
                let clutter = ((i * 7 + j * 3) % 11) as f32 / 11.0 - 0.5;
                if j == 8 {
                    f32::from(y) * 2.0 + clutter
                } else {
                    clutter
                }
            })
            .collect();
        acts.push(&format!("s{i}"), &[1, 2, 3], &rows);
        labels.push(y);
    }
    let file = dir.path().join("layer_05.safetensors");
    acts.write(&file, Precision::F32).unwrap();
    let acts = Activations::read(&file).unwrap();
    let bags = Bags::from_activations(&acts, &(0..acts.len()).collect::<Vec<_>>()).unwrap();
    let set = TrainingSet::with_last_known(bags, labels, 1).unwrap();
    let probe = SawMilParams::default().with_c(1.0).fit(&set).unwrap();
    let probe_file = dir.path().join("baseline.probe.safetensors");
    probe.save(&probe_file).unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_pstat"))
        .args(["sawmil", "predict", "--probe"])
        .arg(&probe_file)
        .arg("--activations")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let predicted: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let judged = judge(&probe, &acts, &acts.statement_ids).unwrap();
    assert_eq!(predicted.len(), judged.len());
    for (p, j) in predicted.iter().zip(&judged) {
        assert_eq!(p["id"], j.id.as_str());
        assert_eq!(p["score"].as_f64().unwrap() as f32, j.score);
        assert_eq!(p["label"] == 1, j.judged_true);
    }
    assert!(judged.iter().filter(|j| j.judged_true).count() > 10);

    // A probe of another width is refused with both files named.
    let mut narrow = Activations::new(3);
    narrow.push("s0", &[1], &[0.5, 0.5, 0.5]);
    let narrow_file = dir.path().join("narrow.safetensors");
    narrow.write(&narrow_file, Precision::F32).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_pstat"))
        .args(["sawmil", "predict", "--probe"])
        .arg(&probe_file)
        .arg("--activations")
        .arg(&narrow_file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("narrow.safetensors") && err.contains("expects 4"),
        "{err}"
    );
}
