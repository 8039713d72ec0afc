"""Fill an activation folder written by `pstat activations export --statements-only` with
Hugging Face transformers, for a run to read with `representational.activations`
(docs/activations.md).

Usage:
  python hf_extract.py --model HF_FOLDER_OR_ID --dir ACTIVATIONS [--layers 14,15,16]
                       [--device cuda] [--dtype bfloat16] [--batch-tokens 32768]
                       [--pstat path/to/pstat [--pstat-model NAME]]

For every `<model>/<domain>/export.json` under ACTIVATIONS (or ACTIVATIONS itself when it holds
one) it reads `statements.jsonl` and writes `layer_LL.safetensors` for the layers export.json
lists (or --layers): every token's hidden state `hidden_states[LL]` (the output of block LL, as
pstat counts layers; for the last block its output before the final norm, which transformers'
last `hidden_states` entry includes), in the same ragged format and with the same metadata pstat
writes, so that pstat checks them like its own files. For every `contextual/<context>/context.json`
of a cell (the contextual stage's belief contexts, for `contextual.activations`) it feeds each
listed statement with the context's tokens inserted at `insert_at` and writes the statement's
rows without the context's into that folder, with the context's token hash.

The model is fed exactly the token ids pstat feeds (statements.jsonl), never its own
tokenization. Before any forward pass the Hugging Face tokenizer of the folder must give the same
ids for every statement (the statement as the only user turn of the chat template without a
generation prompt for chat models; BOS + statement otherwise), and with --pstat the prompt text
transformers renders must give them through `pstat tokenize` too: a mismatch means the folder is
not the model the run uses (another tokenizer or template), and nothing is written.

The provenance pstat checks (model sha256, input format, data hash) is copied from export.json:
it names the model file pstat runs, which must hold the same weights as HF_FOLDER_OR_ID; the
tokenizer check is the guard against a different model, not a proof of the weights.

Only the requested layers are kept: a forward hook on each requested block takes its output,
and the deepest one ends the forward pass (later blocks and the LM head never run). Defaults:
bfloat16 on a GPU, float32 on the CPU. Statements go in batches of similar length (sorted by
length, at most --batch-tokens padded tokens per batch), right-padded, so padding never precedes
a real token under the causal mask; the memory a batch holds besides the weights is about
--batch-tokens × hidden × (requested layers + the model's working set of one block) values. Values are stored in f16 (f32 when one lies
beyond f16's range), as pstat's cache does.

Needs torch, transformers, numpy, safetensors and xxhash.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
import xxhash
from safetensors.numpy import save
from transformers import AutoModelForCausalLM, AutoTokenizer

F16_MAX = 65504.0
CONTENT_HASH = "content_xxh3"


def content_hash(data: bytes, metadata: dict) -> str:
    """xxh3-64 of a safetensors file's data section followed by its metadata entries in key
    order as `key\\0value\\0`, the content hash left out (pstat_data::activations)."""
    h = xxhash.xxh3_64()
    h.update(data)
    for key in sorted(metadata):
        if key != CONTENT_HASH:
            h.update(key.encode() + b"\0" + metadata[key].encode() + b"\0")
    return f"{h.intdigest():016x}"


def ragged_file(values: np.ndarray, lengths, token_ids, metadata: dict) -> bytes:
    """The bytes of one layer's activation file: `values` [tokens, hidden], `offsets` I64
    [statements + 1], `token_ids` U32 [tokens], metadata with the content hash."""
    stored = values.astype(np.float16) if np.abs(values).max(initial=0.0) <= F16_MAX else values
    tensors = {
        "values": np.ascontiguousarray(stored),
        "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        "token_ids": np.asarray(token_ids, dtype=np.uint32),
    }
    unhashed = save(tensors, metadata=metadata)
    header = int.from_bytes(unhashed[:8], "little")
    # The data section does not depend on the metadata, so its hash can be stored there.
    metadata = dict(metadata, **{CONTENT_HASH: content_hash(unhashed[8 + header :], metadata)})
    return save(tensors, metadata=metadata)


def hf_tokens(tokenizer, text: str, chat: bool):
    if chat:
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=True, add_generation_prompt=False
        )
        # Newer transformers return a BatchEncoding here.
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    return tokenizer(text, add_special_tokens=True)["input_ids"]


def check_tokenization(tokenizer, statements, chat: bool, cell: Path):
    bad = [s for s in statements if hf_tokens(tokenizer, s["text"], chat) != s["token_ids"]]
    if bad:
        first = bad[0]
        sys.exit(
            f"{cell / 'statements.jsonl'}: the Hugging Face tokenizer differs from pstat's on "
            f"{len(bad)} of {len(statements)} statements, e.g. {first['id']!r}: "
            f"{hf_tokens(tokenizer, first['text'], chat)} != {first['token_ids']}; "
            "is the folder the model of the run?"
        )


def check_with_pstat(pstat: str, pstat_model: str, tokenizer, statements, chat: bool, cell: Path):
    """The prompts as transformers renders them, tokenized by `pstat tokenize`: for a chat
    model the template's text with control tokens parsed (BOS added only where the template
    did not write it, as pstat does), else BOS + statement. Each must give pstat's ids, so the
    folder's chat template renders the prompt pstat feeds."""
    texts, flags = [], []
    for s in statements:
        if chat:
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": s["text"]}], tokenize=False, add_generation_prompt=False
            )
            bos = tokenizer.bos_token
            texts.append(text)
            flags.append(["--parse-special"] + (["--no-bos"] if bos and text.startswith(bos) else []))
        else:
            texts.append(s["text"])
            flags.append([])
    # One `pstat tokenize` call per set of flags, lines in statement order.
    ids = [None] * len(statements)
    for variant in {tuple(f) for f in flags}:
        which = [i for i, f in enumerate(flags) if tuple(f) == variant]
        lines = "".join(json.dumps(texts[i]) + "\n" for i in which)
        result = subprocess.run(
            [pstat, "tokenize", "--model", pstat_model, "--json", *variant],
            input=lines, capture_output=True, text=True, check=False,
        )
        if result.returncode != 0:
            sys.exit(f"pstat tokenize failed: {result.stderr.strip()}")
        for i, line in zip(which, result.stdout.splitlines()):
            ids[i] = json.loads(line)["ids"]
    bad = [s for s, got in zip(statements, ids) if got != s["token_ids"]]
    if bad:
        sys.exit(
            f"{cell / 'statements.jsonl'}: `pstat tokenize` of the prompt transformers renders "
            f"differs from the ids pstat feeds on {len(bad)} of {len(statements)} statements, "
            f"e.g. {bad[0]['id']!r}; the folder's chat template is not the model's"
        )


