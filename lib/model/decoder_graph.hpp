// The decoder's layer graph, written once for every architecture and every device. The graph
// reads the architecture from ModelConfig (which norms, which attention window and scale, which
// RoPE angles, which feed-forward activation) and asks a DecoderOps for each step of it; a
// device implements the ops over its own memory and weights and never needs to know which model
// it runs. One step of the graph over a batch of `rows` tokens:
//
//   x = embed(tokens) * embedding_scale
//   per layer:  h = rmsnorm(x, attn_norm);  qkv = h Wqkvᵀ [+ qkv_bias]
//               [q, k = rmsnorm of each head (q_norm, k_norm)];  q, k = rope(q, k)
//               store k, v in the KV cache;  attn = paged attention of q (window, scale)
//               x += [rmsnorm](attn Woᵀ)                       (post_attn_norm)
//               h = rmsnorm(x, ffn_norm);  gate_up = h Wgate_upᵀ;  act = act(gate) * up
//               x += [rmsnorm](act Wdownᵀ)                     (post_ffn_norm)
//                 or, in a routed (mixture-of-experts) layer, the same three steps per expert
//                 over the rows the router sends it, weighted: x += Σ_k w_k down_k(...)
//   logits = rmsnorm(x[logit rows], output_norm) W_lm_headᵀ
//   hidden = rmsnorm(x[hidden rows], output_norm)      (embedding sequences in the same step)
//
// An encoder (BERT: ModelConfig::norm_after_residual) is the same graph with attention that is
// not causal, LayerNorms after the residual adds instead of norms before the branches, learned
// position embeddings instead of RoPE, biases on every linear and an ungated GELU:
//
//   x = layernorm(embed(tokens) + position_embd[pos] + token_types[0], embd_norm)
//   per layer:  qkv = x Wqkvᵀ + qkv_bias;  store k, v;  attn = attention of q over the sequence
//               x = layernorm(x + attn Woᵀ + wo_bias, attn_norm)
//               x = layernorm(x + gelu(x Wupᵀ + up_bias) Wdownᵀ + down_bias, ffn_norm)
//   hidden = x[hidden rows]          (no lm_head, no logit rows)
#pragma once

#include "model/decoder_tensors.hpp"
#include "model/model_config.hpp"

#include <cstdint>
#include <vector>

namespace ember::model {

// The weights the graph reads. Q|K|V and gate|up are each one fused matrix, their rows stacked
// in that order (graph_weights() says from which tensors): one GEMM instead of three or two.
enum class WeightId {
  attn_norm,
  qkv,
  qkv_bias,
  q_norm,
  k_norm,
  wo,
  post_attn_norm,
  ffn_norm,
  gate_up,
  down,
  post_ffn_norm,
  router,          // a routed layer's ffn_gate_inp [experts, embedding]
  expert_gate_up,  // a routed layer's experts: gate|up of each, [2 expert_ffn, embedding] apiece
  expert_down,     // [embedding, expert_ffn] apiece
  output_norm,
  lm_head,  // the model's own, outside the layers (layer -1)
  // Encoders (bert): the biases of the norms after the residual adds and of the linears, and
  // (layer -1) the embeddings' norm and the position and token-type tables ([rows, embedding]).
  attn_norm_bias,
  ffn_norm_bias,
  wo_bias,
  gate_up_bias,
  down_bias,
  embd_norm,
  embd_norm_bias,
  position_embd,
  token_types,
};

inline constexpr int kWeightIdCount = static_cast<int>(WeightId::token_types) + 1;

struct WeightRef {
  int layer = -1;
  WeightId id = WeightId::attn_norm;
  bool operator==(const WeightRef&) const = default;
};

// A device's weights (of type T) found by WeightRef, for a model of `layers` layers.
template <class T>
class WeightTable {
 public:
  WeightTable() = default;
  explicit WeightTable(int layers) : slots_(static_cast<std::size_t>(layers + 1) * kWeightIdCount) {}
  T& operator[](WeightRef r) { return slots_.at(index(r)); }
  const T& operator[](WeightRef r) const { return slots_.at(index(r)); }

