"""Hidden states and last-token logits of a Hugging Face folder computed by transformers, for
pstat's opt-in comparison (crates/pstat-lm/tests/hf_folder.rs, `transformers_agrees`).

Usage: python transformers_hidden.py FOLDER < ids.json > out.json
  ids.json: a JSON list of token-id lists. out.json: {"hidden": [[[...] per layer] per sequence],
  "logits": [[...] per sequence]}, where hidden[s][L] is transformers' hidden_states[L] of
  sequence s (0 = embeddings) for L < n_layers, all tokens, in f32; the last entry of
  transformers' hidden_states has the final norm applied and is not returned.
Needs torch and transformers.
"""

import json
import sys

import torch
from transformers import AutoModelForCausalLM


def main():
    model = AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    sequences = json.load(sys.stdin)
    out = {"hidden": [], "logits": []}
    with torch.no_grad():
        for ids in sequences:
            result = model(torch.tensor([ids]), output_hidden_states=True)
            states = result.hidden_states[:-1]
            out["hidden"].append([h[0].float().flatten().tolist() for h in states])
            out["logits"].append(result.logits[0, -1].float().tolist())
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
