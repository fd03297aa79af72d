// The decoder graph's ops on the CPU (model/decoder_graph.hpp), built from kernels/cpu: the
// weights as the CPU backend placed them (fused Q|K|V and gate|up linears in INT8 or FP32, FP32
// vectors) and the activations of one step in scratch that grows to the largest batch seen.
//
// Thread-safety: one CpuOps runs one step at a time; the weights it reads are shared read-only.
#pragma once

#include "backend/batch.hpp"
#include "backend/kv_cache.hpp"
#include "model/decoder_graph.hpp"

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/context.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/ops.hpp"

#include <array>
#include <atomic>
#include <memory>
#include <vector>

namespace ember::backend::cpu {

// One placed weight: a linear for the matrices, FP32 values for the vectors, one linear per
// expert for an expert weight.
struct CpuWeight {
  std::vector<float> values;
  std::unique_ptr<kernels::cpu::Linear> linear;
  std::vector<std::unique_ptr<kernels::cpu::Linear>> experts;
  // A matrix's INT8 smoothing factors (backend/cpu/smoothing.hpp): its input columns were
  // multiplied by them and its input divided; empty when not smoothed. LoRA adapters need them
  // (lora_ops.cpp).
  std::vector<float> smoothing;
};
using CpuWeights = model::WeightTable<CpuWeight>;

// Sees the input of every linear as the ops run: how calibration observes activation ranges.
class LinearInputObserver {
 public:
  virtual ~LinearInputObserver() = default;
  virtual void observe(model::WeightRef linear, const float* x, std::int64_t rows, std::int64_t cols) = 0;
};

class CpuOps final : public model::DecoderOps {
 public:
  // observer: told every linear's input (null: nobody). token_embd, weights and ctx must outlive
  // the ops.
  CpuOps(const model::ModelConfig& config, const CpuWeights& weights, const model::GgufTensor& token_embd,
         kernels::cpu::CpuContext& ctx, LinearInputObserver* observer = nullptr);

  // Starts a step over `batch` (validated against kv by the caller): K/V go to kv, logits to
  // `logits` (resized to [logit rows, vocab]; null when the step computes none), the hidden
  // states of the hidden rows to `hidden` ([hidden rows, embedding], write_hidden; null when the
  // step has none).
  void begin(const Batch& batch, KvCache& kv, std::vector<float>* logits, std::vector<float>* hidden = nullptr);
  // A step's activation (after the op that writes it), e.g. the lm_head's input for calibration.
  const float* data(model::Activation a) const;

  void embed(float scale) override;
  void rope_angles(model::RopeAngleSet set, float base, float position_scale) override;
  void rmsnorm(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows) override;
  void rmsnorm_heads(model::WeightRef weight, model::QkvPart part) override;
  void layer_norm(model::WeightRef weight, model::WeightRef bias, model::Activation in, model::Activation out,
                  std::int64_t rows) override;
  void add_position_embeddings(model::WeightRef positions, model::WeightRef types) override;
  void write_hidden(model::Activation from) override;
  void linear(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows,
              bool accumulate) override;
  void linear_outputs(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows,
                      std::int64_t begin, std::int64_t end, bool accumulate) override;
  void add_bias(model::WeightRef bias, model::Activation a) override;
  void add(model::Activation from, model::Activation into) override;
  void rope(model::QkvPart part, model::RopeAngleSet set) override;
  void store_kv(int layer) override;
  void attention(int layer, int window, float scale, std::int64_t row_begin, std::int64_t row_end) override;
  void gated_activation(model::FeedForward kind) override;
  void gather_logit_rows() override;
  // routed_ffn.cpp: rows grouped by expert, each expert's rows (of the part's slots) one product.
  void routed_feed_forward(int layer, model::FeedForward kind, model::Activation in, model::Activation out,
                           bool accumulate, std::int64_t slot_begin, std::int64_t slot_end) override;
  // lora_ops.cpp: adds the step's sequences' LoRA updates to columns [begin, end) of out =
  // in Wᵀ (`rows` rows: the step's, or its logit rows for the lm_head).
  void apply_lora(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows,
                  std::int64_t begin, std::int64_t end);
  // How many distinct experts the last routed layer ran (a step's routing profile), and the
  // totals since the ops were made: routed layers run and the distinct experts of each, summed.
  // The totals may be read from another thread while a step runs.
  int experts_run() const { return experts_run_; }
  std::uint64_t routed_layers_run() const { return routed_layers_run_.load(std::memory_order_relaxed); }
  std::uint64_t experts_run_total() const { return experts_run_total_.load(std::memory_order_relaxed); }
  // A product splits as its linear's kernel allows; attention in the kernel's tiles of rows.
  std::int64_t output_granule(model::WeightRef weight, std::int64_t rows) const override;
  std::int64_t attention_row_granule() const override { return kAttentionRowGranule; }
  std::int64_t routed_experts(std::int64_t slot_begin, std::int64_t slot_end) const override {
    const auto& group = routing_.group;
    if (slot_begin >= slot_end) return 0;
    if (static_cast<std::int64_t>(group.size()) < slot_end) return -1;
    return group[static_cast<std::size_t>(slot_end - 1)] - group[static_cast<std::size_t>(slot_begin)] + 1;
  }

