#include "model/decoder_graph.hpp"

namespace ember::model {
namespace {

GraphWeight weight(int layer, WeightId id, std::int64_t rows, std::int64_t cols,
                   std::vector<const GgufTensor*> sources) {
  return {{layer, id}, rows, cols, std::move(sources)};
}

// Layer weights feed the residual through `id` (wo or down): straight into x, or through the
// architecture's post-norm first.
void residual(const ModelConfig& c, int layer, WeightId id, WeightId post_norm, Activation in,
              DecoderOps& ops, std::int64_t rows) {
  if (!c.post_norms) {
    ops.linear({layer, id}, in, Activation::x, rows, /*accumulate=*/true);
    return;
  }
  ops.linear({layer, id}, in, Activation::h, rows, /*accumulate=*/false);
  ops.rmsnorm({layer, post_norm}, Activation::h, Activation::h, rows);
  ops.add(Activation::h, Activation::x);
}

RopeAngleSet angle_set(const ModelConfig& c, int layer) {
  return !c.uniform_rope() && c.sliding(layer) ? RopeAngleSet::sliding : RopeAngleSet::global;
}

}  // namespace

std::vector<GraphWeight> layer_weights(const DecoderTensors& t, const ModelConfig& c, int layer) {
  const LayerWeights& w = t.layers.at(static_cast<std::size_t>(layer));
  const std::int64_t d = c.embedding, ffn = c.ffn, hd = c.head_dim;
  const std::int64_t q_dim = std::int64_t{c.heads} * hd, kv_dim = std::int64_t{c.kv_heads} * hd;
  std::vector<GraphWeight> out;
  out.push_back(weight(layer, WeightId::attn_norm, 1, d, {w.attn_norm}));
  // Fused in the file or not, Q|K|V and gate|up are one matrix each.
  out.push_back(weight(layer, WeightId::qkv, q_dim + 2 * kv_dim, d,
                       w.wqkv != nullptr ? std::vector{w.wqkv} : std::vector{w.wq, w.wk, w.wv}));
  if (w.bq != nullptr) out.push_back(weight(layer, WeightId::qkv_bias, 1, q_dim + 2 * kv_dim, {w.bq, w.bk, w.bv}));
  if (w.q_norm != nullptr) {
    out.push_back(weight(layer, WeightId::q_norm, 1, hd, {w.q_norm}));
    out.push_back(weight(layer, WeightId::k_norm, 1, hd, {w.k_norm}));
  }
  out.push_back(weight(layer, WeightId::wo, d, q_dim, {w.wo}));
  if (w.post_attn_norm != nullptr) out.push_back(weight(layer, WeightId::post_attn_norm, 1, d, {w.post_attn_norm}));
  out.push_back(weight(layer, WeightId::ffn_norm, 1, d, {w.ffn_norm}));
  out.push_back(weight(layer, WeightId::gate_up, 2 * ffn, d,
                       w.w_gate != nullptr ? std::vector{w.w_gate, w.w_up} : std::vector{w.w_up}));
  out.push_back(weight(layer, WeightId::down, d, ffn, {w.w_down}));
  if (w.post_ffn_norm != nullptr) out.push_back(weight(layer, WeightId::post_ffn_norm, 1, d, {w.post_ffn_norm}));
  return out;
}

std::vector<GraphWeight> head_weights(const DecoderTensors& t, const ModelConfig& c) {
  return {weight(-1, WeightId::output_norm, 1, c.embedding, {t.output_norm}),
          weight(-1, WeightId::lm_head, c.vocab, c.embedding, {t.output})};
}

void begin_step(const ModelConfig& c, DecoderOps& ops) {
  ops.embed(c.embedding_scale);
  ops.rope_angles(RopeAngleSet::global, c.rope_base, c.rope_position_scale());
  if (!c.uniform_rope()) {
    const int sliding_layer = 0;  // every sliding layer turns alike
    ops.rope_angles(RopeAngleSet::sliding, c.layer_rope_base(sliding_layer),
                    c.layer_rope_position_scale(sliding_layer));
  }
}

void run_layer(const ModelConfig& c, int l, DecoderOps& ops, std::int64_t rows) {
  using A = Activation;
  // Attention block.
  ops.rmsnorm({l, WeightId::attn_norm}, A::x, A::h, rows);
  ops.linear({l, WeightId::qkv}, A::h, A::qkv, rows, /*accumulate=*/false);
  if (c.attention_bias) ops.add_bias({l, WeightId::qkv_bias}, A::qkv);
  if (c.qk_norm) {
    ops.rmsnorm_heads({l, WeightId::q_norm}, QkvPart::q);
    ops.rmsnorm_heads({l, WeightId::k_norm}, QkvPart::k);
  }
  ops.rope(QkvPart::q, angle_set(c, l));
  ops.rope(QkvPart::k, angle_set(c, l));
  ops.store_kv(l);
  ops.attention(l, c.attention_window(l), c.attention_score_scale());
  residual(c, l, WeightId::wo, WeightId::post_attn_norm, A::attn, ops, rows);
  // Feed-forward block.
  ops.rmsnorm({l, WeightId::ffn_norm}, A::x, A::h, rows);
  ops.linear({l, WeightId::gate_up}, A::h, A::gate_up, rows, /*accumulate=*/false);
  ops.gated_activation(c.feed_forward);
  residual(c, l, WeightId::down, WeightId::post_ffn_norm, A::act, ops, rows);
}

void run_final_norm(const ModelConfig&, DecoderOps& ops, std::int64_t logit_rows) {
  ops.gather_logit_rows();
  ops.rmsnorm({-1, WeightId::output_norm}, Activation::logit_input, Activation::h, logit_rows);
}

void run_lm_head(const ModelConfig&, DecoderOps& ops, std::int64_t logit_rows, std::int64_t begin,
                 std::int64_t end) {
  if (logit_rows == 0) return;
  ops.linear_outputs({-1, WeightId::lm_head}, Activation::h, Activation::logits, logit_rows, begin, end);
}

void run_head(const ModelConfig& c, DecoderOps& ops, std::int64_t logit_rows) {
  if (logit_rows == 0) return;
  run_final_norm(c, ops, logit_rows);
  ops.linear({-1, WeightId::lm_head}, Activation::h, Activation::logits, logit_rows, /*accumulate=*/false);
}

void run_decoder(const ModelConfig& c, DecoderOps& ops, std::int64_t rows, std::int64_t logit_rows) {
  begin_step(c, ops);
  for (int l = 0; l < c.layers; ++l) run_layer(c, l, ops, rows);
  run_head(c, ops, logit_rows);
}

}  // namespace ember::model
