#!/usr/bin/env python3
"""Converts a llama-architecture GGUF (the default model) into CTranslate2 models.

    python benchmarks/peers/convert_ctranslate2.py --gguf FILE.gguf --out DIR

Writes DIR/int8 (weights saved as INT8, what the benchmarks run) and DIR/float32 (the check that
the conversion is right: its logits must match ember's fp32 path). The GGUF tensors are read and
dequantized with the `gguf` package and set on a ctranslate2.specs.TransformerDecoderModelSpec.

The GGUF stores the Q and K projections in the row order that llama.cpp's interleaved ("normal")
rotary embedding expects, so the spec uses rotary_interleave=True and takes them unchanged.
"""
import argparse
import os

import ctranslate2
import gguf
import numpy as np
from ctranslate2.specs import common_spec, transformer_spec


def read_gguf(path):
    """(metadata dict, {tensor name: float32 array in [out, in] layout})."""
    reader = gguf.GGUFReader(path)
    meta = {name: field.contents() for name, field in reader.fields.items()}
    tensors = {t.name: np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
               for t in reader.tensors}
    return meta, tensors


def make_spec(meta, tensors):
    arch = meta["general.architecture"]
    if arch != "llama":
        raise SystemExit(f"convert_ctranslate2: architecture {arch!r} is not supported (llama only)")
    layers = int(meta[f"{arch}.block_count"])
    spec = transformer_spec.TransformerDecoderModelSpec.from_config(
        layers, int(meta[f"{arch}.attention.head_count"]),
        activation=common_spec.Activation.SWISH, ffn_glu=True, rms_norm=True,
        rotary_dim=0, rotary_interleave=True,
        rotary_base=float(meta.get(f"{arch}.rope.freq_base", 10000.0)),
        num_heads_kv=int(meta[f"{arch}.attention.head_count_kv"]))
    decoder = spec.decoder
    decoder.scale_embeddings = False
    decoder.embeddings.weight = tensors["token_embd.weight"]
    decoder.layer_norm.gamma = tensors["output_norm.weight"]
    decoder.projection.weight = tensors.get("output.weight", tensors["token_embd.weight"])
    for i, layer in enumerate(decoder.layer):
        t = lambda name: tensors[f"blk.{i}.{name}.weight"]  # noqa: E731
        layer.self_attention.layer_norm.gamma = t("attn_norm")
        layer.self_attention.linear[0].weight = np.concatenate([t("attn_q"), t("attn_k"), t("attn_v")])
        layer.self_attention.linear[1].weight = t("attn_output")
        layer.ffn.layer_norm.gamma = t("ffn_norm")
        layer.ffn.linear_0.weight = t("ffn_gate")
        layer.ffn.linear_0_noact.weight = t("ffn_up")
        layer.ffn.linear_1.weight = t("ffn_down")
    return spec


def set_vocabulary(spec, meta):
    tokens = [str(token) for token in meta["tokenizer.ggml.tokens"]]
    spec.register_vocabulary(tokens)
    token = lambda key, default: tokens[int(meta.get(f"tokenizer.ggml.{key}_token_id", default))]  # noqa: E731
    spec.config.bos_token = token("bos", 1)
    spec.config.eos_token = token("eos", 2)
    spec.config.unk_token = token("unknown", 0)
    spec.config.layer_norm_epsilon = float(meta["llama.attention.layer_norm_rms_epsilon"])


def save(meta, tensors, out_dir, quantization):
    spec = make_spec(meta, tensors)
    set_vocabulary(spec, meta)
    spec.validate()
    spec.optimize(quantization=quantization)
    spec.save(out_dir)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    meta, tensors = read_gguf(args.gguf)
    for quantization in ("float32", "int8"):
        out_dir = os.path.join(args.out, quantization)
        os.makedirs(out_dir, exist_ok=True)
        save(meta, tensors, out_dir, quantization)
        print(f"convert_ctranslate2: {args.gguf} -> {out_dir} (ctranslate2 {ctranslate2.__version__})")


if __name__ == "__main__":
    main()
