// Synthetic Llama-family models: random weights (seeded) and a small but real byte-level BPE
// tokenizer (GPT-2 byte symbols + merges learned from a built-in English sample), so tests can
// run the whole pipeline without downloading a model.
#include "model_writer/gguf_writer.hpp"
#include "model_writer/splitmix_random.hpp"

#include "util/check.hpp"

#include <cctype>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <utility>

namespace ember::model {

const char* const kSmolLmChatTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

ModelConfig SyntheticModelSpec::tiny_config() {
  ModelConfig c;
  c.architecture = "llama";
  c.name = "ember-synthetic";
  c.layers = 2;
  c.embedding = 64;
  c.ffn = 128;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.rope_dims = 16;
  c.rope_base = 10000.0f;
  c.rms_eps = 1e-5f;
  c.context_length = 256;
  c.vocab = 512;
  c.tied_embeddings = true;
  return c;
}

ModelConfig SyntheticModelSpec::architecture_config(const std::string& name) {
  ModelConfig c = tiny_config();
  c.name = "ember-synthetic-" + name;
  c.context_length = 512;
  if (name == "llama3") {
    c.rope_base = 500000.0f;
    c.tied_embeddings = false;
    c.rope_freq_factors = llama3_rope_factors(c, 8.0f, 1.0f, 4.0f, 64);
  } else if (name == "qwen2") {
    c.architecture = "qwen2";
  } else if (name == "qwen3" || name == "gemma3") {
    c.architecture = name;
    c.head_dim = 32;
    c.rope_dims = 32;
    c.rope_base = 1000000.0f;
    if (name == "gemma3") {
      c.layers = 6;
      c.kv_heads = 1;
      c.rms_eps = 1e-6f;
      c.sliding_window = 8;
      c.sliding_window_pattern = 6;
    }
  } else if (name == "phi3" || name == "phi3_long") {
    // LongRoPE as Phi-3.5-mini ships it: two factor sets and an attention factor. "phi3" keeps
    // contexts under its original 4,096 (the short set); "phi3_long"'s original context of 64 is
    // below what the goldens run (128 tokens), so it turns by the long set.
    c.architecture = "phi3";
    // Not "phi3" in the name: llama.cpp then sets Phi-3's token attributes by text and needs a
    // "</s>" token the synthetic vocabulary lacks.
    c.name = name == "phi3" ? "ember-synthetic-p3" : "ember-synthetic-p3-long";
    c.tied_embeddings = false;
    c.rope_original_context = name == "phi3" ? 4096 : 64;
    for (int i = 0; i < c.rope_dims / 2; ++i) {
      c.rope_freq_factors.push_back(1.0f + 0.05f * static_cast<float>(i));
      c.rope_freq_factors_long.push_back(1.0f + 0.9f * static_cast<float>(i));
    }
    c.rope_attention_factor = 1.19f;
  } else if (name == "qwen3moe") {  // Qwen3-30B-A3B's form: qwen3 attention, normalized top-k
    c.architecture = name;
    c.head_dim = 32;
    c.rope_dims = 32;
    c.rope_base = 1000000.0f;
    c.rms_eps = 1e-6f;
    c.experts = 8;
    c.experts_used = 4;
    c.expert_ffn = 32;
  } else if (name == "olmoe") {  // OLMoE-1B-7B's form: q/k norms over whole q and k, untied,
    c.architecture = name;       // no grouped-query attention (llama.cpp's k norm is [width])
    c.kv_heads = c.heads;
    c.tied_embeddings = false;
    c.ffn = 64;
    c.experts = 8;
    c.experts_used = 3;
    c.expert_ffn = 64;
  } else if (name == "mixtral") {  // a llama file with experts, Mixtral's 8 x top-2 halved
    c.tied_embeddings = false;
    c.rope_base = 1000000.0f;
    c.ffn = 64;
    c.experts = 4;
    c.experts_used = 2;
    c.expert_ffn = 64;
  } else {
    fail(ErrorCode::invalid_argument,
         "no architecture test model '{}' (llama3, qwen2, qwen3, gemma3, phi3, phi3_long, qwen3moe, olmoe, mixtral)",
         name);
  }
  return c;
}

ModelConfig SyntheticModelSpec::default_model_config() {
  ModelConfig c = tiny_config();
  c.layers = 30;
  c.embedding = 576;
  c.ffn = 1536;
  c.heads = 9;
  c.kv_heads = 3;
  c.head_dim = 64;
  c.rope_dims = 64;
  c.rope_base = 100000.0f;
  c.vocab = 49152;
  c.context_length = 2048;
  return c;
}

std::vector<float> SyntheticModelSpec::llama3_rope_factors(const ModelConfig& config, float factor,
                                                           float low_freq_factor, float high_freq_factor,
                                                           int original_context) {
  const int dims = config.rope_dims != 0 ? config.rope_dims : config.head_dim;
  const double old_context = original_context;
  const double low_freq_wavelen = old_context / low_freq_factor;
  const double high_freq_wavelen = old_context / high_freq_factor;
  std::vector<float> factors;
  for (int i = 0; i < dims / 2; ++i) {
    const double freq = 1.0 / std::pow(static_cast<double>(config.rope_base), 2.0 * i / dims);
    const double wavelen = 2.0 * 3.14159265358979323846 / freq;
    if (wavelen < high_freq_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      factors.push_back(factor);
    } else {
      const double smooth = (old_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      factors.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth)));
    }
  }
  return factors;
}

