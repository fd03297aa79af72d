// Hyper-parameters of a decoder and the description of its architecture, read from GGUF
// metadata and checked for consistency with the tensor shapes. An architecture is data: every
// backend runs the same layer (norm -> attention -> [post-norm] -> residual -> norm ->
// feed-forward -> [post-norm] -> residual) and reads here which variant of each part it is.
#pragma once

#include "model/gguf.hpp"
#include "util/rope_layout.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::model {

using ember::RopeLayout;  // util/rope_layout.hpp

// How positions are scaled before they become angles, from {arch}.rope.scaling.type. Only the
// kinds ember implements exist: a file naming another ("yarn", "longrope") is refused at open.
enum class RopeScaling {
  none,    // "none": positions as they are, whatever the factor says
  linear,  // "linear" (llama.cpp's default when the key is absent): positions / factor
};

// The feed-forward's activation: act(gate) * up, or act(up) where there is no gate.
enum class FeedForward {
  swiglu,  // silu(gate) * up: Llama, Qwen
  geglu,   // gelu(gate) * up, gelu's tanh approximation: Gemma
  gelu,    // gelu(up + up bias), no gate: BERT
};

// The norm of a layer: RMSNorm (a weight) or LayerNorm (mean removed; a weight and a bias).
enum class NormKind { rms, layer };

struct ModelConfig {
  std::string architecture;  // "llama", "qwen2", "qwen3", "gemma3", "phi3", "qwen3moe" or "olmoe"
  std::string name;
  int layers = 0;
  int embedding = 0;  // model width
  int ffn = 0;        // feed-forward hidden width
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;   // embedding / heads unless the file says otherwise
  int rope_dims = 0;  // rotated dimensions per head (== head_dim for these models)
  float rope_base = 10000.0f;
  RopeLayout rope_layout = RopeLayout::interleaved;
  // The RoPE frequencies, one description for every backend. Pair i (of rope_dims / 2) of a
  // head at `position` turns by
  //   theta_i = position * rope_position_scale() * rope_base^(-2i / rope_dims) / factor_i
  // as ggml's rope computes it (ggml_rope_cache_init divides theta by freq_factors[i], then
  // rope_yarn multiplies by freq_scale, with no YaRN ramp for linear scaling).
  RopeScaling rope_scaling = RopeScaling::linear;
  float rope_scaling_factor = 1.0f;  // {arch}.rope.scaling.factor; 1 when absent
  int rope_original_context = 0;     // {arch}.rope.scaling.original_context_length; 0 when
                                     // absent (only YaRN uses it, so it changes nothing here)
  // factor_i: the tensor rope_freqs.weight (Llama 3.1/3.2's frequency scaling, baked by the
  // converter), rope_dims / 2 positive values; empty when the file has none (all 1).
  std::vector<float> rope_freq_factors;
  // Phi-3's LongRoPE keeps two sets (rope_factors_short.weight, rope_factors_long.weight):
  // rope_freq_factors is the short set, for contexts up to rope_original_context, and
  // use_context() swaps in this long set for longer ones, as llama.cpp does per context.
  std::vector<float> rope_freq_factors_long;
  // {arch}.rope.scaling.attn_factor: llama.cpp multiplies every rotated cos and sin by it, so
  // q.k of fully rotated heads scales by its square (attention_score_scale()); 1 when absent.
  float rope_attention_factor = 1.0f;
  float rms_eps = 1e-5f;
  int context_length = 0;
  int vocab = 0;
  bool tied_embeddings = false;  // no output.weight: lm_head reuses token_embd
  bool attention_bias = false;   // qwen2: q/k/v projections carry a bias

  // ---- what differs between architectures ----
  bool qk_norm = false;        // qwen3, gemma3: an RMSNorm over each head of q and of k, before
                               // RoPE (attn_q_norm, attn_k_norm: [head_dim])
  bool qk_norm_whole = false;  // olmoe: the q/k norm spans all of q ([heads * head_dim]) and
                               // all of k ([kv_heads * head_dim]), not each head
  bool post_norms = false;     // gemma3: an RMSNorm of the attention output and of the
                               // feed-forward output before each residual add
                               // (post_attention_norm, post_ffw_norm: [embedding])
  FeedForward feed_forward = FeedForward::swiglu;
  bool fused_gate_up = false;    // phi3: ffn_up.weight holds gate|up ([embedding, 2 ffn]), no ffn_gate
  float embedding_scale = 1.0f;  // token embeddings are multiplied by it (Gemma: sqrt(width))
  // Sliding-window attention (gemma3): a sliding layer's query at position p sees the keys at
  // p - sliding_window < t <= p. Layer l slides unless (l + 1) is a multiple of
  // sliding_window_pattern; 0 = no layer slides.
  int sliding_window = 0;
  int sliding_window_pattern = 0;
  float rope_base_sliding = 0.0f;  // the RoPE base of sliding layers; 0 = rope_base
  // The factor on q.k before the softmax; 0 = 1/sqrt(head_dim). Gemma 3 27B's is
  // 1/sqrt(embedding / heads) (llama.cpp's f_attention_scale for its 62 layers).
  float attention_scale = 0.0f;
  // Mixture of experts (qwen3moe, olmoe, llama files with ffn_gate_inp): every layer's
  // feed-forward is routed. A row's router logits (ffn_gate_inp) go through a softmax over all
  // `experts`; the `experts_used` most probable run, each a SwiGLU of width expert_ffn, and
  // their outputs are summed weighted by their probabilities, divided by the probabilities'
  // sum when expert_weights_norm (llama.cpp's build_moe_ffn norm_w). 0 experts: dense.
  int experts = 0;
  int experts_used = 0;
  int expert_ffn = 0;
  bool expert_weights_norm = false;

