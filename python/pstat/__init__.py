"""P-StaT (Perturbation Stability of Truth) from Python.

- :class:`SAwMIL` and :class:`MassMean`: the paper's truth probes on bags of token activations
  (one bag per statement), with scikit-learn conventions and numpy arrays in and out.
- :func:`stability`: retractions and expansions between a baseline and a perturbed belief set,
  with percentile bootstrap intervals.
- :func:`read_run`: the tables of a ``pstat run`` output folder.

The numerical work is pstat's Rust code (the same as the ``pstat`` command, which this package
also installs); it runs without holding the GIL.
"""

from importlib.metadata import PackageNotFoundError, version

from ._pstat import MassMean, SAwMIL, stability
from ._run import read_run

try:
    __version__ = version("pstat")
except PackageNotFoundError:  # imported from a source tree
    __version__ = "unknown"

__all__ = ["SAwMIL", "MassMean", "stability", "read_run", "__version__"]
