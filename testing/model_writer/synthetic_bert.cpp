#include "model_writer/synthetic_bert.hpp"

#include "model_writer/gguf_writer.hpp"
#include "model_writer/splitmix_random.hpp"
#include "util/check.hpp"

#include <cmath>
#include <string_view>

namespace ember::model {
namespace {

// The vocabulary's special tokens come first, at these ids.
constexpr int kPad = 0, kUnknown = 1, kCls = 2, kSep = 3, kMask = 4;
constexpr std::string_view kCharacters = "abcdefghijklmnopqrstuvwxyz0123456789.,!?'-";
constexpr const char* kWords[] = {"the",   "is",    "of",    "and",  "to",    "in",   "dragon", "knight", "tower",
                                  "river", "where", "what",  "how",  "keys",  "door", "castle", "bread",  "paris",
                                  "city",  "map",   "found", "lost", "sleep", "ing",  "ed",     "er"};
// llama.cpp's WordPiece vocabulary form (its bert converter): a piece that starts a word carries
// U+2581, a continuation ("##x" in Hugging Face's) is bare.
constexpr std::string_view kWordStart = "\xE2\x96\x81";

struct BertVocab {
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
};

BertVocab make_vocab() {
  BertVocab v;
  for (const char* special : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
    v.tokens.emplace_back(special);
    v.types.push_back(3);  // control
  }
  for (const char c : kCharacters) {
    v.tokens.push_back(std::string(kWordStart) + c);
    v.tokens.emplace_back(1, c);
    v.types.insert(v.types.end(), 2, 1);  // normal
  }
  for (const char* word : kWords) {
    v.tokens.push_back(std::string(kWordStart) + word);
    v.types.push_back(1);
    if (std::string_view(word).size() <= 3) {  // suffix-like words also as continuations
      v.tokens.emplace_back(word);
      v.types.push_back(1);
    }
  }
  return v;
}

void check(const SyntheticBertSpec& s) {
  if (s.layers <= 0 || s.embedding <= 0 || s.ffn <= 0 || s.heads <= 0 || s.context <= 0 || s.embedding % s.heads != 0)
    fail(ErrorCode::invalid_argument, "synthetic bert: layers, widths, context positive, width a multiple of heads");
  if (s.classifier && s.classifier_outputs <= 0)
    fail(ErrorCode::invalid_argument, "synthetic bert: a head of {} outputs", s.classifier_outputs);
}

void write_metadata(GgufWriter& w, const SyntheticBertSpec& s, const BertVocab& v) {
  w.set_string("general.architecture", "bert");
  w.set_string("general.name", s.name);
  w.set_u32("bert.block_count", static_cast<std::uint32_t>(s.layers));
  w.set_u32("bert.context_length", static_cast<std::uint32_t>(s.context));
  w.set_u32("bert.embedding_length", static_cast<std::uint32_t>(s.embedding));
  w.set_u32("bert.feed_forward_length", static_cast<std::uint32_t>(s.ffn));
  w.set_u32("bert.attention.head_count", static_cast<std::uint32_t>(s.heads));
  w.set_f32("bert.attention.layer_norm_epsilon", 1e-12f);
  w.set_bool("bert.attention.causal", false);
  w.set_u32("bert.pooling_type", s.classifier ? 4u : 1u);  // rank or mean
  if (s.classifier) {
    std::vector<std::string> labels;
    for (int i = 0; i < s.classifier_outputs; ++i) labels.push_back(fmt::format("LABEL_{}", i));
    w.set_string_array("bert.classifier.output_labels", labels);
  }
  w.set_u32("tokenizer.ggml.token_type_count", 2);
  w.set_string("tokenizer.ggml.model", "bert");
  w.set_string("tokenizer.ggml.pre", "jina-v2-en");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  // What llama.cpp's converter writes for a BERT tokenizer.json ("[CLS] $A [SEP]" and the pair
  // "[CLS] $A [SEP] $B [SEP]"): CLS is BOS, SEP is EOS and the separator.
  w.set_u32("tokenizer.ggml.bos_token_id", kCls);
  w.set_u32("tokenizer.ggml.eos_token_id", kSep);
  w.set_u32("tokenizer.ggml.unknown_token_id", kUnknown);
  w.set_u32("tokenizer.ggml.seperator_token_id", kSep);
  w.set_u32("tokenizer.ggml.padding_token_id", kPad);
  w.set_u32("tokenizer.ggml.cls_token_id", kCls);
  w.set_u32("tokenizer.ggml.mask_token_id", kMask);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", true);
  w.set_bool("tokenizer.ggml.add_sep_token", false);
  w.set_bool("tokenizer.ggml.normalizer.lowercase", true);
}

// Matrices uniform in +-1/sqrt(fan_in), norm weights 1 +- 0.1, biases +-0.1.
void write_tensors(GgufWriter& w, const SyntheticBertSpec& s, std::int64_t vocab) {
  SplitMixRandom rng(s.seed);
  const std::int64_t e = s.embedding, f = s.ffn;
  const auto matrix = [&](const std::string& name, std::int64_t in, std::int64_t out) {
    w.add_tensor(name, s.type, {in, out}, rng.values(in * out, 1.0f / std::sqrt(static_cast<float>(in))));
  };
  const auto bias_or_norm = [&](const std::string& name, std::int64_t n, float a, float center = 0.0f) {
    w.add_tensor(name, GgmlType::F32, {n}, rng.values(n, a, center));
  };
  const auto norm = [&](const std::string& name) {
    bias_or_norm(name + ".weight", e, 0.1f, 1.0f);
    bias_or_norm(name + ".bias", e, 0.1f);
  };
  w.add_tensor("token_embd.weight", s.type, {e, vocab}, rng.values(e * vocab, 1.0f));
  w.add_tensor("token_types.weight", GgmlType::F32, {e, 2}, rng.values(e * 2, 0.5f));
  w.add_tensor("position_embd.weight", GgmlType::F32, {e, s.context}, rng.values(e * s.context, 0.5f));
  norm("token_embd_norm");
  for (int i = 0; i < s.layers; ++i) {
    const std::string p = fmt::format("blk.{}.", i);
    for (const char* qkv : {"attn_q", "attn_k", "attn_v"}) {
      matrix(p + qkv + ".weight", e, e);
      bias_or_norm(p + qkv + ".bias", e, 0.1f);
    }
    matrix(p + "attn_output.weight", e, e);
    bias_or_norm(p + "attn_output.bias", e, 0.1f);
    norm(p + "attn_output_norm");
    matrix(p + "ffn_up.weight", e, f);
    bias_or_norm(p + "ffn_up.bias", f, 0.1f);
    matrix(p + "ffn_down.weight", f, e);
    bias_or_norm(p + "ffn_down.bias", e, 0.1f);
    norm(p + "layer_output_norm");
  }
  if (!s.classifier) return;
  matrix("cls.weight", e, e);
  bias_or_norm("cls.bias", e, 0.1f);
  matrix("cls.output.weight", e, s.classifier_outputs);
  bias_or_norm("cls.output.bias", s.classifier_outputs, 0.1f);
}

GgufWriter make_writer(const SyntheticBertSpec& spec) {
  check(spec);
  const BertVocab v = make_vocab();
  GgufWriter w;
  write_metadata(w, spec, v);
  write_tensors(w, spec, static_cast<std::int64_t>(v.tokens.size()));
  return w;
}

}  // namespace

int synthetic_bert_vocab_size() { return static_cast<int>(make_vocab().tokens.size()); }

std::vector<std::uint8_t> make_synthetic_bert(const SyntheticBertSpec& spec) { return make_writer(spec).bytes(); }

void write_synthetic_bert(const SyntheticBertSpec& spec, const std::string& path) { make_writer(spec).write(path); }

}  // namespace ember::model
