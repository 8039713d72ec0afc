#!/usr/bin/env python3
"""Validate the curated Fictional word pairs (data/fictional/curated/word_pairs.csv).

Hard constraints (exit status 1 when any is violated):
  * header is exactly `word,relation,gloss,language,source`; no empty field;
  * relation in {instances, types, synonyms}; language in {Gobblefunk, Dothraki, Na'vi};
  * the fictional word is not an English word: it is compared case-insensitively, and also
    with diacritics folded (Na'vi ì/ä -> i/a), against the English list (Debian `wamerican`,
    /usr/share/dict/words) and against every extra list passed with --extra-dict;
  * the word is not (case-insensitively) a head word (object_1) of the real Word Definitions
    data (word_instances.csv, word_types.csv, word_synonyms.csv);
  * no duplicate row, at most one row per (word, relation), and a word's glosses differ across
    its relations;
  * the gloss is lower-case, has no leading article and does not contain the word itself;
  * only ASCII apostrophes in words (the canonical lexicons' spelling, ' not ’).

The paper excludes "fictional lexical items appearing in any natural language". The English list
is mandatory (it is what CI has); further languages are checked with --extra-dict, e.g.
  python3 tools/data/check_words.py --extra-dict /usr/share/dict/{ngerman,french,spanish,...}
which is how the shipped file was curated (see data/fictional/WORDS_SOURCE.md).

Prints counts per language x relation. Standard library only.
"""

import argparse
import csv
import sys
import unicodedata
from collections import Counter
from pathlib import Path

HEADER = ["word", "relation", "gloss", "language", "source"]
RELATIONS = ("instances", "types", "synonyms")
LANGUAGES = ("Gobblefunk", "Dothraki", "Na'vi")
REAL_WORD_FILES = ("word_instances.csv", "word_types.csv", "word_synonyms.csv")
ARTICLES = ("a ", "an ", "the ")


def fold(text: str) -> str:
    """Lower-case and strip diacritics, so 'Sìk' and 'sik' compare equal."""
    decomposed = unicodedata.normalize("NFD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def load_word_list(path: Path) -> set:
    """One word per line (Debian /usr/share/dict format); ISO-8859 lists are read leniently."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    words = set()
    for line in text.splitlines():
        entry = line.strip()
        if entry:
            words.add(entry.lower())
            words.add(fold(entry))
    return words


def load_real_heads(trilemma_dir: Path) -> set:
    heads = set()
    for name in REAL_WORD_FILES:
        with open(trilemma_dir / name, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                heads.add(row["object_1"].strip().lower())
    return heads


def word_variants(word: str) -> set:
    """Forms of a fictional word that must not be natural-language words."""
    lowered = word.lower()
    variants = {lowered, fold(word)}
    for joiner in ("-", " "):
        if joiner in lowered:
            variants.add(lowered.replace(joiner, ""))
    return variants


def check(rows, english, extra, real_heads):
    errors = []
    seen_rows = set()
    seen_word_relation = set()
    glosses_by_word = {}
    for line_no, row in rows:
        where = f"line {line_no}"
        if any(not (row.get(key) or "").strip() for key in HEADER):
            errors.append(f"{where}: empty field in {row}")
            continue
        word, relation, gloss = row["word"], row["relation"], row["gloss"]
        if word != word.strip() or gloss != gloss.strip():
            errors.append(f"{where}: surrounding whitespace in word/gloss {word!r}/{gloss!r}")
        if relation not in RELATIONS:
            errors.append(f"{where}: relation {relation!r} not in {RELATIONS}")
        if row["language"] not in LANGUAGES:
            errors.append(f"{where}: language {row['language']!r} not in {LANGUAGES}")
        if "\u2019" in word:
            errors.append(f"{where}: word {word!r} uses a typographic apostrophe; use '")
        variants = word_variants(word)
        if variants & english:
            errors.append(f"{where}: word {word!r} is an English word")
        for list_name, words in extra.items():
            if variants & words:
                errors.append(f"{where}: word {word!r} is a word of {list_name}")
        if word.lower() in real_heads:
            errors.append(f"{where}: word {word!r} is a real head word of the Trilemma data")
        if gloss != gloss.lower():
            errors.append(f"{where}: gloss {gloss!r} is not lower-case")
        if gloss.startswith(ARTICLES):
            errors.append(f"{where}: gloss {gloss!r} starts with an article (the template adds it)")
        if word.lower() in gloss.lower():
            errors.append(f"{where}: gloss {gloss!r} contains the word {word!r}")
        key = (word.lower(), relation, gloss)
        if key in seen_rows:
            errors.append(f"{where}: duplicate row {key}")
        seen_rows.add(key)
        if (word.lower(), relation) in seen_word_relation:
            errors.append(f"{where}: second {relation!r} row for {word!r}")
        seen_word_relation.add((word.lower(), relation))
        glosses_by_word.setdefault(word.lower(), []).append((line_no, gloss))
    for word, glosses in glosses_by_word.items():
        counts = Counter(gloss for _, gloss in glosses)
        for gloss, n in counts.items():
            if n > 1:
                errors.append(f"word {word!r}: gloss {gloss!r} repeated across relations")
    return errors


def main() -> int:
    root = Path(__file__).resolve().parents[2]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=Path, default=root / "data/fictional/curated/word_pairs.csv")
    parser.add_argument("--english", type=Path, default=Path("/usr/share/dict/words"))
    parser.add_argument("--extra-dict", type=Path, action="append", default=[],
                        help="further word list(s) (other languages, larger English lists)")
    parser.add_argument("--trilemma", type=Path, default=root / "data/trilemma")
    args = parser.parse_args()

    if not args.english.exists():
        print(f"error: English word list {args.english} not found "
              "(apt-get install wamerican)", file=sys.stderr)
        return 2
    english = load_word_list(args.english)
    extra = {str(path): load_word_list(path) for path in args.extra_dict}
    real_heads = load_real_heads(args.trilemma)

    with open(args.pairs, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames != HEADER:
            print(f"error: {args.pairs}: header {reader.fieldnames} != {HEADER}", file=sys.stderr)
            return 1
        rows = [(index + 2, row) for index, row in enumerate(reader)]

    errors = check(rows, english, extra, real_heads)
    for error in errors:
        print(f"error: {args.pairs}: {error}", file=sys.stderr)

    table = Counter((row["language"], row["relation"]) for _, row in rows)
    print(f"{'language':<12}" + "".join(f"{r:>11}" for r in RELATIONS) + f"{'total':>8}")
    for language in LANGUAGES:
        cells = [table[(language, r)] for r in RELATIONS]
        print(f"{language:<12}" + "".join(f"{c:>11}" for c in cells) + f"{sum(cells):>8}")
    totals = [sum(table[(lang, r)] for lang in LANGUAGES) for r in RELATIONS]
    print(f"{'total':<12}" + "".join(f"{c:>11}" for c in totals) + f"{sum(totals):>8}")
    print(f"distinct words: {len({row['word'].lower() for _, row in rows})}; "
          f"lists: {args.english}" + "".join(f", {p}" for p in args.extra_dict))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