 private:
  static std::size_t index(WeightRef r) {
    return static_cast<std::size_t>(r.layer + 1) * kWeightIdCount + static_cast<std::size_t>(r.id);
  }
  std::vector<T> slots_;
};

// One weight of the graph: what it is, its shape ([rows, cols]; a vector has rows == 1) and the
// file's tensors it is made of, stacked row-wise. An expert weight is `experts` matrices of
// [rows, cols]; its sources are 3-D, and expert e's rows are rows [e * r, (e + 1) * r) of each
// source of r rows a expert (expert_row()). With tensor_per_expert (Mixtral-style files of older
// conversions) its sources are 2-D instead, each part's experts in order (gate_0 .. gate_n-1,
// then up_0 .. up_n-1): stacked row-wise, the same rows as the 3-D tensors give.
struct GraphWeight {
  WeightRef ref;
  std::int64_t rows = 0, cols = 0;
  std::vector<const GgufTensor*> sources;
  int experts = 0;  // 0: one matrix or vector
  bool tensor_per_expert = false;
  bool is_matrix() const {
    return ref.id == WeightId::qkv || ref.id == WeightId::wo || ref.id == WeightId::gate_up ||
           ref.id == WeightId::down || ref.id == WeightId::lm_head || ref.id == WeightId::router || experts > 0;
  }
  // Every value of the weight (all experts).
  std::int64_t elements() const { return rows * cols * (experts > 0 ? experts : 1); }
};

// Where row `row` of expert `expert` of an expert weight is: which source, and which row of
// its 2-D view.
struct SourceRow {
  const GgufTensor* tensor = nullptr;
  std::int64_t row = 0;
};
SourceRow expert_row(const GraphWeight& weight, int expert, std::int64_t row);
// Expert `expert`'s rows of an expert weight, part by part (gate, up): rows [first, first +
// count) of each tensor's 2-D view, in the order they stack.
struct SourceRows {
  const GgufTensor* tensor = nullptr;
  std::int64_t first = 0, count = 0;
};
std::vector<SourceRows> expert_sources(const GraphWeight& weight, int expert);

// Layer `layer`'s weights (those its architecture has), in the order the graph first reads them.
std::vector<GraphWeight> layer_weights(const DecoderTensors& tensors, const ModelConfig& config, int layer);
// output_norm and lm_head; an encoder's embedding norm and tables instead (it has no lm_head).
std::vector<GraphWeight> head_weights(const DecoderTensors& tensors, const ModelConfig& config);

// The activations of one step, each [rows, width] with its own width: x and h [embedding], qkv
// [q_dim + 2 kv_dim], attn [q_dim], gate_up [2 ffn], act [ffn]; `logit_input` holds the rows of
// x that need logits, and `logits` their [vocab] rows.
enum class Activation { x, h, qkv, attn, gate_up, act, logit_input, logits };

// The q or the k part of the qkv rows.
enum class QkvPart { q, k };

// The rotation angles of a step: every layer's, or (when sliding layers turn by other angles,
// ModelConfig::uniform_rope() false) the sliding layers' own set.
enum class RopeAngleSet { global, sliding };

// What the graph asks a device to do. Every call is on the current step's rows (begin() said how
// many, and which need logits); widths come from the model's shape. An implementation that lacks
// an op throws Error(unsupported) naming it (and should refuse the model at open instead).
class DecoderOps {
 public:
  virtual ~DecoderOps() = default;