  // ---- encoders (bert) ----
  bool causal = true;                // {arch}.attention.causal; false: a query sees its whole sequence (the
                                     // sequence is one step's rows)
  NormKind norm = NormKind::rms;     // rms_eps is the epsilon of either kind
  bool norm_after_residual = false;  // post-LN: x = norm(x + branch) with attn_norm and ffn_norm,
                                     // and the embeddings normed (embd_norm) before layer 0
  bool position_embeddings = false;  // learned absolute positions (position_embd) plus token
                                     // type 0 (token_types) added to the embeddings; no RoPE
  bool linear_biases = false;        // wo, up and down carry biases
  bool has_lm_head = true;           // false: an embedding model, hidden states only
  int pooling_type = -1;             // {arch}.pooling_type as llama.cpp numbers it (0 none,
                                     // 1 mean, 2 cls, 3 last, 4 rank); -1 when absent

  bool gated() const { return feed_forward != FeedForward::gelu; }
  // The rows of the gate_up matrix: gate|up, or up alone.
  std::int64_t gate_up_rows() const { return (gated() ? 2 : 1) * std::int64_t{ffn}; }
  bool routed() const { return experts > 0; }
  bool sliding(int layer) const {
    return sliding_window > 0 && sliding_window_pattern > 0 && (layer + 1) % sliding_window_pattern != 0;
  }
  // Keys a layer's queries see: sliding_window, or 0 (all earlier positions).
  int attention_window(int layer) const { return sliding(layer) ? sliding_window : 0; }

  // What positions are multiplied by: 1 / rope_scaling_factor for linear scaling, else 1.
  float rope_position_scale() const { return rope_scaling == RopeScaling::linear ? 1.0f / rope_scaling_factor : 1.0f; }
  // Layer l's RoPE: sliding layers have a base of their own and no position scaling (as
  // llama.cpp runs gemma3: rope_freq_base_train_swa, freq_scale_swa = 1).
  float layer_rope_base(int layer) const {
    return sliding(layer) && rope_base_sliding > 0.0f ? rope_base_sliding : rope_base;
  }
  float layer_rope_position_scale(int layer) const { return sliding(layer) ? 1.0f : rope_position_scale(); }
  // The factor on q.k the attention applies: attention_scale (or 1/sqrt(head_dim)) times the
  // square of the RoPE attention factor.
  float attention_score_scale() const;
  // Adapts the description to a context of `context` tokens (Phi-3: the long RoPE factors past
  // rope_original_context).
  void use_context(int context);
  // Whether every layer turns by the same angles (one set of angles per step serves them all).
  bool uniform_rope() const {
    return sliding_window == 0 || (rope_base_sliding == 0.0f && rope_position_scale() == 1.0f);
  }
};

// What each architecture's GGUF files leave unsaid: the parts of the layer that llama.cpp
// hard-codes per architecture (src/llama-model.cpp, src/llama-arch.cpp). read_model_config()
// copies them into the config; the synthetic-model writer writes the tensors they imply.
struct ArchitectureTraits {
  const char* name;
  RopeLayout rope_layout;
  bool attention_bias;
  bool qk_norm;
  bool post_norms;
  FeedForward feed_forward;
  bool scaled_embeddings;      // embeddings * sqrt(width)
  int sliding_window_pattern;  // when the file has no {arch}.attention.sliding_window_pattern;
                               // 0: the architecture has no sliding layers
  float rope_base_sliding;
  bool fused_gate_up = false;  // ffn_up holds gate|up (Phi-3)
  // Experts, as llama.cpp runs each architecture: `experts` 0 = never (dense), 1 = when the
  // file's {arch}.expert_count says so (llama: Mixtral), 2 = always (qwen3moe, olmoe).
  int experts = 0;
  bool expert_weights_norm = false;  // the top-k weights divided by their sum (norm_w)
  bool expert_ffn_key = false;       // the experts' width is {arch}.expert_feed_forward_length
                                     // (qwen3moe), else feed_forward_length (llama, olmoe)
  bool qk_norm_whole = false;        // olmoe: q/k norms over all of q and of k
  bool bert_encoder = false;         // BERT's encoder: bidirectional, post-LN LayerNorms with biases,
                                     // absolute position and token-type embeddings, GELU, biases
};

// The traits of `name` ("llama", "qwen2", ...), or nullptr for one ember does not run.
const ArchitectureTraits* find_architecture(std::string_view name);
// "llama, qwen2, ...": the architectures ember runs, for error messages.
std::string supported_architectures();

// Reads and validates the config. Throws Error(unsupported) for an architecture, a RoPE
// scaling type or a RoPE attention factor ember does not run (naming what it supports) and
// Error(invalid_model) for inconsistent values, a rope_freqs.weight of the wrong length or with
// a value that is not positive and finite among them.
ModelConfig read_model_config(const GgufFile& file);

}  // namespace ember::model