namespace {

// The sample the merges are learned from: plain English of the kind a game's characters say.
constexpr const char* kSample =
    "The old keeper of the tower looked out over the village and the river. In the morning the "
    "people of the village went to the market to sell bread, fish and apples. The children "
    "played near the water while their mothers and fathers talked about the weather, the "
    "harvest and the new king. A traveller came to the inn and asked the keeper for a room and "
    "something to eat. The keeper said that there was a room under the roof and that the "
    "kitchen would have hot soup in the evening. The traveller thanked him and sat down by the "
    "fire. He told the people a story about a dragon that lived in the mountains to the north, "
    "and about the brave knight who went there to find it. Some of them laughed, but the "
    "children listened with wide eyes. When the story was over, the keeper brought more wood "
    "for the fire, and the people went home to their houses. The next day the traveller "
    "walked to the bridge, where he met a girl with a basket of flowers. She asked him where he "
    "was going, and he answered that he was looking for the road to the city. She showed him "
    "the way and wished him a good journey. You can ask me anything you want to know about the "
    "world, and I will try to help you as well as I can. What is your name? Where do you come "
    "from? How long have you been here? These are the questions that every visitor hears.";

// GPT-2's reversible byte -> printable symbol mapping: printable Latin-1 bytes map to
// themselves, the others to U+0100 and up, in byte order.
std::string byte_symbol(int b) {
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
  int cp = b;
  if (!printable) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174))) ++n;
    }
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return out;
}

// Words as the GPT-2 pre-tokenizer roughly splits them: an optional leading space followed by
// a run of letters, or by one other character.
std::map<std::vector<std::string>, int> sample_words() {
  std::map<std::vector<std::string>, int> words;
  const std::string text = kSample;
  std::size_t i = 0;
  while (i < text.size()) {
    std::vector<std::string> word;
    if (text[i] == ' ') word.push_back(byte_symbol(' ')), ++i;
    const std::size_t start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    if (i == start && i < text.size()) ++i;
    for (std::size_t k = start; k < i; ++k) word.push_back(byte_symbol(static_cast<unsigned char>(text[k])));
    ++words[word];
  }
  return words;
}

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  std::vector<std::string> merges;
};

