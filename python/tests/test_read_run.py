"""read_run on a small run folder written with the real column names of docs/outputs.md."""

import os

import pytest

import pstat

STABILITY = """model,domain,instantiation,probe,k,baseline,format,layer,condition,resample,n_baseline_true,n_baseline_not_true,retractions,expansions,retraction_rate,retraction_rate_lo,retraction_rate_hi,expansion_rate,expansion_rate_lo,expansion_rate_hi,flag
smollm2-135m-instruct,city_locations,representational,sawmil,,,,15,synthetic_tf,,80,20,8,5,0.1,0.04,0.17,0.25,0.05,0.45,
smollm2-135m-instruct,city_locations,behavioral,prompt,20,empty,chat,,fictional,,12,88,3,10,0.25,0.0,0.5,0.11363636363636363,0.05,0.18,small_baseline
"""
FAMILIARITY = """model,domain,kind,n,mean_object_token_prob,lo,hi
smollm2-135m-instruct,city_locations,true,100,0.31,0.27,0.35
smollm2-135m-instruct,city_locations,synthetic_tf,100,0.02,0.01,0.03
"""


@pytest.fixture()
def run(tmp_path):
    (tmp_path / "stability.csv").write_text(STABILITY)
    (tmp_path / "familiarity.csv").write_text(FAMILIARITY)
    (tmp_path / "config.toml").write_text("seed = 42\n")
    return tmp_path


def test_tables_as_dicts_of_lists(run):
    tables = pstat.read_run(run, pandas=False)
    assert sorted(tables) == ["familiarity", "stability"]
    s = tables["stability"]
    assert s["instantiation"] == ["representational", "behavioral"]
    assert s["k"] == [None, 20]
    assert s["layer"] == [15, None]
    assert s["retraction_rate"] == [0.1, 0.25]
    assert s["flag"] == [None, "small_baseline"]
    assert tables["familiarity"]["n"] == [100, 100]


def test_tables_as_dataframes(run):
    # CI installs pandas: there the DataFrame path must run, not skip.
    pd = __import__("pandas") if os.environ.get("CI") == "true" else pytest.importorskip("pandas")
    tables = pstat.read_run(run)
    s = tables["stability"]
    assert isinstance(s, pd.DataFrame)
    assert len(s) == 2
    behavioral = s[s.instantiation == "behavioral"]
    assert behavioral.retraction_rate.item() == 0.25
    assert s.k.isna().tolist() == [True, False]


def test_not_a_run_folder(tmp_path):
    with pytest.raises(FileNotFoundError):
        pstat.read_run(tmp_path / "missing")
    with pytest.raises(ValueError, match="no tables"):
        pstat.read_run(tmp_path)
    (tmp_path / "stability.csv").write_text("a,b\n1,2\n3\n")
    with pytest.raises(ValueError, match="stability.csv:3: 1 fields, the header has 2"):
        pstat.read_run(tmp_path, pandas=False)


def test_saved_probes_are_loaded(run, tmp_path):
    from conftest import synthetic_bags

    x, offsets, y = synthetic_bags(1)
    unit = run / "m" / "city_locations" / "representational"
    saved = {}
    for probe, cls in (("sawmil", pstat.SAwMIL), ("mass_mean", pstat.MassMean)):
        folder = unit / probe / "layer_15"
        folder.mkdir(parents=True)
        model = cls(C=0.1, search=False) if probe == "sawmil" else cls()
        model.fit(x, offsets, y)
        model.save(folder / "synthetic_tf.probe.safetensors")
        saved[f"m/city_locations/{probe}/layer_15/synthetic_tf"] = model
    tables = pstat.read_run(run, pandas=False)
    assert sorted(tables["probes"]) == sorted(saved)
    for key, model in saved.items():
        again = tables["probes"][key]
        assert type(again) is type(model)
        assert (again.decision_function(x, offsets) == model.decision_function(x, offsets)).all()
