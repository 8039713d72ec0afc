"""Shared fixtures: synthetic bags (signal in the last rows of positive bags, as in
tools/sawmil/reference.py) and the `pstat` command installed with the package."""

import json
import shutil
import struct

import numpy as np
import pytest


def synthetic_bags(seed, n_bags=80, dim=12, min_len=3, max_len=9, signal=3.0):
    direction = np.random.default_rng(0).normal(size=dim)  # the same truth for every seed
    direction /= np.linalg.norm(direction)
    rng = np.random.default_rng(seed)
    rows, offsets, y = [], [0], []
    for i in range(n_bags):
        n = int(rng.integers(min_len, max_len + 1))
        bag = rng.normal(size=(n, dim))
        label = 1 if i % 2 == 0 else -1
        if label == 1:
            bag[-int(rng.integers(1, 3)) :] += signal * direction
        rows.append(bag)
        offsets.append(offsets[-1] + n)
        y.append(label)
    x = np.concatenate(rows).astype(np.float32)
    return x, np.array(offsets, dtype=np.int64), np.array(y, dtype=np.int8)


def write_safetensors(path, tensors):
    """Minimal safetensors writer (little-endian, tensors in name order)."""
    codes = {np.float32: "F32", np.float16: "F16", np.int64: "I64", np.int8: "I8", np.uint8: "U8"}
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": codes[a.dtype.type],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for b in blobs:
            f.write(b)


@pytest.fixture(scope="session")
def bags():
    return synthetic_bags(seed=7)


@pytest.fixture(scope="session")
def pstat_cli():
    exe = shutil.which("pstat")
    if exe is None:
        pytest.fail("the `pstat` command is not on PATH: the wheel must ship it")
    return exe
