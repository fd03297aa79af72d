// The W4A8 Linear: gemm_w4a8 behind the Linear interface.
#include "kernels/cpu/linear.hpp"

#include "util/check.hpp"

#include <mutex>

namespace ember::kernels::cpu {

namespace {

class W4a8Linear final : public Linear {
 public:
  W4a8Linear(CpuContext& ctx, std::int64_t out, std::int64_t in, bool offsets, const W4RowSource& source)
      : Linear(out, in), weights_(out, in, offsets, source, ctx.decode_weights, ctx.threads) {}

  void forward(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate) override {
    if (m < 0) fail(ErrorCode::invalid_argument, "linear: m = {} rows is negative", m);
    run(ctx, x, m, y, accumulate, 0, weights_.tiles(), LinearInput::fresh);
  }

  std::string implementation(CpuContext&, std::int64_t, bool) override { return "w4a8:avx512_vnni"; }
  std::int64_t decode_bytes() const override { return weights_.bytes(); }
  std::int64_t output_granule(std::int64_t) const override { return W4Weights::kTileOutputs; }

 private:
  void forward_range(CpuContext& ctx, const float* x, std::int64_t m, float* y, std::int64_t begin,
                     std::int64_t end, bool accumulate, LinearInput input) override {
    run(ctx, x, m, y, accumulate, begin / W4Weights::kTileOutputs,
        (end + W4Weights::kTileOutputs - 1) / W4Weights::kTileOutputs, input);
  }

  void run(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate, std::int64_t tile_begin,
           std::int64_t tile_end, LinearInput input) {
    if (m == 0) return;
    std::lock_guard lock(mutex_);
    if (input == LinearInput::fresh)
      quantize_w4_activations(x, m, in_features(), in_features(), weights_.padded_in(), activations_, ctx.threads);
    gemm_w4a8(weights_, activations_, y, accumulate, ctx.threads, tile_begin, tile_end);
  }

  const W4Weights weights_;
  std::mutex mutex_;
  W4Activations activations_;  // scratch, guarded by mutex_; grows to the largest batch seen
};

}  // namespace

std::unique_ptr<Linear> make_w4a8_linear(CpuContext& ctx, std::int64_t out, std::int64_t in, bool offsets,
                                         const W4RowSource& source) {
  if (!w4a8_supported()) fail(ErrorCode::unsupported, "linear: 4-bit weights need AVX-512 VNNI, which this CPU lacks");
  return std::make_unique<W4a8Linear>(ctx, out, in, offsets, source);
}

}  // namespace ember::kernels::cpu