// Byte-pair merges learned greedily (most frequent pair first, ties by the smaller pair) until
// `budget` tokens are added or every sample word is a single token.
void learn_merges(Vocabulary& v, int budget) {
  auto words = sample_words();
  std::set<std::string> known(v.tokens.begin(), v.tokens.end());
  while (budget > 0) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [word, count] : words) {
      for (std::size_t k = 0; k + 1 < word.size(); ++k) pairs[{word[k], word[k + 1]}] += count;
    }
    auto best = pairs.end();
    for (auto it = pairs.begin(); it != pairs.end(); ++it) {
      if (best == pairs.end() || it->second > best->second) best = it;
    }
    if (best == pairs.end()) break;
    const auto [a, b] = best->first;
    v.merges.push_back(a + " " + b);
    if (known.insert(a + b).second) {
      v.tokens.push_back(a + b);
      v.types.push_back(1);
      --budget;
    }
    std::map<std::vector<std::string>, int> merged;
    for (const auto& [word, count] : words) {
      std::vector<std::string> w;
      for (std::size_t k = 0; k < word.size(); ++k) {
        if (k + 1 < word.size() && word[k] == a && word[k + 1] == b) {
          w.push_back(a + b);
          ++k;
        } else {
          w.push_back(word[k]);
        }
      }
      merged[w] += count;
    }
    words = std::move(merged);
  }
}

Vocabulary make_vocabulary(int vocab) {
  Vocabulary v;
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    v.tokens.emplace_back(special);
    v.types.push_back(3);  // control
  }
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(byte_symbol(b));
    v.types.push_back(1);  // normal
  }
  learn_merges(v, vocab - static_cast<int>(v.tokens.size()));
  for (int n = 0; static_cast<int>(v.tokens.size()) < vocab; ++n) {
    v.tokens.push_back(fmt::format("<unused_{}>", n));
    v.types.push_back(5);  // unused
  }
  return v;
}

// Experts as the architecture takes them (ArchitectureTraits::experts, expert_ffn_key).
void check_experts(ModelConfig& c, const ArchitectureTraits& arch) {
  if (c.experts == 0) {
    if (arch.experts == 2) fail(ErrorCode::invalid_argument, "synthetic model: '{}' needs experts", c.architecture);
    return;
  }
  if (arch.experts == 0) fail(ErrorCode::invalid_argument, "synthetic model: '{}' has no experts", c.architecture);
  if (c.experts_used <= 0 || c.experts_used > c.experts)
    fail(ErrorCode::invalid_argument, "synthetic model: {} of {} experts used", c.experts_used, c.experts);
  if (c.expert_ffn == 0) c.expert_ffn = c.ffn;
  if (!arch.expert_ffn_key && c.expert_ffn != c.ffn)
    fail(ErrorCode::invalid_argument, "synthetic model: '{}' experts are feed_forward_length ({}) wide, not {}",
         c.architecture, c.ffn, c.expert_ffn);
  if (c.architecture == "olmoe" && c.tied_embeddings)
    fail(ErrorCode::invalid_argument, "synthetic model: olmoe files have output.weight (llama.cpp requires it)");
}

ModelConfig checked_config(const SyntheticModelSpec& spec) {
  ModelConfig c = spec.config;
  const ArchitectureTraits* arch = find_architecture(c.architecture);
  if (arch == nullptr) {
    fail(ErrorCode::invalid_argument, "synthetic model: architecture '{}' ({})", c.architecture,
         supported_architectures());
  }
  if (c.layers <= 0 || c.embedding <= 0 || c.ffn <= 0 || c.heads <= 0 || c.kv_heads <= 0 || c.context_length <= 0) {
    fail(ErrorCode::invalid_argument, "synthetic model: layers, widths, heads and context must be positive");
  }
  if (c.heads % c.kv_heads != 0) {
    fail(ErrorCode::invalid_argument, "synthetic model: {} heads, {} KV heads", c.heads, c.kv_heads);
  }
  if (c.head_dim == 0) c.head_dim = c.embedding / c.heads;
  if (c.rope_dims == 0) c.rope_dims = c.head_dim;
  // Heads normed on their own (Qwen3, Gemma 3) are wider or narrower than embedding / heads
  // (key_length says so).
  if (c.head_dim * c.heads != c.embedding && !arch->qk_norm) {
    fail(ErrorCode::invalid_argument, "synthetic model: embedding {} != {} heads x {}", c.embedding, c.heads,
         c.head_dim);
  }
  if (c.sliding_window > 0 && arch->sliding_window_pattern == 0) {
    fail(ErrorCode::invalid_argument, "synthetic model: architecture '{}' has no sliding layers", c.architecture);
  }
  if (c.vocab < 259) {
    fail(ErrorCode::invalid_argument, "synthetic model: vocab {} < 259 (3 specials + 256 bytes)", c.vocab);
  }
  if (!c.rope_freq_factors.empty() && static_cast<int>(c.rope_freq_factors.size()) != c.rope_dims / 2) {
    fail(ErrorCode::invalid_argument, "synthetic model: {} RoPE frequency factors for rope_dims {}",
         c.rope_freq_factors.size(), c.rope_dims);
  }
  if (!c.rope_freq_factors_long.empty() &&
      (c.rope_freq_factors_long.size() != c.rope_freq_factors.size() || c.architecture != "phi3")) {
    fail(ErrorCode::invalid_argument, "synthetic model: long RoPE factors need as many short ones, on phi3");
  }
  if (!(c.rope_scaling_factor > 0.0f)) {
    fail(ErrorCode::invalid_argument, "synthetic model: RoPE scaling factor {}", c.rope_scaling_factor);
  }
  check_experts(c, *arch);
  return c;
}