 private:
  static constexpr std::int64_t kAttentionRowGranule = 8;  // the attention kernel's tile of rows
  float* at(model::Activation a);
  std::int64_t width(model::Activation a) const;
  float* part(model::QkvPart p);
  void resize_scratch(std::int64_t rows);

  const model::ModelConfig& config_;
  const CpuWeights& weights_;
  const model::GgufTensor& token_embd_;
  kernels::cpu::CpuContext& ctx_;
  LinearInputObserver* observer_;
  std::int64_t q_dim_, kv_dim_, qkv_dim_;

  // The step.
  const Batch* batch_ = nullptr;
  KvCache* kv_ = nullptr;
  std::vector<float>* logits_ = nullptr;
  std::vector<float>* hidden_ = nullptr;
  std::int64_t rows_ = 0;
  kernels::cpu::KvLayout layout_{};
  std::array<kernels::cpu::RopeAngles, 2> angles_;  // by RopeAngleSet
  std::vector<kernels::cpu::AttentionSeq> seqs_;
  std::vector<kernels::cpu::AttentionSeq> seq_rows_;  // seqs_ cut to an attention() call's rows
  // Bidirectional attention (ModelConfig::causal false): each row's query "at" its sequence's
  // last position in the step, so the causal kernel shows it every key of the sequence.
  std::vector<std::int32_t> last_positions_;

  std::vector<float> x_, h_, qkv_, attn_, gate_up_, act_;
  bool lora_ = false;                        // some sequence of the step has adapters
  std::vector<std::int32_t> lora_sequence_;  // each row's sequence when it has adapters, else -1
  std::vector<float> lora_down_;             // each row's A x (lora_ops.cpp)
  kernels::cpu::AttentionWorkspace attention_;

  // Routing scratch (routed_ffn.cpp), reused step to step.
  struct Routing {
    std::vector<float> logits;           // [rows, experts]
    std::vector<std::int32_t> expert;    // [rows, experts_used]: each row's experts by rank
    std::vector<float> weight;           // [rows, experts_used]: their weights
    std::vector<std::int32_t> slots;     // row * experts_used + rank, grouped by expert
    std::vector<std::int32_t> first;     // [experts + 1]: each expert's range of slots
    std::vector<std::int32_t> group;     // [rows, experts_used]: in `slots` order, each slot's
                                         // expert's index among the experts some row chose
    bool rows_independent = true;        // the experts' linears (Linear::rows_independent)
    std::vector<std::int32_t> next;      // [experts]: the counting sort's cursors
    std::vector<std::int32_t> position;  // [rows, experts_used]: each slot's index in `slots`
    std::vector<float> gate_up, act;     // a part's slots' rows, one expert after another
    std::vector<float> out;              // [rows * experts_used, embedding]: in `slots` order
    // The experts of a part's slots: their linears and row counts, for forward_stacked.
    std::vector<kernels::cpu::Linear*> gate_up_linears, down_linears;
    std::vector<std::int64_t> expert_rows;
    std::vector<std::int32_t> gather;  // the h row of each of the part's slots
    kernels::cpu::StackedScratch stacked;
  } routing_;
  int experts_run_ = 0;
  std::atomic<std::uint64_t> routed_layers_run_{0}, experts_run_total_{0};
  void route(int layer, const float* h);
  std::int64_t expert_boundary(std::int64_t slot) const;
  void run_slots(int layer, model::FeedForward kind, const float* h, std::int64_t slot_begin, std::int64_t slot_end);
  void finish_routed(model::Activation out, bool accumulate);
};

}  // namespace ember::backend::cpu