  // x = the embedding rows of the step's tokens, times `scale`.
  virtual void embed(float scale) = 0;
  // Computes the angles of the step's positions for `set` once, for every layer that uses it:
  // pair i of a head at position p turns by p * position_scale * base^(-2i/rope_dims) /
  // freq_factors[i] (freq_factors: ModelConfig::rope_freq_factors, empty for all 1).
  virtual void rope_angles(RopeAngleSet set, float base, float position_scale) = 0;
  // out = rmsnorm(in) * weight, row by row, in `rows` rows (out may be in).
  virtual void rmsnorm(WeightRef weight, Activation in, Activation out, std::int64_t rows) = 0;
  // out = layernorm(in) * weight + bias (mean and variance per row), in `rows` rows (out may
  // be in). Encoders only; the ops below marked so too, and the default throws unsupported.
  virtual void layer_norm(WeightRef weight, WeightRef bias, Activation in, Activation out, std::int64_t rows);
  // x += the rows of the `positions` table at the step's positions + row 0 of `types` (absent
  // in the file: nothing). Encoders only.
  virtual void add_position_embeddings(WeightRef positions, WeightRef types);
  // The step's hidden-state output ([hidden rows, embedding]) = the hidden rows' part of `from`
  // (logit_input or h: rows [logit rows, logit rows + hidden rows), gather_logit_rows' order).
  // Only in a step with hidden rows (Stage::hidden_output).
  virtual void write_hidden(Activation from);
  // The same over each head_dim slice of the q or k part of qkv, in place.
  virtual void rmsnorm_heads(WeightRef weight, QkvPart part) = 0;
  // out = in Wᵀ (out += in Wᵀ when accumulate), in `rows` rows.
  virtual void linear(WeightRef weight, Activation in, Activation out, std::int64_t rows, bool accumulate) = 0;
  // Columns [begin, end) of out = in Wᵀ (out += in Wᵀ when accumulate) only, the rest of out
  // untouched (begin and end in the units the device's kernel takes, which the host that splits
  // the linear asks it for). A product's parts come in the order of their ranges, one after
  // another, nothing writing `in` or using `weight` in between: a device may keep what it
  // derived from `in` for the first part (its quantized rows) for the next.
  virtual void linear_outputs(WeightRef weight, Activation in, Activation out, std::int64_t rows, std::int64_t begin,
                              std::int64_t end, bool accumulate) = 0;
  // a += bias, every row.
  virtual void add_bias(WeightRef bias, Activation a) = 0;
  // into += from, every row.
  virtual void add(Activation from, Activation into) = 0;
  // Rotates the q or k part of qkv by the angles of `set`, in place.
  virtual void rope(QkvPart part, RopeAngleSet set) = 0;
  // Writes the k and v parts of qkv into layer `layer`'s KV cache, at the rows' slots.
  virtual void store_kv(int layer) = 0;
  // attn = causal paged attention of the q part of qkv over layer `layer`'s cache, for the rows
  // (bidirectional when ModelConfig::causal is false: a query sees every key of its sequence,
  // all of which are in this step)
  // [row_begin, row_end) of the step (the other rows of attn untouched): a query at position p
  // sees the keys at p - window < t <= p (window 0: all t <= p), scores scaled by `scale`
  // (ModelConfig::attention_score_scale()). A row's result depends on its own query and keys
  // only, so the rows may come in any ranges.
  virtual void attention(int layer, int window, float scale, std::int64_t row_begin, std::int64_t row_end) = 0;
  // act = act(gate) * up of the gate_up rows (FeedForward::gelu: act = gelu(gate_up), which
  // holds up alone).
  virtual void gated_activation(FeedForward kind) = 0;
  // A routed layer's feed-forward (ModelConfig's experts): out = Σ over each row's routed
  // experts of weight * down(act(gate h) * up h), h = `in`, with layer `layer`'s router,
  // expert_gate_up and expert_down (out += that when accumulate; out may be in). A row's sum
  // runs over its experts in rank order (most probable first), so its result does not depend
  // on the other rows of the batch. It may come in parts, in order and nothing writing `in` in
  // between, each a range [slot_begin, slot_end) of the layer's slots: its (row, expert) pairs,
  // rows x experts_used of them, ordered by expert and each expert's rows in row order. The part
  // that begins at 0 routes the rows (so only it knows the order) and the part that ends at the
  // last slot writes `out`. A part may end inside an expert's rows: a prefill chunk sends some
  // experts more rows than a frame's budget fits. (Ops whose products of a row depend on the rows
  // beside it run each expert's rows in the part that holds its first slot.)
  // Default: Error(unsupported).
  virtual void routed_feed_forward(int layer, FeedForward kind, Activation in, Activation out, bool accumulate,
                                   std::int64_t slot_begin, std::int64_t slot_end);
  // logit_input = the rows of x that need logits, then the hidden rows (Batch::hidden_rows).
  virtual void gather_logit_rows() = 0;