def batches(lengths, batch_tokens: int):
    """Statement indices in batches of similar length, at most `batch_tokens` padded tokens."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batch = []
    for i in order:
        if batch and (len(batch) + 1) * lengths[i] > batch_tokens:
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


class _Deepest(Exception):
    """Raised by the hook of the deepest requested block: nothing after it is computed."""


def extract(model, statements, layers, batch_tokens: int, device):
    """Per layer, each statement's [tokens, hidden] float32 rows, in statement order.

    Block L's output is `hidden_states[L]` (the last block's before the final norm, as pstat
    counts it). Hooks on the requested blocks keep their outputs, and the deepest one stops the
    forward pass, so neither later blocks nor the LM head run and no other layer is kept."""
    lengths = [len(s["token_ids"]) for s in statements]
    out = {l: [None] * len(statements) for l in layers}
    decoder = model.get_decoder()
    captured = {}
    deepest = max(layers)

    def hook(layer):
        def keep(_module, _inputs, output):
            captured[layer] = output[0] if isinstance(output, tuple) else output
            if layer == deepest:
                raise _Deepest

        return keep

    handles = [decoder.layers[l - 1].register_forward_hook(hook(l)) for l in layers]
    try:
        with torch.no_grad():
            for batch in batches(lengths, batch_tokens):
                width = max(lengths[i] for i in batch)
                ids = torch.zeros((len(batch), width), dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, i in enumerate(batch):
                    ids[row, : lengths[i]] = torch.tensor(statements[i]["token_ids"])
                    mask[row, : lengths[i]] = 1
                captured.clear()
                try:
                    decoder(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False)
                except _Deepest:
                    pass
                for l in layers:
                    states = captured[l].float().cpu().numpy()
                    for row, i in enumerate(batch):
                        out[l][i] = states[row, : lengths[i]]
    finally:
        for handle in handles:
            handle.remove()
    return out


def cells(root: Path):
    if (root / "export.json").exists():
        return [root]
    found = sorted(p.parent for p in root.glob("*/*/export.json"))
    if not found:
        sys.exit(f"{root}: no export.json (write it with `pstat activations export --statements-only`)")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="Hugging Face folder or hub id")
    parser.add_argument("--dir", required=True, type=Path, help="the activation folder")
    parser.add_argument("--layers", help="comma-separated layers (default: export.json's)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--batch-tokens", type=int, default=32768)
    parser.add_argument("--pstat", help="a pstat binary: also check the rendered prompts with `pstat tokenize`")
    parser.add_argument("--pstat-model", help="the model as pstat names it (registry name, GGUF or folder), for --pstat")
    args = parser.parse_args()
    dtype = args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32")

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=getattr(torch, dtype))
    model.to(args.device).eval()
    text_config = model.config.get_text_config()
    n_layers, hidden = text_config.num_hidden_layers, text_config.hidden_size
    for cell in cells(args.dir):
        export = json.loads((cell / "export.json").read_text())
        statements = [json.loads(line) for line in (cell / "statements.jsonl").open()]
        layers = [int(l) for l in args.layers.split(",")] if args.layers else export["layers"]
        if export["n_layers"] != n_layers or export["hidden"] != hidden:
            sys.exit(
                f"{cell / 'export.json'}: the run's model has {export['n_layers']} layers of "
                f"{export['hidden']}, {args.model} {n_layers} of {hidden}"
            )
        if any(not 1 <= l <= n_layers for l in layers):
            sys.exit(f"--layers: every layer must be in 1..={n_layers}")
        chat = export["input"].startswith("chat")
        check_tokenization(tokenizer, statements, chat, cell)
        if args.pstat:
            check_with_pstat(args.pstat, args.pstat_model or args.model, tokenizer, statements, chat, cell)
        states = extract(model, statements, layers, args.batch_tokens, args.device)
        extractor = f"transformers {transformers.__version__} {dtype} {args.device} {args.model}"
        write_layers(cell, export, statements, states, layers, {"extractor": extractor})
        by_id = {s["id"]: s for s in statements}
        for context_file in sorted((cell / "contextual").rglob("context.json")):
            context = json.loads(context_file.read_text())
            at, tokens = context["insert_at"], context["context_token_ids"]
            held_out = [by_id[i] for i in context["statements"]]
            whole = [
                {"id": s["id"], "token_ids": s["token_ids"][:at] + tokens + s["token_ids"][at:]}
                for s in held_out
            ]
            context_layers = [int(l) for l in args.layers.split(",")] if args.layers else context["layers"]
            rows = extract(model, whole, context_layers, args.batch_tokens, args.device)
            # The probe reads the statement's own rows: the context's are left out.
            kept = {
                l: [np.concatenate([r[:at], r[at + len(tokens):]]) for r in rows[l]]
                for l in context_layers
            }
            metadata = {
                "extractor": extractor,
                "context_tokens_sha256": context["context_tokens_sha256"],
                "context_tokens": str(len(tokens)),
            }
            write_layers(context_file.parent, export, held_out, kept, context_layers, metadata)


def write_layers(folder: Path, export: dict, statements, states, layers, extra: dict):
    """Writes `layer_LL.safetensors` in `folder` for every layer of `states` (per layer, each
    statement's rows), with export.json's provenance and the `extra` metadata."""
    token_ids = [t for s in statements for t in s["token_ids"]]
    lengths = [len(s["token_ids"]) for s in statements]
    for l in layers:
        metadata = {
            "statement_ids": json.dumps([s["id"] for s in statements]),
            "hidden": str(export["hidden"]),
            "model_sha256": export["model_sha256"],
            "input": export["input"],
            "data_hash": export["data_hash"],
            "layer": str(l),
            **extra,
        }
        values = np.concatenate(states[l]) if statements else np.zeros((0, export["hidden"]))
        path = folder / f"layer_{l:02d}.safetensors"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(ragged_file(values.astype(np.float32), lengths, token_ids, metadata))
        tmp.replace(path)
        print(path)

if __name__ == "__main__":
    main()
