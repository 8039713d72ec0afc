//! Building reports from synthetic run folders: every figure and table appears, the summary
//! is computed from the numbers, missing inputs are noted, output is reproducible.

mod fixture;

use pstat_report::{ReportError, build_report};

#[test]
fn full_run_folder_gives_every_figure_table_and_finding() {
    let dir = tempfile::tempdir().unwrap();
    fixture::write_run(dir.path());
    let report = build_report(dir.path()).unwrap();
    assert!(report.notes.is_empty(), "{:?}", report.notes);
    for id in [
        "fig2abc_bigrams",
        "fig2d_distances",
        "fig2e_familiarity",
        "fig3_retractions",
        "figA1_expansions",
        "figA4_layers",
        "figA5_k_baseline",
        "figA7_mass_mean",
        "figA0_layers",
        "clusters_smollm2-135m_city_locations",
    ] {
        for ext in ["svg", "png"] {
            let path = dir.path().join("figures").join(format!("{id}.{ext}"));
            assert!(path.is_file(), "missing {}", path.display());
            assert!(report.figures.contains(&path));
        }
    }
    let html = std::fs::read_to_string(&report.html).unwrap();
    // The report leads with what the run can and cannot show: each probe's noise floor against
    // its perturbations, the unmeasured behavioral spread, the cells where nothing follows.
    let limits = html.find("What this run can and cannot show").unwrap();
    assert!(limits < html.find("What this run shows").unwrap());
    assert!(html.contains(
        "sAwMIL · gemma3-270m · City Locations: 2 refits of the baseline probe with unchanged labels retract"
    ));
    assert!(html.contains("the resampling spread of the belief contexts was not measured"));
    assert!(html.contains(
        "behavioral · smollm2-135m · Word Definitions: nothing can be concluded — its baseline believes too few"
    ));
    // The summary reads the paired tests: Synthetic perturbs more than Fictional in the
    // fixture's behavioral cells but its 12-statement one, the count says which way, and the
    // families are per claim (6 cells each).
    assert!(
        html.contains("Synthetic (TF) − Fictional: significant in 5 of 6 cells: Synthetic (TF) &gt; Fictional in 5, &lt; in 0 (exact McNemar test, Holm within this family of 6"),
        "{html}"
    );
    // The across-model tables and the sign tests, per domain and pooled.
    for needle in [
        "table_paired",
        "table_across_models",
        "table_across_pairs",
        "all of synthetic_tf, synthetic_fi &gt; all of fictional, fictional_t",
        "larger in 2 of 2 models pooled over domains",
        "across models need at least 6 models with a direction",
    ] {
        assert!(html.contains(needle), "missing {needle}");
    }
    assert!(html.contains("Relabelled training bags"));
    // Resample/shuffle rows (ρ_R 0.99) never enter the main results.
    assert!(!html.contains("0.990"));
    // The baseline's refit is the noise floor of Fig. 3 (and A1, A7), never a condition of a
    // table or a summary line.
    assert!(!html.contains("baseline_refit"));
    let fig3 = std::fs::read_to_string(dir.path().join("figures/fig3_retractions.svg")).unwrap();
    assert!(fig3.contains("noise floor (baseline refit)"));
    assert!(html.contains("Grey line and band: the noise floor"));
    let fig_a4 = std::fs::read_to_string(dir.path().join("figures/figA4_layers.svg")).unwrap();
    assert!(!fig_a4.contains("noise floor"));
    // Tables A4/A5 and A6–A8 layouts, themes (escaped), provenance.
    for needle in [
        "Table A4 style",
        "Table A5 style",
        "Tables A6–A8 layout",
        "Lima &lt;OH&gt;",
        "a5fd3b62",
        "Synthetic (TF) is nearest to",
        "id=\"contents\"",
    ] {
        assert!(html.contains(needle), "missing {needle}");
    }
    assert_eq!(html.matches("<svg").count(), 10);
    assert!(!html.contains("<script") && !html.contains("src=\"http"));

    // Same inputs, same bytes.
    let again = build_report(dir.path()).unwrap();
    assert_eq!(std::fs::read_to_string(&again.html).unwrap(), html);
    let png = std::fs::read(dir.path().join("figures/fig3_retractions.png")).unwrap();
    build_report(dir.path()).unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("figures/fig3_retractions.png")).unwrap(),
        png
    );
}

#[test]
fn minimal_run_folder_notes_what_was_not_computed() {
    let dir = tempfile::tempdir().unwrap();
    fixture::write_minimal_run(dir.path());
    let report = build_report(dir.path()).unwrap();
    let html = std::fs::read_to_string(&report.html).unwrap();
    for missing in [
        "familiarity.csv",
        "distances.csv",
        "bigram_rank_frequency.csv",
        "themes.csv",
        "layers.json",
        "answers.csv",
    ] {
        assert!(
            html.contains(&format!("not computed in this run (no {missing})")),
            "no note for {missing}"
        );
    }
    assert!(html.contains("representational results: not computed in this run"));
    assert!(html.contains("Provenance: not recorded in this run (no manifest.json)"));
    assert!(dir.path().join("figures/fig3_retractions.svg").is_file());
    assert!(!dir.path().join("figures/fig2e_familiarity.svg").exists());
}

#[test]
fn bad_inputs_are_errors_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let err = build_report(dir.path()).unwrap_err();
    assert!(matches!(err, ReportError::Input { .. }));
    assert!(err.to_string().contains("stability.csv"), "{err}");

    fixture::write_minimal_run(dir.path());
    std::fs::write(
        dir.path().join("familiarity.csv"),
        "model,domain,kind,n,mean_object_token_prob,lo,hi\nm,city_locations,true,10,0.2,0.1,0.3\nm,city_locations,false,ten,0.2,,\n",
    )
    .unwrap();
    let err = build_report(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("familiarity.csv") && err.contains("line 3"),
        "{err}"
    );
}

#[test]
fn a_user_condition_shows_the_title_the_run_recorded() {
    use pstat_tables::{ConditionTitle, DECISIONS_FILE, Decisions, StabilityRow};
    let dir = tempfile::tempdir().unwrap();
    fixture::write_minimal_run(dir.path());
    let mut rows: Vec<StabilityRow> = pstat_tables::read_table(dir.path()).unwrap();
    let extra: Vec<StabilityRow> = rows
        .iter()
        .filter(|r| r.condition == "noise")
        .map(|r| StabilityRow {
            condition: "synthetic_all".into(),
            ..r.clone()
        })
        .collect();
    rows.extend(extra);
    pstat_tables::write_table(dir.path(), &rows).unwrap();
    let decisions = Decisions {
        conditions: vec![ConditionTitle {
            name: "synthetic_all".into(),
            title: "Synthetic (all kinds)".into(),
            compare_with: Vec::new(),
        }],
        formats: Vec::new(),
    };
    pstat_tables::write_json(&dir.path().join(DECISIONS_FILE), &decisions).unwrap();
    let report = build_report(dir.path()).unwrap();
    let html = std::fs::read_to_string(&report.html).unwrap();
    assert!(
        html.contains("Synthetic (all kinds)"),
        "no title in the tables"
    );
    let svg = std::fs::read_to_string(dir.path().join("figures/fig3_retractions.svg")).unwrap();
    assert!(svg.contains("Synthetic (all kinds)"), "no title in Fig. 3");
}
