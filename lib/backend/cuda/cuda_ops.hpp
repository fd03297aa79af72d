// The decoder graph's ops on a CUDA stream (model/decoder_graph.hpp), built from kernels/cuda:
// the weights as the CUDA backend placed them (matrices INT8 with per-output-channel scales, or
// FP16; vectors FP32) and the activations of one step in device scratch that grows to the
// largest batch seen. The ops only enqueue work on the stream: the backend uploads the step's
// metadata into meta(), records or replays the pass as a CUDA graph, and downloads logits().
// Every stage runs whole (a recorded pass cannot stop inside itself), so output_granule() and
// attention_row_granule() keep their default.
//
// Thread-safety: one CudaOps runs one step at a time, with its device current.
#pragma once

#include "backend/cuda/device_memory.hpp"
#include "backend/kv_cache.hpp"
#include "model/decoder_graph.hpp"
#include "model/model_config.hpp"

#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/ops.hpp"

#include <ember/ember.hpp>

#include <cstdint>

namespace ember::backend::cuda {

// One projection's weights on the device: INT8 [out, in] with per-output-channel scales, or
// FP16 [out, in].
struct DeviceLinear {
  std::int64_t out = 0, in = 0;
  DeviceBuffer weights, scales;
};

// One placed weight of the graph: a linear for the matrices, FP32 values for the vectors.
struct DeviceWeight {
  DeviceBuffer values;
  DeviceLinear linear;
};
using DeviceWeights = model::WeightTable<DeviceWeight>;

// The per-step inputs, packed into one host buffer and copied with one transfer. Offsets (in
// int32s) depend only on (rows, logit rows), so a captured graph finds them where it expects.
struct MetaLayout {
  std::int64_t tokens, positions, slots, row_tables, logit_rows, block_tables;

  MetaLayout(std::int64_t rows, std::int64_t n_out)
      : tokens(0),
        positions(rows),
        slots(2 * rows),
        row_tables(3 * rows),
        logit_rows(4 * rows),
        block_tables(4 * rows + n_out) {}
};

// What the ops read besides the step: the placed weights, the token embeddings (FP32
// [vocab, embedding]) and the RoPE frequency factors (null: all 1), all owned by the backend.
struct CudaModel {
  const model::ModelConfig* config = nullptr;
  const DeviceWeights* weights = nullptr;
  const DeviceBuffer* token_embd = nullptr;
  const DeviceBuffer* rope_freq_factors = nullptr;
};

class CudaOps final : public model::DecoderOps {
 public:
  // precision: int8 or fp16 (the matrices' form). stream and blas must outlive the ops.
  CudaOps(const CudaModel& model, int device, Precision precision, cudaStream_t stream, kernels::cuda::Blas& blas);

  // Grows the scratch to `rows` rows and `meta_ints` metadata values; true when it allocated
  // anew (a graph captured with the old buffers must be dropped). Throws Error(out_of_memory)
  // when the device is full.
  bool reserve(std::int64_t rows, std::int64_t meta_ints);
  // Where the backend uploads a step's metadata (MetaLayout), and where the logits end up
  // ([n_out, vocab]).
  std::int32_t* meta() const { return scratch_.meta.as<std::int32_t>(); }
  const float* logits() const { return scratch_.logits.as<float>(); }

  // Starts a step of `rows` rows, `n_out` of them with logits, whose metadata is in meta(); K/V
  // go to kv (device memory).
  void begin(std::int64_t rows, std::int64_t n_out, const KvCache& kv);

  void embed(float scale) override;
  void rope_angles(model::RopeAngleSet set, float base, float position_scale) override;
  void rmsnorm(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows) override;
  void rmsnorm_heads(model::WeightRef weight, model::QkvPart p) override;
  void linear(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows,
              bool accumulate) override;
  void linear_outputs(model::WeightRef weight, model::Activation in, model::Activation out, std::int64_t rows,
                      std::int64_t begin, std::int64_t end, bool accumulate) override;
  void add_bias(model::WeightRef bias, model::Activation a) override;
  void add(model::Activation from, model::Activation into) override;
  void rope(model::QkvPart p, model::RopeAngleSet set) override;
  void store_kv(int layer) override;
  void attention(int layer, int window, float scale, std::int64_t row_begin, std::int64_t row_end) override;
  void gated_activation(model::FeedForward kind) override;
  void gather_logit_rows() override;

 private:
  // Scratch sized for `rows` rows, reused by every step: no allocation per step.
  struct Scratch {
    std::int64_t rows = 0, meta_ints = 0;
    DeviceBuffer meta, x, h, qkv, attn, gate_up, act, xq, xs, acc, xh, logits;
    DeviceBuffer cos[2], sin[2];  // per model::RopeAngleSet
  };
  // What the ops of one step read.
  struct Step {
    std::int64_t rows = 0, n_out = 0;
    const KvCache* kv = nullptr;
    MetaLayout at{0, 0};
    kernels::KvLayout layout{};
  };

  void linear(const DeviceLinear& l, const float* x, std::int64_t m, float* y, bool accumulate);
  const std::int32_t* meta(std::int64_t offset) const { return meta() + offset; }
  float* at(model::Activation a) const;
  float* part(model::QkvPart p) const;
  [[noreturn]] void missing(const char* op) const;

  const model::ModelConfig& config_;
  const DeviceWeights& weights_;
  const DeviceBuffer& token_embd_;
  const DeviceBuffer& rope_freq_factors_;
  int device_;
  Precision precision_;
  cudaStream_t stream_;
  kernels::cuda::Blas& blas_;
  std::int64_t q_dim_, kv_dim_;
  Step step_;
  Scratch scratch_;
};

}  // namespace ember::backend::cuda