void write_metadata(GgufWriter& w, const ModelConfig& c, const Vocabulary& v) {
  const std::string a = c.architecture;
  w.set_string("general.architecture", a);
  w.set_string("general.name", c.name.empty() ? "ember-synthetic" : c.name);
  w.set_u32(a + ".block_count", static_cast<std::uint32_t>(c.layers));
  w.set_u32(a + ".context_length", static_cast<std::uint32_t>(c.context_length));
  w.set_u32(a + ".embedding_length", static_cast<std::uint32_t>(c.embedding));
  w.set_u32(a + ".feed_forward_length", static_cast<std::uint32_t>(c.ffn));
  w.set_u32(a + ".attention.head_count", static_cast<std::uint32_t>(c.heads));
  w.set_u32(a + ".attention.head_count_kv", static_cast<std::uint32_t>(c.kv_heads));
  w.set_f32(a + ".rope.freq_base", c.rope_base);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", c.rms_eps);
  w.set_u32(a + ".vocab_size", static_cast<std::uint32_t>(c.vocab));
  w.set_u32(a + ".rope.dimension_count", static_cast<std::uint32_t>(c.rope_dims));
  if (c.head_dim * c.heads != c.embedding) {
    w.set_u32(a + ".attention.key_length", static_cast<std::uint32_t>(c.head_dim));
    w.set_u32(a + ".attention.value_length", static_cast<std::uint32_t>(c.head_dim));
  }
  if (c.sliding_window > 0) {
    w.set_u32(a + ".attention.sliding_window", static_cast<std::uint32_t>(c.sliding_window));
    if (c.sliding_window_pattern > 0)
      w.set_u32(a + ".attention.sliding_window_pattern", static_cast<std::uint32_t>(c.sliding_window_pattern));
  }
  if (c.rope_scaling == RopeScaling::none) {
    w.set_string(a + ".rope.scaling.type", "none");
  } else if (c.rope_scaling_factor != 1.0f) {
    w.set_string(a + ".rope.scaling.type", "linear");
  }
  if (c.rope_scaling_factor != 1.0f) w.set_f32(a + ".rope.scaling.factor", c.rope_scaling_factor);
  if (c.rope_attention_factor != 1.0f) w.set_f32(a + ".rope.scaling.attn_factor", c.rope_attention_factor);
  if (c.rope_original_context != 0) {
    w.set_u32(a + ".rope.scaling.original_context_length", static_cast<std::uint32_t>(c.rope_original_context));
  }
  if (c.experts > 0) {
    w.set_u32(a + ".expert_count", static_cast<std::uint32_t>(c.experts));
    w.set_u32(a + ".expert_used_count", static_cast<std::uint32_t>(c.experts_used));
    if (find_architecture(a)->expert_ffn_key)
      w.set_u32(a + ".expert_feed_forward_length", static_cast<std::uint32_t>(c.expert_ffn));
  }
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "smollm");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  w.set_string_array("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.padding_token_id", 2);
  w.set_string("tokenizer.chat_template", kSmolLmChatTemplate);
}

