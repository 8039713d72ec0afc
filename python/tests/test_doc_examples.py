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


def examples():
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start("code"))
            yield pytest.param(
                match.group("code"), match.group("why"), id=f"{doc.relative_to(ROOT)}:{line}"
            )


def results_folder(path):
    """A run folder: the top-level tables and the probe docs/python.md loads."""
    import pstat

    path.mkdir()
    (path / "stability.csv").write_text(STABILITY)
    (path / "familiarity.csv").write_text(FAMILIARITY)
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
