"""Every ```python example of README.md and docs/*.md runs, so a broken example fails the build.

Each example runs on its own, in a fresh folder holding a small `results` run folder (the
tables of docs/outputs.md with their real columns, and one saved probe), the way a reader would
run it after `pstat run --out results`. An example that cannot run here says why in an HTML
comment on the line before its fence, `<!-- example not run: REASON -->`; it is reported as
skipped with that reason, never passed.
"""

import os
import re
from pathlib import Path

import pytest

from conftest import synthetic_bags
from test_read_run import FAMILIARITY, STABILITY

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"(?:<!-- example not run: (?P<why>.*?) -->\n)?```python\n(?P<code>.*?)```", re.S)


# The first rows of a `pstat run --quick` folder's comparisons.csv and across_models.csv.
COMPARISONS = """\
model,domain,instantiation,probe,k,baseline,format,layer,condition_a,condition_b,variant,n_baseline_true,retraction_rate_a,retraction_rate_b,difference,difference_lo,difference_hi,a_only,b_only,test,p_value,family,family_size,p_holm,significant,floor_difference,exceeds_floor
smollm2-135m-instruct,city_locations,representational,sawmil,,,,20,synthetic_tf,fictional,main,93,0.5161290322580645,0.17204301075268819,0.34408602150537637,0.20403225806451614,0.47338709677419366,40,8,mcnemar_exact,3.305266709219299e-6,representational/sawmil/synthetic_tf-vs-fictional/main,3,6.610533418438598e-6,true,0.4301075268817204,false
smollm2-135m-instruct,city_locations,representational,sawmil,,,,20,synthetic_tf,fictional_t,main,93,0.5161290322580645,0.44086021505376344,0.07526881720430108,-0.021505376344086023,0.17204301075268819,16,9,mcnemar_exact,0.22952294349670466,representational/sawmil/synthetic_tf-vs-fictional_t/main,3,0.4590458869934093,false,0.4301075268817204,false
smollm2-135m-instruct,city_locations,representational,sawmil,,,,20,synthetic_fi,fictional,main,93,0.46236559139784944,0.17204301075268819,0.2903225806451613,0.1932795698924731,0.3978494623655914,29,2,mcnemar_exact,4.6286731958389383e-7,representational/sawmil/synthetic_fi-vs-fictional/main,3,1.3886019587516814e-6,true,0.4301075268817204,false
smollm2-135m-instruct,city_locations,representational,sawmil,,,,20,synthetic_fi,fictional_t,main,93,0.46236559139784944,0.44086021505376344,0.021505376344086023,-0.03225806451612903,0.08602150537634409,5,3,mcnemar_exact,0.7265625000000008,representational/sawmil/synthetic_fi-vs-fictional_t/main,3,0.7265625000000008,false,0.4301075268817204,false
"""
ACROSS_MODELS = """\
domain,instantiation,probe,k,baseline,format,layer_offset,variant,condition,n_models,n_models_retraction,retraction_rate_mean,retraction_rate_median,n_models_expansion,expansion_rate_mean,expansion_rate_median,average_retraction_rank,average_expansion_rank,n_models_ranked_first_retraction,n_models_ranked_first_expansion
city_locations,behavioral,prompt,20,empty,plain,,main,synthetic_tf,1,1,0.0,0.0,1,1.0,1.0,1.0,1.0,1,1
city_locations,behavioral,prompt,20,empty,plain,,main,synthetic_fi,1,1,0.0,0.0,1,1.0,1.0,2.0,2.0,1,1
city_locations,behavioral,prompt,20,empty,plain,,main,fictional,1,1,0.0,0.0,1,1.0,1.0,3.0,3.0,1,1
city_locations,behavioral,prompt,20,empty,plain,,main,fictional_t,1,1,0.0,0.0,1,1.0,1.0,4.0,4.0,1,1
city_locations,behavioral,prompt,20,empty,plain,,main,noise,1,1,0.0,0.0,1,1.0,1.0,5.0,5.0,1,1
city_locations,representational,mass_mean,,,,0,main,synthetic_tf,1,1,0.17567567567567569,0.17567567567567569,1,0.23076923076923078,0.23076923076923078,3.0,3.0,0,0
"""


def examples():
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start("code"))
            yield pytest.param(
                match.group("code"), match.group("why"), id=f"{doc.relative_to(ROOT)}:{line}"
            )


def results_folder(path):
    """A run folder: the top-level tables the examples read and the probe docs/python.md loads."""
    import pstat

    path.mkdir()
    (path / "stability.csv").write_text(STABILITY)
    (path / "familiarity.csv").write_text(FAMILIARITY)
    (path / "comparisons.csv").write_text(COMPARISONS)
    (path / "across_models.csv").write_text(ACROSS_MODELS)
    (path / "config.toml").write_text("seed = 42\n")
    layer = path / "smollm2-135m-instruct/city_locations/representational/sawmil/layer_17"
    layer.mkdir(parents=True)
    x, offsets, y = synthetic_bags(seed=3)
    pstat.SAwMIL(C=1.0, search=False).fit(x, offsets, y).save(str(layer / "synthetic_tf.probe.safetensors"))


@pytest.mark.parametrize("code,why", list(examples()))
def test_example_runs(code, why, tmp_path, monkeypatch):
    if why:
        pytest.skip(why)
    # pandas is what the examples show; CI installs it, so there it must run.
    if os.environ.get("CI") != "true":
        pytest.importorskip("pandas")
    results_folder(tmp_path / "results")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "<example>", "exec"), {"__name__": "__example__"})


def test_every_document_has_been_searched():
    found = list(examples())
    assert len(found) >= 4, found
