// The grouped Linear (W4A8, and 8-bit groups): gemm_grouped behind the Linear interface.
#include "kernels/cpu/linear.hpp"

#include "util/check.hpp"

#include <mutex>

namespace ember::kernels::cpu {

namespace {

class GroupedLinear final : public Linear {
 public:
  GroupedLinear(CpuContext& ctx, std::int64_t out, std::int64_t in, GroupFormat format, const GroupedRowSource& source,
                ActivationQuant activations)
      : Linear(out, in),
        weights_(out, in, format, source, ctx.decode_weights, ctx.threads),
        terms_(activations == ActivationQuant::residual ? 2 : 1) {}

  void forward(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate) override {
    if (m < 0) fail(ErrorCode::invalid_argument, "linear: m = {} rows is negative", m);
    run(ctx, x, m, y, accumulate, 0, weights_.tiles(), LinearInput::fresh);
  }

  std::string implementation(CpuContext&, std::int64_t, bool) override {
    return std::string(weights_.format().bits == 4 ? "w4a8:" : "w8a8-g32:") + to_string(grouped_gemm_tier());
  }
  std::int64_t decode_bytes() const override { return weights_.bytes(); }
  std::int64_t output_granule(std::int64_t) const override { return GroupedWeights::kTileOutputs; }

 private:
  void forward_range(CpuContext& ctx, const float* x, std::int64_t m, float* y, std::int64_t begin, std::int64_t end,
                     bool accumulate, LinearInput input) override {
    run(ctx, x, m, y, accumulate, begin / GroupedWeights::kTileOutputs,
        (end + GroupedWeights::kTileOutputs - 1) / GroupedWeights::kTileOutputs, input);
  }

  void run(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate, std::int64_t tile_begin,
           std::int64_t tile_end, LinearInput input) {
    if (m == 0) return;
    std::lock_guard lock(mutex_);
    if (input == LinearInput::fresh)
      quantize_grouped_activations(x, m, in_features(), in_features(), weights_.padded_in(), activations_, ctx.threads,
                                   terms_);
    gemm_grouped(weights_, activations_, y, accumulate, ctx.threads, tile_begin, tile_end);
  }

  const GroupedWeights weights_;
  const int terms_;  // INT8 terms per activation row
  std::mutex mutex_;
  GroupedActivations activations_;  // scratch, guarded by mutex_; grows to the largest batch seen
};

}  // namespace

std::unique_ptr<Linear> make_grouped_linear(CpuContext& ctx, std::int64_t out, std::int64_t in, GroupFormat format,
                                            const GroupedRowSource& source, ActivationQuant activations) {
  return std::make_unique<GroupedLinear>(ctx, out, in, format, source, activations);
}

}  // namespace ember::kernels::cpu
