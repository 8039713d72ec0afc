"""The ``pstat`` command of the Python package: runs the pstat binary shipped inside the wheel."""

import os
import sys
from pathlib import Path


def binary() -> Path:
    """Path of the bundled ``pstat`` executable."""
    return Path(__file__).resolve().parent / "bin" / "pstat"


def main() -> None:
    exe = binary()
    if not exe.is_file():
        sys.exit(
            f"pstat: {exe} is missing: this package was built without the pstat binary; "
            "build it with scripts/wheel in the pstat repository"
        )
    os.execv(exe, [str(exe), *sys.argv[1:]])