// A routed layer's router and experts, with llama.cpp's names and 3-D shapes. The router is F32
// (llama.cpp's quantizer leaves ffn_gate_inp unquantized too) and four times the usual scale,
// so a row's experts are chosen by clear margins, not by rounding.
// With tensor_per_expert, each expert's matrices are tensors of their own, as older llama.cpp
// conversions wrote Mixtral (blk.N.ffn_gate.E.weight, ...): the same draws, so the same weights
// as the stacked file of the same seed (a Q4/Q8 block never spans two experts: rows are whole
// blocks).
void write_experts(GgufWriter& w, const ModelConfig& c, const std::string& p, GgmlType type, SplitMixRandom& rng,
                   bool tensor_per_expert) {
  const std::int64_t e = c.embedding, f = c.expert_ffn, n = c.experts;
  const auto values = [&rng](std::int64_t count, float a) { return [&rng, count, a] { return rng.values(count, a); }; };
  w.add_tensor(p + "ffn_gate_inp.weight", GgmlType::F32, {e, n}, values(e * n, 4.0f / std::sqrt(float(e))));
  const struct {
    const char* stacked;
    const char* per_expert;
    std::int64_t in, out;
  } parts[] = {
      {"ffn_gate_exps", "ffn_gate", e, f}, {"ffn_up_exps", "ffn_up", e, f}, {"ffn_down_exps", "ffn_down", f, e}};
  for (const auto& part : parts) {
    const float a = 1.0f / std::sqrt(static_cast<float>(part.in));
    const std::int64_t count = part.in * part.out;
    if (!tensor_per_expert) {
      w.add_tensor(p + part.stacked + ".weight", type, {part.in, part.out, n}, values(count * n, a));
      continue;
    }
    // The part's draw is made with its first expert's tensor and sliced for the others.
    auto drawn = std::make_shared<std::vector<float>>();
    for (std::int64_t x = 0; x < n; ++x) {
      w.add_tensor(fmt::format("{}{}.{}.weight", p, part.per_expert, x), type, {part.in, part.out},
                   [&rng, drawn, count, n, a, x] {
                     if (x == 0) *drawn = rng.values(count * n, a);
                     std::vector<float> slice(drawn->begin() + x * count, drawn->begin() + (x + 1) * count);
                     if (x == n - 1) *drawn = {};
                     return slice;
                   });
    }
  }
}

