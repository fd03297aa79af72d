#include "backend/cpu/kernel_backend.hpp"

#include "backend/cpu/cpu_ops.hpp"
#include "backend/cpu/memory_plan.hpp"
#include "backend/cpu/weight_preparation.hpp"
#include "model/decoder_graph.hpp"
#include "util/check.hpp"

#include <chrono>

namespace ember::backend::cpu {
namespace {

// Places the weights (weight_preparation.hpp) and runs the decoder graph over CpuOps.
class KernelBackend final : public Backend {
 public:
  KernelBackend(std::shared_ptr<const model::GgufFile> file, const model::ModelConfig& config,
                const BackendOptions& options, Precision gemm)
      : file_(std::move(file)), config_(config), ctx_(options.threads), gemm_(gemm) {
    if (gemm_ == Precision::fp16) fail(ErrorCode::unsupported, "the CPU kernels have no fp16 matrix products");
    const model::DecoderTensors tensors = model::map_decoder_tensors(*file_, config_);
    check_fits(plan_memory(config_, gemm_, four_bit_share(config_, tensors, gemm_, options.weight_format)),
               available_memory(), config_);
    PreparedWeights prepared = prepare_cpu_weights(*file_, config_, tensors, ctx_, options, gemm_);
    weights_ = std::move(prepared.weights);
    weight_format_ = std::move(prepared.format);
    ops_ = std::make_unique<CpuOps>(config_, weights_, *tensors.token_embd, ctx_);
  }

  const model::ModelConfig& config() const override { return config_; }
  std::string name() const override { return gemm_ == Precision::int8 ? "cpu-int8" : "cpu-fp32-kernels"; }
  std::string weight_format() const override { return weight_format_; }
  std::uint64_t decode_weight_bytes() const override {
    std::uint64_t bytes = 0;
    for (int l = -1; l < config_.layers; ++l)
      for (int id = 0; id < model::kWeightIdCount; ++id)
        if (const auto& linear = weights_[{l, static_cast<model::WeightId>(id)}].linear)
          bytes += static_cast<std::uint64_t>(linear->decode_bytes());
    return bytes;
  }

  void forward(const Batch& batch, KvCache& kv, std::vector<float>& logits) override {
    begin_forward(batch, kv, logits);
    advance_forward(std::chrono::steady_clock::time_point::max());
  }

  void begin_forward(const Batch& batch, KvCache& kv, std::vector<float>& logits) override {
    const KvGeometry& g = kv.geometry();
    validate_batch(batch, g.block_count, g.block_size, config_.vocab);
    ops_->begin(batch, kv, &logits);
    model::begin_step(config_, *ops_);
    pass_ = {batch.rows(), static_cast<std::int64_t>(batch.logit_rows.size()), 0, {}};
  }

  // Stops before a layer that the last one's duration, with a margin, says would end past the
  // deadline (the layers of one pass cost alike, give or take the machine: a layer after a
  // frame's sleep meets cold caches), and before the head (final norm and lm_head) when the
  // last head, per logit row, says it would.
  bool advance_forward(std::chrono::steady_clock::time_point deadline) override {
    using Clock = std::chrono::steady_clock;
    bool first = true;
    while (pass_.next_layer < config_.layers) {
      if (!first && Clock::now() + pass_.layer_time * 5 / 4 > deadline) return false;
      const auto start = Clock::now();
      model::run_layer(config_, pass_.next_layer++, *ops_, pass_.rows);
      pass_.layer_time = Clock::now() - start;
      first = false;
    }
    if (!first && Clock::now() + head_time_per_row_ * pass_.logit_rows > deadline) return false;
    const auto start = Clock::now();
    model::run_head(config_, *ops_, pass_.logit_rows);
    if (pass_.logit_rows > 0) head_time_per_row_ = (Clock::now() - start) / pass_.logit_rows;
    return true;
  }

 private:
  std::shared_ptr<const model::GgufFile> file_;  // keeps the token embeddings mapped
  model::ModelConfig config_;
  kernels::cpu::CpuContext ctx_;
  Precision gemm_;
  CpuWeights weights_;
  std::string weight_format_;
  std::unique_ptr<CpuOps> ops_;
  struct Pass {  // the forward pass in progress (begin_forward)
    std::int64_t rows = 0, logit_rows = 0;
    int next_layer = 0;
    std::chrono::steady_clock::duration layer_time{};
  };
  Pass pass_;
  std::chrono::steady_clock::duration head_time_per_row_{};  // the last head's, per logit row
};

}  // namespace

std::unique_ptr<Backend> make_kernel_backend(std::shared_ptr<const model::GgufFile> file,
                                             const model::ModelConfig& config,
                                             const BackendOptions& options, Precision gemm) {
  return std::make_unique<KernelBackend>(std::move(file), config, options, gemm);
}

}  // namespace ember::backend::cpu
