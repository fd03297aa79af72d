#include "model/decoder_graph.hpp"

#include "util/check.hpp"

namespace ember::model {
namespace {

GraphWeight weight(int layer, WeightId id, std::int64_t rows, std::int64_t cols,
                   std::vector<const GgufTensor*> sources) {
  return {{layer, id}, rows, cols, std::move(sources)};
}

// A matrix product of the graph: which matrix, from which activation into which, and whether it
// adds to what is there. wo and down feed the residual: straight into x, or through the
// architecture's post-norm first (written to h, normed and added in the next stage).
struct Product {
  WeightRef weight;
  Activation in, out;
  std::int64_t outputs = 0;  // the matrix's rows (layer_weights, head_weights)
  bool accumulate = false;
};

std::int64_t qkv_outputs(const ModelConfig& c) { return std::int64_t{c.heads + 2 * c.kv_heads} * c.head_dim; }

Product product(const ModelConfig& c, int l, Stage stage) {
  const Activation residual_out = c.post_norms ? Activation::h : Activation::x;
  // Post-LN: x is normed already (at the end of the previous stage), the branches read it.
  const Activation normed = c.norm_after_residual ? Activation::x : Activation::h;
  switch (stage) {
    case Stage::qkv: return {{l, WeightId::qkv}, normed, Activation::qkv, qkv_outputs(c)};
    case Stage::wo: return {{l, WeightId::wo}, Activation::attn, residual_out, c.embedding, !c.post_norms};
    case Stage::gate_up: return {{l, WeightId::gate_up}, normed, Activation::gate_up, c.gate_up_rows()};
    case Stage::down: return {{l, WeightId::down}, Activation::act, residual_out, c.embedding, !c.post_norms};
    case Stage::lm_head: return {{-1, WeightId::lm_head}, Activation::h, Activation::logits, c.vocab};
    default: return {};
  }
}

bool is_product(Stage s) {
  return s == Stage::qkv || s == Stage::wo || s == Stage::gate_up || s == Stage::down || s == Stage::lm_head;
}

// A routed layer runs its whole feed-forward (router, experts, weighted sum) in the gate_up
// stage; activation and down have nothing left to do.
bool routed_stage(const ModelConfig& c, int layer, Stage s) {
  return c.routed() && layer >= 0 && (s == Stage::gate_up || s == Stage::activation || s == Stage::down);
}

// The post-norm of a residual branch (in h), added into x.
void add_post_normed(const ModelConfig& c, int l, WeightId post_norm, DecoderOps& ops, std::int64_t rows) {
  if (!c.post_norms) return;
  ops.rmsnorm({l, post_norm}, Activation::h, Activation::h, rows);
  ops.add(Activation::h, Activation::x);
}

// Post-LN: a branch's bias, then the norm of x after its residual add.
void add_and_norm(int l, WeightId bias, WeightId norm, WeightId norm_bias, DecoderOps& ops, std::int64_t rows) {
  ops.add_bias({l, bias}, Activation::x);
  ops.layer_norm({l, norm}, {l, norm_bias}, Activation::x, Activation::x, rows);
}

// Pre-norm: out = norm(x) with the layer's weight (and bias for LayerNorm).
void pre_norm(const ModelConfig& c, WeightRef weight, WeightRef bias, Activation in, DecoderOps& ops,
              std::int64_t rows) {
  if (c.norm == NormKind::layer)
    ops.layer_norm(weight, bias, in, Activation::h, rows);
  else
    ops.rmsnorm(weight, in, Activation::h, rows);
}

RopeAngleSet angle_set(const ModelConfig& c, int layer) {
  return !c.uniform_rope() && c.sliding(layer) ? RopeAngleSet::sliding : RopeAngleSet::global;
}

// An encoder layer's weights (ModelConfig::norm_after_residual), in the order the graph reads them.
std::vector<GraphWeight> encoder_layer_weights(const LayerWeights& w, const ModelConfig& c, int layer) {
  const std::int64_t d = c.embedding, ffn = c.ffn, q_dim = std::int64_t{c.heads} * c.head_dim;
  return {weight(layer, WeightId::qkv, qkv_outputs(c), d, {w.wq, w.wk, w.wv}),
          weight(layer, WeightId::qkv_bias, 1, qkv_outputs(c), {w.bq, w.bk, w.bv}),
          weight(layer, WeightId::wo, d, q_dim, {w.wo}),
          weight(layer, WeightId::wo_bias, 1, d, {w.bo}),
          weight(layer, WeightId::attn_norm, 1, d, {w.attn_norm}),
          weight(layer, WeightId::attn_norm_bias, 1, d, {w.attn_norm_bias}),
          weight(layer, WeightId::gate_up, ffn, d, {w.w_up}),
          weight(layer, WeightId::gate_up_bias, 1, ffn, {w.b_up}),
          weight(layer, WeightId::down, d, ffn, {w.w_down}),
          weight(layer, WeightId::down_bias, 1, d, {w.b_down}),
          weight(layer, WeightId::ffn_norm, 1, d, {w.ffn_norm}),
          weight(layer, WeightId::ffn_norm_bias, 1, d, {w.ffn_norm_bias})};
}

}  // namespace

std::vector<GraphWeight> layer_weights(const DecoderTensors& t, const ModelConfig& c, int layer) {
  const LayerWeights& w = t.layers.at(static_cast<std::size_t>(layer));
  const std::int64_t d = c.embedding, ffn = c.ffn, hd = c.head_dim;
  const std::int64_t q_dim = std::int64_t{c.heads} * hd;
  std::vector<GraphWeight> out;
  if (c.norm_after_residual) return encoder_layer_weights(w, c, layer);
  out.push_back(weight(layer, WeightId::attn_norm, 1, d, {w.attn_norm}));
  // Fused in the file or not, Q|K|V and gate|up are one matrix each.
  out.push_back(weight(layer, WeightId::qkv, qkv_outputs(c), d,
                       w.wqkv != nullptr ? std::vector{w.wqkv} : std::vector{w.wq, w.wk, w.wv}));
  if (w.bq != nullptr) out.push_back(weight(layer, WeightId::qkv_bias, 1, qkv_outputs(c), {w.bq, w.bk, w.bv}));
  if (w.q_norm != nullptr) {  // per head, or (qk_norm_whole) over all of q and of k
    const std::int64_t kv_dim = std::int64_t{c.kv_heads} * hd;
    out.push_back(weight(layer, WeightId::q_norm, 1, c.qk_norm_whole ? q_dim : hd, {w.q_norm}));
    out.push_back(weight(layer, WeightId::k_norm, 1, c.qk_norm_whole ? kv_dim : hd, {w.k_norm}));
  }
  out.push_back(weight(layer, WeightId::wo, d, q_dim, {w.wo}));
  if (w.post_attn_norm != nullptr) out.push_back(weight(layer, WeightId::post_attn_norm, 1, d, {w.post_attn_norm}));
  out.push_back(weight(layer, WeightId::ffn_norm, 1, d, {w.ffn_norm}));
  if (c.routed()) {
    const std::int64_t f = c.expert_ffn;
    out.push_back(weight(layer, WeightId::router, c.experts, d, {w.router}));
    if (w.gate_experts.empty()) {
      out.push_back(weight(layer, WeightId::expert_gate_up, 2 * f, d, {w.gate_exps, w.up_exps}));
      out.push_back(weight(layer, WeightId::expert_down, d, f, {w.down_exps}));
    } else {
      std::vector<const GgufTensor*> gate_up = w.gate_experts;
      gate_up.insert(gate_up.end(), w.up_experts.begin(), w.up_experts.end());
      out.push_back(weight(layer, WeightId::expert_gate_up, 2 * f, d, std::move(gate_up)));
      out.push_back(weight(layer, WeightId::expert_down, d, f, w.down_experts));
    }
    for (GraphWeight* g : {&out[out.size() - 2], &out.back()}) {
      g->experts = c.experts;
      g->tensor_per_expert = !w.gate_experts.empty();
    }
    return out;
  }
  out.push_back(weight(layer, WeightId::gate_up, c.gate_up_rows(), d,
                       w.w_gate != nullptr ? std::vector{w.w_gate, w.w_up} : std::vector{w.w_up}));
  out.push_back(weight(layer, WeightId::down, d, ffn, {w.w_down}));
  if (w.post_ffn_norm != nullptr) out.push_back(weight(layer, WeightId::post_ffn_norm, 1, d, {w.post_ffn_norm}));
  return out;
}

std::vector<GraphWeight> head_weights(const DecoderTensors& t, const ModelConfig& c) {
  if (!c.has_lm_head) {
    const std::int64_t d = c.embedding;
    std::vector<GraphWeight> out{weight(-1, WeightId::embd_norm, 1, d, {t.embd_norm}),
                                 weight(-1, WeightId::embd_norm_bias, 1, d, {t.embd_norm_bias}),
                                 weight(-1, WeightId::position_embd, c.context_length, d, {t.position_embd})};
    if (t.token_types != nullptr)
      out.push_back(weight(-1, WeightId::token_types, t.token_types->rows(), d, {t.token_types}));
    return out;
  }
  return {weight(-1, WeightId::output_norm, 1, c.embedding, {t.output_norm}),
          weight(-1, WeightId::lm_head, c.vocab, c.embedding, {t.output})};
}

void begin_step(const ModelConfig& c, DecoderOps& ops) {
  ops.embed(c.embedding_scale);
  if (c.position_embeddings) {
    ops.add_position_embeddings({-1, WeightId::position_embd}, {-1, WeightId::token_types});
    return;  // no RoPE
  }
  ops.rope_angles(RopeAngleSet::global, c.rope_base, c.rope_position_scale());
  if (!c.uniform_rope()) {
    const int sliding_layer = 0;  // every sliding layer turns alike
    ops.rope_angles(RopeAngleSet::sliding, c.layer_rope_base(sliding_layer),
                    c.layer_rope_position_scale(sliding_layer));
  }
}

std::vector<SourceRows> expert_sources(const GraphWeight& w, int expert) {
  EMBER_ASSERT(w.experts > 0 && expert >= 0 && expert < w.experts);
  std::vector<SourceRows> out;
  if (w.tensor_per_expert) {
    for (std::size_t at = static_cast<std::size_t>(expert); at < w.sources.size();
         at += static_cast<std::size_t>(w.experts))
      out.push_back({w.sources[at], 0, w.sources[at]->rows()});
    return out;
  }
  for (const GgufTensor* t : w.sources) {
    const std::int64_t per_expert = t->rows() / w.experts;
    out.push_back({t, expert * per_expert, per_expert});
  }
  return out;
}

// Called for every row while experts are packed: no allocation (expert_sources makes a vector).
SourceRow expert_row(const GraphWeight& w, int expert, std::int64_t row) {
  const std::size_t step = w.tensor_per_expert ? static_cast<std::size_t>(w.experts) : 1;
  for (std::size_t at = w.tensor_per_expert ? static_cast<std::size_t>(expert) : 0; at < w.sources.size(); at += step) {
    const GgufTensor* t = w.sources[at];
    const std::int64_t per_expert = w.tensor_per_expert ? t->rows() : t->rows() / w.experts;
    if (row < per_expert) return {t, (w.tensor_per_expert ? 0 : expert * per_expert) + row};
    row -= per_expert;
  }
  EMBER_ASSERT(false);
  return {};
}

void DecoderOps::routed_feed_forward(int, FeedForward, Activation, Activation, bool, std::int64_t, std::int64_t) {
  fail(ErrorCode::unsupported, "this device does not run mixture-of-experts layers");
}

StageWork stage_work(const ModelConfig& c, int layer, Stage stage, std::int64_t rows) {
  if (routed_stage(c, layer, stage)) {
    if (stage != Stage::gate_up) return {StageWork::Split::whole, 0};
    return {StageWork::Split::slots, rows * c.experts_used, {layer, WeightId::expert_gate_up}};
  }
  if (stage == Stage::final_norm || stage == Stage::hidden_output || stage == Stage::lm_head) {
    if (rows == 0) return {StageWork::Split::whole, 0};  // no logits (or hidden states) wanted
    if (stage == Stage::lm_head && !c.has_lm_head) return {StageWork::Split::whole, 0};
    if (stage == Stage::hidden_output) return {};
  }
  if (is_product(stage)) {
    const Product p = product(c, layer, stage);
    return {StageWork::Split::outputs, p.outputs, p.weight};
  }
  if (stage == Stage::attention) return {StageWork::Split::rows, rows};
  if (stage == Stage::layer_end && !c.post_norms && !c.norm_after_residual) return {StageWork::Split::whole, 0};
  if (stage == Stage::attention_norm && c.norm_after_residual && layer > 0) return {StageWork::Split::whole, 0};
  return {};
}

void run_stage(const ModelConfig& c, int l, Stage stage, DecoderOps& ops, std::int64_t rows, std::int64_t begin,
               std::int64_t end) {
  using A = Activation;
  if (routed_stage(c, l, stage)) {
    if (stage == Stage::gate_up)
      ops.routed_feed_forward(l, c.feed_forward, A::h, c.post_norms ? A::h : A::x, !c.post_norms, begin, end);
    return;
  }
  if (is_product(stage)) {
    const Product p = product(c, l, stage);
    ops.linear_outputs(p.weight, p.in, p.out, rows, begin, end, p.accumulate);
    return;
  }
  switch (stage) {
    case Stage::attention_norm:
      if (c.norm_after_residual)  // the embeddings' norm, before layer 0 only
        ops.layer_norm({-1, WeightId::embd_norm}, {-1, WeightId::embd_norm_bias}, A::x, A::x, rows);
      else
        pre_norm(c, {l, WeightId::attn_norm}, {l, WeightId::attn_norm_bias}, A::x, ops, rows);
      return;
    case Stage::qkv_finish:
      if (c.attention_bias) ops.add_bias({l, WeightId::qkv_bias}, A::qkv);
      if (c.qk_norm) {
        ops.rmsnorm_heads({l, WeightId::q_norm}, QkvPart::q);
        ops.rmsnorm_heads({l, WeightId::k_norm}, QkvPart::k);
      }
      if (!c.position_embeddings) {
        ops.rope(QkvPart::q, angle_set(c, l));
        ops.rope(QkvPart::k, angle_set(c, l));
      }
      ops.store_kv(l);
      return;
    case Stage::attention: ops.attention(l, c.attention_window(l), c.attention_score_scale(), begin, end); return;
    case Stage::ffn_norm:
      if (c.norm_after_residual) {
        add_and_norm(l, WeightId::wo_bias, WeightId::attn_norm, WeightId::attn_norm_bias, ops, rows);
        return;
      }
      add_post_normed(c, l, WeightId::post_attn_norm, ops, rows);
      pre_norm(c, {l, WeightId::ffn_norm}, {l, WeightId::ffn_norm_bias}, A::x, ops, rows);
      return;
    case Stage::activation:
      if (c.linear_biases) ops.add_bias({l, WeightId::gate_up_bias}, A::gate_up);
      ops.gated_activation(c.feed_forward);
      return;
    case Stage::layer_end:
      if (c.norm_after_residual) {
        add_and_norm(l, WeightId::down_bias, WeightId::ffn_norm, WeightId::ffn_norm_bias, ops, rows);
        return;
      }
      add_post_normed(c, l, WeightId::post_ffn_norm, ops, rows);
      return;
    case Stage::final_norm:
      if (rows == 0) return;
      ops.gather_logit_rows();
      // An encoder's last norm ended its last layer.
      if (c.has_lm_head) ops.rmsnorm({-1, WeightId::output_norm}, A::logit_input, A::h, rows);
      return;
    case Stage::hidden_output:
      if (rows > 0) ops.write_hidden(c.has_lm_head ? A::h : A::logit_input);
      return;
    default: return;
  }
}

namespace {

// A stage at once; a product as one linear (the op calibration observes).
void run_whole(const ModelConfig& c, int layer, Stage stage, DecoderOps& ops, std::int64_t rows) {
  const StageWork work = stage_work(c, layer, stage, rows);
  if (work.units == 0) return;
  if (work.split != StageWork::Split::outputs) {
    run_stage(c, layer, stage, ops, rows, 0, work.units);
    return;
  }
  const Product p = product(c, layer, stage);
  ops.linear(p.weight, p.in, p.out, rows, p.accumulate);
}

}  // namespace

void run_layer(const ModelConfig& c, int l, DecoderOps& ops, std::int64_t rows) {
  for (const Stage stage : kLayerStages) run_whole(c, l, stage, ops, rows);
}

std::int64_t head_rows(Stage stage, std::int64_t logit_rows, std::int64_t hidden_rows) {
  switch (stage) {
    case Stage::final_norm: return logit_rows + hidden_rows;
    case Stage::hidden_output: return hidden_rows;
    default: return logit_rows;
  }
}

void run_head(const ModelConfig& c, DecoderOps& ops, std::int64_t logit_rows, std::int64_t hidden_rows) {
  for (const Stage stage : kHeadStages) run_whole(c, -1, stage, ops, head_rows(stage, logit_rows, hidden_rows));
}

void run_decoder(const ModelConfig& c, DecoderOps& ops, std::int64_t rows, std::int64_t logit_rows,
                 std::int64_t hidden_rows) {
  begin_step(c, ops);
  for (int l = 0; l < c.layers; ++l) run_layer(c, l, ops, rows);
  run_head(c, ops, logit_rows, hidden_rows);
}

void DecoderOps::layer_norm(WeightRef, WeightRef, Activation, Activation, std::int64_t) {
  fail(ErrorCode::unsupported, "this device has no LayerNorm op (encoder models run on the CPU)");
}

void DecoderOps::add_position_embeddings(WeightRef, WeightRef) {
  fail(ErrorCode::unsupported, "this device has no position-embedding op (encoder models run on the CPU)");
}

void DecoderOps::write_hidden(Activation) {
  fail(ErrorCode::unsupported, "this device cannot output hidden states (embeddings run on the CPU)");
}

}  // namespace ember::model
