#include "backend/cpu/kernel_backend.hpp"

#include "backend/cpu/cpu_ops.hpp"
#include "backend/cpu/memory_plan.hpp"
#include "backend/cpu/weight_preparation.hpp"
#include "kernels/cpu/cpu_tier.hpp"
#include "model/decoder_graph.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <span>

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
  std::string cpu_tier() const override { return kernels::cpu::to_string(kernels::cpu::active_tier()); }
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
    // What a unit costs depends on the rows; attention's also on the context, new every pass.
    if (batch.rows() != pass_.rows || logit_rows != pass_.logit_rows) costs_.fill({});
    costs_[static_cast<std::size_t>(model::Stage::attention)] = {};
    pass_ = {&batch, batch.rows(), logit_rows};
  }

  // Runs the pass's stages in order, the splittable ones (model::StageWork) in parts sized to end
  // by the deadline from what a unit of the stage last cost in this pass (or the last of as many
  // rows), with a margin (kCostMargin: a part after a frame's sleep meets cold caches). Stops
  // before a stage or part that does not fit; every call runs at least one part, so the pass
  // progresses.
  bool advance_forward(std::chrono::steady_clock::time_point deadline) override {
    using Clock = std::chrono::steady_clock;
    bool ran = false;
    while (pass_.layer <= config_.layers) {
      const bool head = pass_.layer == config_.layers;
      const std::span<const model::Stage> stages =
          head ? std::span<const model::Stage>(model::kHeadStages) : std::span<const model::Stage>(model::kLayerStages);
      if (pass_.stage == stages.size()) {
        pass_.stage = 0;
        ++pass_.layer;
        continue;
      }
      const model::Stage stage = stages[pass_.stage];
      const int layer = head ? -1 : pass_.layer;
      const std::int64_t rows = head ? pass_.logit_rows : pass_.rows;
      const model::StageWork work = model::stage_work(config_, layer, stage, rows);
      if (pass_.next_unit >= work.units) {
        ++pass_.stage;
        pass_.next_unit = 0;
        continue;
      }
      const std::int64_t n = units_to_run(work, stage, layer, rows, deadline, ran);
      if (n == 0) return false;
      const auto start = Clock::now();
      model::run_stage(config_, layer, stage, *ops_, rows, pass_.next_unit, pass_.next_unit + n);
      const double weight = units_weight(work, layer, pass_.next_unit, pass_.next_unit + n);
      costs_[static_cast<std::size_t>(stage)].learn(work, pass_.next_unit == 0,
                                                    std::chrono::duration<double>(Clock::now() - start).count(), weight);
      pass_.next_unit += n;
      ran = true;
    }
    return true;
  }

 private:
  static constexpr double kUnknown = -1;
  static constexpr double kCostMargin = 1.25;  // a part is planned at this many times its estimate
  static constexpr std::int64_t kAttentionRowGranule = 8;  // the attention kernel's tile of rows
  static constexpr double kAttentionRowKeys = 32;  // a row's work beside its keys, in keys (a rough guess)

  // The units of `stage` to run now: as many as are expected to end by the deadline, in the
  // stage's granule; 0 when not even one granule is (unless nothing ran yet in this call).
  std::int64_t units_to_run(const model::StageWork& work, model::Stage stage, int layer, std::int64_t rows,
                            std::chrono::steady_clock::time_point deadline, bool ran) const {
    const std::int64_t left = work.units - pass_.next_unit;
    if (deadline == std::chrono::steady_clock::time_point::max()) return left;  // forward(): no parts
    std::int64_t granule = left;  // a whole stage
    if (work.split == model::StageWork::Split::outputs)
      granule = weights_[work.weight].linear->output_granule(rows);
    else if (work.split == model::StageWork::Split::rows)
      granule = kAttentionRowGranule;
    granule = std::min(granule, left);
    const StageCost& cost = costs_[static_cast<std::size_t>(stage)];
    const auto now = std::chrono::steady_clock::now();  // (deadline - now overflows for time_point::min())
    const double time_left = deadline <= now ? 0.0 : std::chrono::duration<double>(deadline - now).count();
    if (cost.unit == kUnknown) return ran && time_left <= 0 ? 0 : granule;  // learn a unit's cost from the smallest part
    const double fit = (time_left / kCostMargin - (pass_.next_unit == 0 ? cost.first_part : 0.0)) / cost.unit;
    std::int64_t n = 0;
    if (work.split == model::StageWork::Split::rows) {
      for (double weight = 0; n < left;) {
        const std::int64_t next = std::min(granule, left - n);
        weight += units_weight(work, layer, pass_.next_unit + n, pass_.next_unit + n + next);
        if (weight > fit) break;
        n += next;
      }
    } else {
      n = fit >= static_cast<double>(left) ? left : static_cast<std::int64_t>(std::max(0.0, fit)) / granule * granule;
    }
    if (n == 0 && !ran) n = granule;
    return n;
  }

  // What units [begin, end) of a stage weigh against its others: a product's outputs alike; an
  // attention row by the keys it reads, which grow along a prompt's chunk, plus its own work.
  double units_weight(const model::StageWork& work, int layer, std::int64_t begin, std::int64_t end) const {
    if (work.split != model::StageWork::Split::rows) return static_cast<double>(end - begin);
    const int window = config_.attention_window(layer);
    double weight = 0;
    for (std::int64_t r = begin; r < end; ++r) {
      const double keys = pass_.batch->positions[static_cast<std::size_t>(r)] + 1.0;
      weight += (window > 0 ? std::min<double>(keys, window) : keys) + kAttentionRowKeys;
    }
    return weight;
  }

  std::uint64_t linear_bytes(int layer) const {
    std::uint64_t bytes = 0;
    for (int id = 0; id < model::kWeightIdCount; ++id)
      if (const auto& linear = weights_[{layer, static_cast<model::WeightId>(id)}].linear)
        bytes += static_cast<std::uint64_t>(linear->decode_bytes());
    return bytes;
  }

  std::shared_ptr<const model::GgufFile> file_;  // keeps the token embeddings mapped
  model::ModelConfig config_;
  kernels::cpu::CpuContext ctx_;
  Precision gemm_;
  CpuWeights weights_;
  std::string weight_format_;
  std::unique_ptr<CpuOps> ops_;
  struct Pass {  // the forward pass in progress (begin_forward)
    const Batch* batch = nullptr;
    std::int64_t rows = -1, logit_rows = -1;
    int layer = 0;                // the next stage's layer; config_.layers: the head
    std::size_t stage = 0;        // the next stage, in model::kLayerStages or kHeadStages
    std::int64_t next_unit = 0;   // the next stage's first unit not run yet
  };
  Pass pass_;
  // What a stage's parts cost, as last measured: seconds per unit of weight (units_weight), and
  // for a product the extra of its first part, which also quantizes the product's input.
  struct StageCost {
    double unit = kUnknown;  // kUnknown: not measured at these rows yet
    double first_part = 0;
    void learn(const model::StageWork& work, bool first, double seconds, double weight) {
      if (work.split == model::StageWork::Split::outputs && first && unit != kUnknown)
        first_part = std::max(0.0, seconds - unit * weight);
      else
        unit = seconds / weight;
    }
  };
  std::array<StageCost, static_cast<std::size_t>(model::Stage::lm_head) + 1> costs_{};
};

}  // namespace

std::unique_ptr<Backend> make_kernel_backend(std::shared_ptr<const model::GgufFile> file,
                                             const model::ModelConfig& config,
                                             const BackendOptions& options, Precision gemm) {
  return std::make_unique<KernelBackend>(std::move(file), config, options, gemm);
}

}  // namespace ember::backend::cpu