  // How finely a host that stops inside a pass (decoder_runner.hpp) may split a stage on this
  // device: `weight`'s product at `rows` rows in multiples of output_granule() outputs (the
  // units of linear_outputs), attention in multiples of attention_row_granule() rows. 0, the
  // default: the stage runs whole.
  virtual std::int64_t output_granule(WeightRef weight, std::int64_t rows) const {
    (void)weight;
    (void)rows;
    return 0;
  }
  virtual std::int64_t attention_row_granule() const { return 0; }
  // How many experts the slots [slot_begin, slot_end) of the routed layer being run fall in,
  // once its first part has routed the rows; -1, the default: not known. A host that splits the
  // slots weighs a part by its slots and the expert weights it reads.
  virtual std::int64_t routed_experts(std::int64_t slot_begin, std::int64_t slot_end) const {
    (void)slot_begin;
    (void)slot_end;
    return -1;
  }
};

// The graph in pieces, for a host that must stop inside a layer (a frame budget). A layer is
// the stages below in order; the expensive ones may run in parts, one after another: a matrix
// product by ranges of its outputs, attention by ranges of its query rows. The rest (norms, rope,
// the KV store, residual adds: cheap, row by row) run whole. The ops promise that a part equals
// the same part of the whole stage bit for bit, so every split gives the same pass. The head is
// three stages after the last layer (layer -1): the final norm over the logit and hidden rows
// together (a norm is row by row: each row's result is the one it gets alone), the hidden rows'
// copy out, and the lm_head over the logit rows only (head_rows()).
enum class Stage {
  attention_norm,
  qkv,
  qkv_finish,
  attention,
  wo,
  ffn_norm,
  gate_up,
  activation,
  down,
  layer_end,
  final_norm,
  hidden_output,
  lm_head,  // last: PassRunner sizes its table by it
};
inline constexpr Stage kLayerStages[] = {
    Stage::attention_norm, Stage::qkv,     Stage::qkv_finish, Stage::attention, Stage::wo,
    Stage::ffn_norm,       Stage::gate_up, Stage::activation, Stage::down,      Stage::layer_end};
inline constexpr Stage kHeadStages[] = {Stage::final_norm, Stage::hidden_output, Stage::lm_head};

// The rows a head stage runs over, of a step with `logit_rows` and `hidden_rows`.
std::int64_t head_rows(Stage stage, std::int64_t logit_rows, std::int64_t hidden_rows);

// How a stage may be split: into `units` (a product's outputs, attention's rows, a routed
// feed-forward's (row, expert) slots; 1 for a stage that runs whole, 0 for one with nothing to do).
// `weight`: the product's matrix, whose device kernel says in which units its outputs may be
// split.
struct StageWork {
  enum class Split { whole, outputs, rows, slots };
  Split split = Split::whole;
  std::int64_t units = 1;
  WeightRef weight{};
};

// `rows`: the step's rows for a layer's stage, head_rows() for the head's.
StageWork stage_work(const ModelConfig& config, int layer, Stage stage, std::int64_t rows);
// Units [begin, end) of `stage` of layer `layer` (-1: the head).
void run_stage(const ModelConfig& config, int layer, Stage stage, DecoderOps& ops, std::int64_t rows,
               std::int64_t begin, std::int64_t end);

// Whole pieces: the step's start (embeddings, rotation angles), a layer, the head, all of it.
void begin_step(const ModelConfig& config, DecoderOps& ops);
void run_layer(const ModelConfig& config, int layer, DecoderOps& ops, std::int64_t rows);
// `hidden_rows`: rows whose hidden states the step returns (after the final norm where the
// model has one) through DecoderOps::write_hidden, beside the logits of `logit_rows`.
void run_head(const ModelConfig& config, DecoderOps& ops, std::int64_t logit_rows, std::int64_t hidden_rows = 0);
void run_decoder(const ModelConfig& config, DecoderOps& ops, std::int64_t rows, std::int64_t logit_rows,
                 std::int64_t hidden_rows = 0);

}  // namespace ember::model
