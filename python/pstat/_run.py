"""Reading a ``pstat run`` output folder (docs/outputs.md)."""

import csv
from pathlib import Path
from typing import Any, Dict, List, Optional, Union


def _pandas():
    try:
        import pandas
    except ImportError:
        return None
    return pandas


def _column(values: List[str]) -> List[Any]:
    """Typed column: ints if every non-empty cell is an int, else floats if every one is a
    number, else strings; empty cells are None (pandas reads them as NaN)."""
    present = [v for v in values if v != ""]
    for cast in (int, float):
        try:
            converted = [cast(v) for v in present]
        except ValueError:
            continue
        it = iter(converted)
        return [next(it) if v != "" else None for v in values]
    return [v if v != "" else None for v in values]


def _read_table(path: Path, pandas) -> Any:
    if pandas is not None:
        return pandas.read_csv(path)
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise ValueError(f"{path}: empty table (no header line)") from None
        rows = list(reader)
    for line, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise ValueError(
                f"{path}:{line}: {len(row)} fields, the header has {len(header)}"
            )
    return {name: _column([row[i] for row in rows]) for i, name in enumerate(header)}


def read_run(path: Union[str, Path], pandas: Optional[bool] = None) -> Dict[str, Any]:
    """The tables of a ``pstat run`` output folder, by name, and the probes it saved.

    Every ``*.csv`` at the top of the folder is returned under its stem: ``stability``,
    ``familiarity``, ``distances``, ``answers``, ``clusters``, ... (docs/outputs.md lists them and
    their columns). Each table is a pandas DataFrame when pandas is installed, otherwise a dict
    of column name -> list of values (ints, floats or strings; None for empty cells).

    Where the run trained probes, ``probes`` maps ``<model>/<domain>/<probe>/layer_<l>/<condition>``
    to the probe (:class:`SAwMIL` or :class:`MassMean`) retrained under that condition, loaded
    from its ``.probe.safetensors`` file.

    ``pandas=False`` forces the dicts; ``pandas=True`` requires pandas.

    Raises FileNotFoundError if the folder does not exist and ValueError if it holds no table.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such run folder")
    pd = None if pandas is False else _pandas()
    if pandas and pd is None:
        raise ImportError("read_run(pandas=True) needs pandas (pip install pandas)")
    tables = {p.stem: _read_table(p, pd) for p in sorted(folder.glob("*.csv"))}
    if not tables:
        raise ValueError(
            f"{folder}: no tables (*.csv) at the top; is it the --out folder of `pstat run`?"
        )
    probes = _probes(folder)
    if probes:
        tables["probes"] = probes
    return tables


_PROBE_SUFFIX = ".probe.safetensors"


def _probes(folder: Path) -> Dict[str, Any]:
    """Every probe the run saved, keyed by model/domain/probe/layer/condition."""
    from ._pstat import MassMean, SAwMIL

    probes = {}
    for path in sorted(folder.glob(f"*/*/representational/*/layer_*/*{_PROBE_SUFFIX}")):
        model, domain, _, probe, layer = path.relative_to(folder).parts[:5]
        condition = path.name[: -len(_PROBE_SUFFIX)]
        kind = SAwMIL if probe == "sawmil" else MassMean
        probes[f"{model}/{domain}/{probe}/{layer}/{condition}"] = kind.load(path)
    return probes
