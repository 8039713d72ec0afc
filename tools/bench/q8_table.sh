#!/usr/bin/env bash
# The f32 / q8 / llama.cpp table of docs/BENCHMARKS.md ("The q8 precision"): on the
# Llama-3.2-1B- and 3B-shaped Q4_K_M files of tools/bench/llama_shaped.py, each side (pstat f32,
# pstat q8, llama.cpp, and optionally an older `bench` binary in q8) runs in its own process,
# the sides interleaved within each repetition (so a change in the machine's load hits all of
# them), and tools/bench/q8_table.py prints the medians over repetitions of tok/s and tok/CPU-s
# of (a) prefill to the middle layer, (a) full-depth prefill and (b) scoring after a
# 100-statement context, peak resident memory, and the ratios to llama.cpp.
#
#   cargo build --release -p pstat-lm --example bench
#   tools/bench/q8_table.sh [--shapes "1b 3b"] [--reps 3] [--prefill 128] [--tests 100]
#       [--threads 2] [--out DIR] [--python PY] [--before OLD_BENCH_BINARY]
#
# Needs: a Python with llama_cpp (--python, default $PSTAT_LLAMA_VENV/bin/python), and to
# write missing model files the gguf package on its path and llama.cpp's
# ggml-vocab-llama-bpe.gguf in $PSTAT_LLAMA_VOCAB_DIR. Models are kept in --out.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
shapes="1b 3b"
reps=3
prefill=128
tests=100
threads=2
out=/var/tmp/pstat-q8-table
python="${PSTAT_LLAMA_VENV:-}/bin/python"
before=""
bench="${CARGO_TARGET_DIR:-$here/../../target}/release/examples/bench"
while [ $# -gt 0 ]; do
    case "$1" in
        --shapes) shapes="$2" ;;
        --reps) reps="$2" ;;
        --prefill) prefill="$2" ;;
        --tests) tests="$2" ;;
        --threads) threads="$2" ;;
        --out) out="$2" ;;
        --python) python="$2" ;;
        --before) before="$2" ;;
        --bench) bench="$2" ;;
        *) echo "q8_table.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift 2
done
[ -x "$bench" ] || { echo "q8_table.sh: no bench binary at $bench (cargo build --release -p pstat-lm --example bench)" >&2; exit 1; }
"$python" -c "import llama_cpp" || { echo "q8_table.sh: $python has no llama_cpp" >&2; exit 1; }
mkdir -p "$out"
for shape in $shapes; do
    model="$out/llama-$shape-shaped-q4_k_m.gguf"
    if [ ! -f "$model" ]; then
        vocab="${PSTAT_LLAMA_VOCAB_DIR:?set PSTAT_LLAMA_VOCAB_DIR to write the $shape model}/ggml-vocab-llama-bpe.gguf"
        "$python" "$here/llama_shaped.py" --shape "$shape" --vocab "$vocab" --out "$out/llama-$shape-shaped"
        rm -f "$out/llama-$shape-shaped-f16.gguf"
    fi
done
results="$out/results-$(date -u +%Y%m%dT%H%M%SZ).jsonl"
common=(--threads "$threads" --recompute 0 --prefill "$prefill" --tests "$tests")
{
    echo "# $(date -u) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) CPUs), threads $threads"
    echo "# load average at start: $(cat /proc/loadavg)"
} | tee "$results.log"
for rep in $(seq 1 "$reps"); do
    for shape in $shapes; do
        model="$out/llama-$shape-shaped-q4_k_m.gguf"
        for side in f32 q8 before llama; do
            log="$out/rep$rep-$shape-$side.log"
            case "$side" in
                f32|q8) "$bench" --model "$model" "${common[@]}" --precision "$side" --json "$results" >"$log" 2>&1 ;;
                before)
                    [ -n "$before" ] || continue
                    "$before" --model "$model" "${common[@]}" --precision q8 >"$log" 2>&1
                    "$python" "$here/q8_table.py" --parse-text "$log" --side "pstat q8 (before)" --model "$model" >>"$results" ;;
                llama) "$bench" --model "$model" "${common[@]}" --precision none --python "$python" --json "$results" >"$log" 2>&1 ;;
            esac
            echo "rep $rep $shape $side done $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$results.log"
        done
    done
done
"$python" "$here/q8_table.py" "$results" | tee "$results.md"
