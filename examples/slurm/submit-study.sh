#!/bin/bash
# Submits a whole study: one GPU job per model (extraction, then its vLLM server), the CPU
# shards once every model is extracted and served, and the merge (docs/scale-out.md).
#
#   PSTAT_MODELS=models.txt PSTAT_CONFIG=study.toml PSTAT_ACTS=/shared/acts \
#   PSTAT_OUT=/shared/study PSTAT_HOME=/shared/pstat-home PSTAT_TOOLS=/shared/pstat \
#     examples/slurm/submit-study.sh 64
#
# study.toml must set `representational.activations = "$PSTAT_ACTS"` and fix the veracity
# layers (the paper's models get Table A3's); its `[behavioral.backends]` table is generated
# here from the servers' addresses once they are up.
set -euo pipefail
shards=${1:?usage: submit-study.sh SHARDS}
: "${PSTAT_MODELS:?}" "${PSTAT_CONFIG:?}" "${PSTAT_ACTS:?}" "${PSTAT_OUT:?}" "${PSTAT_HOME:?}"
here=$(dirname "$0")
export PSTAT_MODELS PSTAT_ACTS PSTAT_OUT PSTAT_HOME PSTAT_TOOLS

# Statements and token ids for every (model, domain); no model runs.
pstat activations export --config "$PSTAT_CONFIG" --out "$PSTAT_ACTS" --statements-only
n=$(grep -c . "$PSTAT_MODELS")
gpu=$(sbatch --parsable --array=0-$((n - 1)) "$here/pstat-model-gpu.sbatch")

# The shards start once every server has written its address (a short CPU job waits for them
# and writes the config the shards read).
config=$(sbatch --parsable --dependency=after:$gpu --time=12:00:00 --wrap "
  until [ \$(ls $PSTAT_OUT/.servers | grep -vc '^stop\$') -ge $n ]; do sleep 60; done
  { cat $PSTAT_CONFIG; echo; echo '[behavioral.backends]';
    for f in $PSTAT_OUT/.servers/*; do echo \"\\\"\$(basename \$f)\\\" = \\\"\$(cat \$f)\\\"\"; done
  } > $PSTAT_OUT.toml")
shards_job=$(PSTAT_CONFIG="$PSTAT_OUT.toml" sbatch --parsable --export=ALL \
  --dependency=afterok:$config --array=0-$((shards - 1)) "$here/pstat-array.sbatch")
# The merge, then the servers are let go.
sbatch --dependency=afterok:$shards_job --wrap "pstat merge $PSTAT_OUT && touch $PSTAT_OUT/.servers/stop"
