#include "backend/cpu/cpu_backend.hpp"

#include "backend/cpu/cpu_ops.hpp"
#include "backend/cpu/lora_ops.hpp"
#include "backend/cpu/memory_plan.hpp"
#include "backend/cpu/weight_preparation.hpp"
#include "kernels/cpu/cpu_tier.hpp"
#include "model/decoder_runner.hpp"
#include "util/check.hpp"

#include <chrono>

namespace ember::backend::cpu {
namespace {

// Places the weights (weight_preparation.hpp); CpuOps and the runner do the rest.
class CpuBackend final : public Backend {
 public:
  CpuBackend(std::shared_ptr<const model::GgufFile> file, const model::ModelConfig& config,
             const BackendOptions& options)
      : file_(std::move(file)), config_(config), ctx_(options.threads), gemm_(options.precision) {
    if (gemm_ == Precision::fp16)
      fail(ErrorCode::unsupported, "precision fp16 runs on CUDA only; on the CPU use int8 or fp32");
    const model::DecoderTensors tensors = model::map_decoder_tensors(*file_, config_);
    check_fits(plan_memory(config_, gemm_, four_bit_shares(config_, tensors, gemm_, options.weight_format)),
               available_memory(), config_);
    PreparedWeights prepared = prepare_cpu_weights(*file_, config_, tensors, ctx_, options, gemm_);
    weights_ = std::move(prepared.weights);
    weight_format_ = std::move(prepared.format);
    ops_ = std::make_unique<CpuOps>(config_, weights_, *tensors.token_embd, ctx_);
  }

  const model::ModelConfig& config() const override { return config_; }
  std::shared_ptr<const model::LoraAdapter> prepare_adapter(const model::LoraAdapter& adapter) const override {
    return prepare_lora(adapter, weights_, config_);
  }
  std::string name() const override { return gemm_ == Precision::int8 ? "cpu-int8" : "cpu-fp32"; }
  std::string weight_format() const override { return weight_format_; }
  std::string cpu_tier() const override { return kernels::cpu::to_string(kernels::cpu::active_tier()); }
  RoutingTotals routing_totals() const override { return {ops_->routed_layers_run(), ops_->experts_run_total()}; }
  std::uint64_t decode_weight_bytes() const override {
    std::uint64_t bytes = 0;
    for (int l = -1; l < config_.layers; ++l) bytes += linear_bytes(l);
    return bytes;
  }

  void forward(const Batch& batch, KvCache& kv, std::vector<float>& logits) override {
    begin_forward(batch, kv, logits, nullptr);
    advance_forward(std::chrono::steady_clock::time_point::max());
  }

  void begin_forward(const Batch& batch, KvCache& kv, std::vector<float>& logits, std::vector<float>* hidden) override {
    const KvGeometry& g = kv.geometry();
    validate_batch(batch, g.block_count, g.block_size, config_.vocab);
    check_hidden(batch, hidden);
    ops_->begin(batch, kv, &logits, hidden);
    runner_.begin(*ops_, batch.positions, static_cast<std::int64_t>(batch.logit_rows.size()),
                  static_cast<std::int64_t>(batch.hidden_rows.size()));
  }

  bool advance_forward(std::chrono::steady_clock::time_point deadline) override { return runner_.advance(deadline); }
  bool computes_hidden() const override { return true; }

 private:
  std::uint64_t linear_bytes(int layer) const {
    std::uint64_t bytes = 0;
    for (int id = 0; id < model::kWeightIdCount; ++id) {
      const CpuWeight& w = weights_[{layer, static_cast<model::WeightId>(id)}];
      if (w.linear) bytes += static_cast<std::uint64_t>(w.linear->decode_bytes());
      // A decode row reads experts_used of the experts (the mean expert's bytes) and the router.
      std::uint64_t experts = 0;
      for (const auto& expert : w.experts) experts += static_cast<std::uint64_t>(expert->decode_bytes());
      if (!w.experts.empty()) bytes += experts * static_cast<std::uint64_t>(config_.experts_used) / w.experts.size();
      if (id == static_cast<int>(model::WeightId::router)) bytes += 4 * w.values.size();
    }
    return bytes;
  }

  std::shared_ptr<const model::GgufFile> file_;  // keeps the token embeddings mapped
  model::ModelConfig config_;
  kernels::cpu::CpuContext ctx_;
  Precision gemm_;
  CpuWeights weights_;
  std::string weight_format_;
  std::unique_ptr<CpuOps> ops_;
  model::PassRunner runner_{config_};
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const model::GgufFile> file, const model::ModelConfig& config,
                                          const BackendOptions& options) {
  return std::make_unique<CpuBackend>(std::move(file), config, options);
}

}  // namespace ember::backend::cpu
