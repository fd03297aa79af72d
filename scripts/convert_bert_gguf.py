#!/usr/bin/env python3
"""Converts a Hugging Face BERT embedding model (safetensors + tokenizer.json) to GGUF.

Writes what llama.cpp's convert_hf_to_gguf.py writes for a BertModel (conversion/bert.py,
gguf-py's SpecialVocab): the same tensor names, the same types (F16 matrices; F32 vectors,
norms, position and token-type embeddings), the phantom-space vocabulary and the tokenizer
keys, with only the Python standard library: llama.cpp's converter needs torch and
transformers, which are far heavier than the model. The output is deterministic (same input,
same bytes), so scripts/fetch-model.sh can pin its sha256.

    python3 scripts/convert_bert_gguf.py MODEL_DIR OUT.gguf
"""
import json
import struct
import sys
from array import array
from pathlib import Path

GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_F16 = 0, 1
ALIGNMENT = 32
TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED = 1, 3, 4
POOLING = {"mean": 1, "cls": 2}  # llama.cpp's LLAMA_POOLING_TYPE_*


def read_safetensors(path):
    data = path.read_bytes()
    header_len = struct.unpack_from("<Q", data, 0)[0]
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__" or name.endswith("position_ids"):  # the converter drops it too
            continue
        if info["dtype"] != "F32":
            sys.exit(f"convert_bert_gguf: {name} is {info['dtype']}; only F32 checkpoints are supported")
        begin, end = info["data_offsets"]
        values = array("f")
        values.frombytes(data[base + begin:base + end])
        if sys.byteorder != "little":
            values.byteswap()
        tensors[name] = (info["shape"], values)
    return tensors


def tensor_map(layers):
    """HF name -> GGUF name (llama.cpp's gguf-py tensor_mapping for BERT)."""
    m = {
        "embeddings.word_embeddings.weight": "token_embd.weight",
        "embeddings.position_embeddings.weight": "position_embd.weight",
        "embeddings.token_type_embeddings.weight": "token_types.weight",
        "embeddings.LayerNorm.weight": "token_embd_norm.weight",
        "embeddings.LayerNorm.bias": "token_embd_norm.bias",
    }
    parts = {
        "attention.self.query": "attn_q",
        "attention.self.key": "attn_k",
        "attention.self.value": "attn_v",
        "attention.output.dense": "attn_output",
        "attention.output.LayerNorm": "attn_output_norm",
        "intermediate.dense": "ffn_up",
        "output.dense": "ffn_down",
        "output.LayerNorm": "layer_output_norm",
    }
    for layer in range(layers):
        for hf, gg in parts.items():
            for kind in ("weight", "bias"):
                m[f"encoder.layer.{layer}.{hf}.{kind}"] = f"blk.{layer}.{gg}.{kind}"
    return m


def keeps_f32(gguf_name, shape):
    return len(shape) <= 1 or gguf_name.endswith("_norm.weight") or gguf_name in (
        "position_embd.weight", "token_types.weight")


def vocab(model_dir):
    tok = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    if tok["model"]["type"] != "WordPiece":
        sys.exit("convert_bert_gguf: tokenizer.json is not a WordPiece tokenizer")
    by_id = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in by_id]
    if [i for _, i in by_id] != list(range(len(tokens))):
        sys.exit("convert_bert_gguf: the vocabulary ids are not 0..n-1")
    types = [TOKEN_NORMAL] * len(tokens)
    for added in tok.get("added_tokens", []):
        types[added["id"]] = TOKEN_CONTROL if added.get("special") else TOKEN_USER_DEFINED

    def phantom(text, kind):  # conversion/bert.py: words start with U+2581, "##" pieces lose it
        if kind == TOKEN_CONTROL:
            return text
        return text[2:] if text.startswith("##") else "\u2581" + text

    tokens = [phantom(t, k) for t, k in zip(tokens, types)]
    config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    ids = {t: i for i, t in enumerate(tokens)}

    def special(key):
        text = config.get(key)
        return ids.get(text) if isinstance(text, str) else None

    # SpecialVocab for a BERT tokenizer.json: CLS is also BOS, SEP also EOS; the template
    # "[CLS] $A [SEP]" adds both.
    specials = {"bos": special("cls_token"), "eos": special("sep_token"), "unknown": special("unk_token"),
                "seperator": special("sep_token"), "padding": special("pad_token"),
                "cls": special("cls_token"), "mask": special("mask_token")}
    lowercase = tok.get("normalizer", {}).get("lowercase")
    return tokens, types, specials, lowercase