// Weights uniform in +-1/sqrt(fan_in) (unit-variance activations stay O(1) through the layers).
// Every random tensor is made when the file is written (GgufWriter's lazy add_tensor), in the
// order added: the same draws as making them here, a tensor in memory at a time.
void write_weights(GgufWriter& w, const ModelConfig& c, GgmlType type, SplitMixRandom& rng, bool tensor_per_expert) {
  const std::int64_t e = c.embedding, q = std::int64_t{c.heads} * c.head_dim;
  const std::int64_t kv = std::int64_t{c.kv_heads} * c.head_dim;
  const auto values = [&rng](std::int64_t count, float a, float center = 0.0f) {
    return [&rng, count, a, center] { return rng.values(count, a, center); };
  };
  auto matrix = [&](const std::string& name, std::int64_t in, std::int64_t out) {
    w.add_tensor(name, type, {in, out}, values(in * out, 1.0f / std::sqrt(static_cast<float>(in))));
  };
  auto norm = [&](const std::string& name, std::int64_t size) {
    w.add_tensor(name, GgmlType::F32, {size}, values(size, 0.1f, 1.0f));
  };
  const ArchitectureTraits& arch = *find_architecture(c.architecture);  // checked_config() checked
  // Not drawn from rng: a file with factors has the same weights as one without.
  // Phi-3 files carry LongRoPE's two sets instead of rope_freqs.weight.
  const bool long_rope = !c.rope_freq_factors_long.empty();
  if (!c.rope_freq_factors.empty()) {
    const auto pairs = static_cast<std::int64_t>(c.rope_freq_factors.size());
    w.add_tensor(long_rope ? "rope_factors_short.weight" : "rope_freqs.weight", GgmlType::F32, {pairs},
                 c.rope_freq_factors);
  }
  if (long_rope) {
    const auto pairs = static_cast<std::int64_t>(c.rope_freq_factors_long.size());
    w.add_tensor("rope_factors_long.weight", GgmlType::F32, {pairs}, c.rope_freq_factors_long);
  }
  w.add_tensor("token_embd.weight", type, {e, c.vocab}, values(e * c.vocab, 1.0f));
  norm("output_norm.weight", e);
  if (!c.tied_embeddings) matrix("output.weight", e, c.vocab);
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = fmt::format("blk.{}.", i);
    norm(p + "attn_norm.weight", e);
    if (arch.fused_gate_up) {  // phi3 files fuse Q|K|V too
      matrix(p + "attn_qkv.weight", e, q + 2 * kv);
    } else {
      matrix(p + "attn_q.weight", e, q);
      matrix(p + "attn_k.weight", e, kv);
      matrix(p + "attn_v.weight", e, kv);
    }
    matrix(p + "attn_output.weight", q, e);
    if (arch.attention_bias) {
      w.add_tensor(p + "attn_q.bias", GgmlType::F32, {q}, values(q, 0.1f));
      w.add_tensor(p + "attn_k.bias", GgmlType::F32, {kv}, values(kv, 0.1f));
      w.add_tensor(p + "attn_v.bias", GgmlType::F32, {kv}, values(kv, 0.1f));
    }
    if (arch.qk_norm) {
      norm(p + "attn_q_norm.weight", arch.qk_norm_whole ? q : c.head_dim);
      norm(p + "attn_k_norm.weight", arch.qk_norm_whole ? kv : c.head_dim);
    }
    if (arch.post_norms) {
      norm(p + "post_attention_norm.weight", e);
      norm(p + "post_ffw_norm.weight", e);
    }
    norm(p + "ffn_norm.weight", e);
    if (c.experts > 0) {
      write_experts(w, c, p, type, rng, tensor_per_expert);
      continue;
    }
    if (arch.fused_gate_up) {
      matrix(p + "ffn_up.weight", e, 2 * std::int64_t{c.ffn});
    } else {
      matrix(p + "ffn_gate.weight", e, c.ffn);
      matrix(p + "ffn_up.weight", e, c.ffn);
    }
    matrix(p + "ffn_down.weight", c.ffn, e);
  }
}

// The vocabulary and metadata of `spec`: a thinking model's file (reasoning_tokens) ends its
// vocabulary with Qwen3's <think> and </think>, then spec.control_tokens.
void write_spec_metadata(GgufWriter& w, const ModelConfig& c, const SyntheticModelSpec& spec) {
  std::vector<std::string> tail;
  if (spec.reasoning_tokens) tail = {"<think>", "</think>"};
  tail.insert(tail.end(), spec.control_tokens.begin(), spec.control_tokens.end());
  if (static_cast<int>(tail.size()) + 259 > c.vocab)
    fail(ErrorCode::invalid_argument, "synthetic model: vocab {} cannot hold {} more control tokens", c.vocab,
         tail.size());
  Vocabulary v = make_vocabulary(c.vocab - static_cast<int>(tail.size()));
  for (const std::string& marker : tail) {
    v.tokens.push_back(marker);
    v.types.push_back(3);  // control
  }
  write_metadata(w, c, v);
  if (!spec.chat_template.empty()) w.set_string("tokenizer.chat_template", spec.chat_template);
  if (spec.extras) spec.extras(w);
}

}  // namespace

std::vector<std::uint8_t> make_synthetic_model(const SyntheticModelSpec& spec) {
  const ModelConfig c = checked_config(spec);
  GgufWriter w;
  write_spec_metadata(w, c, spec);
  SplitMixRandom rng(spec.seed);
  write_weights(w, c, spec.weight_type, rng, spec.tensor_per_expert);
  return w.bytes();
}

void write_synthetic_model(const SyntheticModelSpec& spec, const std::string& path) {
  const ModelConfig c = checked_config(spec);
  GgufWriter w;
  write_spec_metadata(w, c, spec);
  SplitMixRandom rng(spec.seed);
  write_weights(w, c, spec.weight_type, rng, spec.tensor_per_expert);
  w.write(path);
}

}  // namespace ember::model
