#include "backend/cpu/kernel_backend.hpp"

#include "backend/cpu/cpu_ops.hpp"
#include "backend/cpu/memory_plan.hpp"
#include "backend/cpu/weight_preparation.hpp"
#include "model/decoder_graph.hpp"
#include "util/check.hpp"

#include <algorithm>
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
    head_pieces_ = count_head_pieces();
  }

  const model::ModelConfig& config() const override { return config_; }
  std::string name() const override { return gemm_ == Precision::int8 ? "cpu-int8" : "cpu-fp32-kernels"; }
  std::string weight_format() const override { return weight_format_; }
  std::uint64_t decode_weight_bytes() const override {
    std::uint64_t bytes = 0;
    for (int l = -1; l < config_.layers; ++l) bytes += linear_bytes(l);
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
    const auto logit_rows = static_cast<std::int64_t>(batch.logit_rows.size());
    pass_ = {batch.rows(), logit_rows, 0, {}, 0, head_piece_outputs(logit_rows)};
  }

  // Stops before a layer that the last one's duration, with a margin, says would end past the
  // deadline (the layers of one pass cost alike, give or take the machine: a layer after a
  // frame's sleep meets cold caches), and before a piece of the head (the final norm with the
  // first) when the last piece, per logit row, says it would.
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
    if (pass_.logit_rows == 0) return true;
    while (pass_.next_output < config_.vocab) {
      if (!first && Clock::now() + head_piece_time_per_row_ * pass_.logit_rows > deadline) return false;
      const auto start = Clock::now();
      if (pass_.next_output == 0) model::run_final_norm(config_, *ops_, pass_.logit_rows);
      const std::int64_t end = std::min<std::int64_t>(pass_.next_output + pass_.head_piece, config_.vocab);
      model::run_lm_head(config_, *ops_, pass_.logit_rows, pass_.next_output, end);
      pass_.next_output = end;
      head_piece_time_per_row_ = (Clock::now() - start) / pass_.logit_rows;
      first = false;
    }
    return true;
  }

 private:
  std::uint64_t linear_bytes(int layer) const {
    std::uint64_t bytes = 0;
    for (int id = 0; id < model::kWeightIdCount; ++id)
      if (const auto& linear = weights_[{layer, static_cast<model::WeightId>(id)}].linear)
        bytes += static_cast<std::uint64_t>(linear->decode_bytes());
    return bytes;
  }

  // The lm_head runs in pieces of about a layer's weight stream, so that a budgeted step can
  // stop inside it as it does between layers: a large vocabulary's head (a 1B model's streams
  // ~4x a layer's weights) is otherwise the one long unit of the pass.
  std::int64_t count_head_pieces() const {
    const std::uint64_t layer = config_.layers > 0 ? linear_bytes(0) : 0;
    if (layer == 0) return 1;
    return static_cast<std::int64_t>(std::max<std::uint64_t>(1, (linear_bytes(-1) + layer / 2) / layer));
  }

  // Outputs per head piece at `logit_rows` rows, in the units the lm_head's kernel takes.
  std::int64_t head_piece_outputs(std::int64_t logit_rows) const {
    const std::int64_t unit = weights_[{-1, model::WeightId::lm_head}].linear->output_granule(logit_rows);
    const std::int64_t piece = (config_.vocab + head_pieces_ - 1) / head_pieces_;
    return std::min<std::int64_t>((piece + unit - 1) / unit * unit, config_.vocab);
  }

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
    std::int64_t next_output = 0;  // the head's: the first vocabulary entry not computed yet
    std::int64_t head_piece = 0;   // outputs per head piece
  };
  Pass pass_;
  std::int64_t head_pieces_ = 1;
  std::chrono::steady_clock::duration head_piece_time_per_row_{};  // the last head piece's, per logit row
};

}  // namespace

std::unique_ptr<Backend> make_kernel_backend(std::shared_ptr<const model::GgufFile> file,
                                             const model::ModelConfig& config,
                                             const BackendOptions& options, Precision gemm) {
  return std::make_unique<KernelBackend>(std::move(file), config, options, gemm);
}

}  // namespace ember::backend::cpu