class Writer:
    def __init__(self):
        self.kv = bytearray()
        self.count = 0

    @staticmethod
    def string(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def add(self, key, kind, value):
        self.kv += self.string(key) + struct.pack("<I", kind)
        if kind == GGUF_STRING:
            self.kv += self.string(value)
        elif kind == GGUF_U32:
            self.kv += struct.pack("<I", value)
        elif kind == GGUF_F32:
            self.kv += struct.pack("<f", value)
        elif kind == GGUF_BOOL:
            self.kv += struct.pack("<B", 1 if value else 0)
        self.count += 1

    def add_array(self, key, kind, values):
        self.kv += self.string(key) + struct.pack("<IIQ", GGUF_ARRAY, kind, len(values))
        if kind == GGUF_STRING:
            self.kv += b"".join(self.string(v) for v in values)
        elif kind == GGUF_I32:
            self.kv += struct.pack(f"<{len(values)}i", *values)
        self.count += 1


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    hp = json.loads((model_dir / "config.json").read_text())
    layers = hp["num_hidden_layers"]
    pooling = "mean"
    pooling_file = model_dir / "1_Pooling" / "config.json"
    if pooling_file.is_file():
        p = json.loads(pooling_file.read_text())
        pooling = "cls" if p.get("pooling_mode_cls_token") else "mean"
    tokens, types, specials, lowercase = vocab(model_dir)

    w = Writer()
    w.add("general.architecture", GGUF_STRING, "bert")
    w.add("general.type", GGUF_STRING, "model")
    w.add("general.name", GGUF_STRING, "all-MiniLM-L6-v2" if "MiniLM" in hp.get("_name_or_path", "") else "bert")
    w.add("bert.block_count", GGUF_U32, layers)
    w.add("bert.context_length", GGUF_U32, hp["max_position_embeddings"])
    w.add("bert.embedding_length", GGUF_U32, hp["hidden_size"])
    w.add("bert.feed_forward_length", GGUF_U32, hp["intermediate_size"])
    w.add("bert.attention.head_count", GGUF_U32, hp["num_attention_heads"])
    w.add("bert.attention.layer_norm_epsilon", GGUF_F32, hp["layer_norm_eps"])
    w.add("general.file_type", GGUF_U32, 1)  # mostly F16
    w.add("bert.attention.causal", GGUF_BOOL, False)
    w.add("bert.pooling_type", GGUF_U32, POOLING[pooling])
    w.add("tokenizer.ggml.token_type_count", GGUF_U32, hp.get("type_vocab_size", 1))
    w.add("tokenizer.ggml.model", GGUF_STRING, "bert")
    w.add("tokenizer.ggml.pre", GGUF_STRING, "jina-v2-en")
    w.add_array("tokenizer.ggml.tokens", GGUF_STRING, tokens)
    w.add_array("tokenizer.ggml.token_type", GGUF_I32, types)
    for name, tid in specials.items():
        if tid is not None:
            w.add(f"tokenizer.ggml.{name}_token_id", GGUF_U32, tid)
    w.add("tokenizer.ggml.add_bos_token", GGUF_BOOL, True)
    w.add("tokenizer.ggml.add_eos_token", GGUF_BOOL, True)
    w.add("tokenizer.ggml.add_sep_token", GGUF_BOOL, False)
    if lowercase is not None:
        w.add("tokenizer.ggml.normalizer.lowercase", GGUF_BOOL, bool(lowercase))

    names = tensor_map(layers)
    source = read_safetensors(model_dir / "model.safetensors")
    infos, blobs, offset = bytearray(), [], 0
    count = 0
    for hf_name, gg_name in names.items():
        if hf_name not in source:
            sys.exit(f"convert_bert_gguf: {hf_name} is missing from the checkpoint")
        shape, values = source[hf_name]
        f32 = keeps_f32(gg_name, shape)
        blob = values.tobytes() if f32 else struct.pack(f"<{len(values)}e", *values)
        dims = list(reversed(shape))  # ggml order: the innermost dimension first
        infos += Writer.string(gg_name) + struct.pack("<I", len(dims))
        infos += struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", GGML_F32 if f32 else GGML_F16, offset)
        pad = (-len(blob)) % ALIGNMENT
        blobs.append(blob + b"\0" * pad)
        offset += len(blob) + pad
        count += 1

    header = b"GGUF" + struct.pack("<IQQ", 3, count, w.count) + bytes(w.kv) + bytes(infos)
    header += b"\0" * ((-len(header)) % ALIGNMENT)
    tmp = out.with_suffix(out.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write(header)
        for blob in blobs:
            f.write(blob)
    tmp.replace(out)


if __name__ == "__main__":
    main()
