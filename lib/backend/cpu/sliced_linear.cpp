#include "backend/cpu/sliced_linear.hpp"

#include <algorithm>
#include <string>

namespace ember::backend::cpu {
namespace {

namespace k = kernels::cpu;

class SlicedLinear final : public k::Linear {
 public:
  SlicedLinear(k::CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in)
      : Linear(out, in), slice_(fp32_slice_outputs(in)) {
    for (std::int64_t begin = 0; begin < out; begin += slice_)
      slices_.push_back(k::make_fp32_linear(ctx, w + begin * in, std::min(slice_, out - begin), in));
  }

  void forward(k::CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate) override {
    run(ctx, x, m, y, 0, out_features(), accumulate);
  }

  std::string implementation(k::CpuContext& ctx, std::int64_t m, bool accumulate) override {
    return slices_.front()->implementation(ctx, m, accumulate);
  }

  std::int64_t decode_bytes() const override {
    std::int64_t bytes = 0;
    for (const auto& s : slices_) bytes += s->decode_bytes();
    return bytes;
  }

  std::int64_t output_granule(std::int64_t) const override { return slice_; }

 protected:
  void forward_range(k::CpuContext& ctx, const float* x, std::int64_t m, float* y, std::int64_t begin, std::int64_t end,
                     bool accumulate, k::LinearInput) override {
    run(ctx, x, m, y, begin, end, accumulate);
  }

 private:
  // The slices of outputs [begin, end), begin a multiple of slice_.
  void run(k::CpuContext& ctx, const float* x, std::int64_t m, float* y, std::int64_t begin, std::int64_t end,
           bool accumulate) {
    const std::int64_t out = out_features();
    for (std::int64_t first = begin; first < end; first += slice_) {
      k::Linear& slice = *slices_[static_cast<std::size_t>(first / slice_)];
      const std::int64_t n = slice.out_features();
      scratch_.resize(static_cast<std::size_t>(m * n));
      slice.forward(ctx, x, m, scratch_.data());
      for (std::int64_t r = 0; r < m; ++r) {
        const float* from = scratch_.data() + r * n;
        float* to = y + r * out + first;
        if (accumulate)
          for (std::int64_t c = 0; c < n; ++c) to[c] += from[c];
        else
          std::copy(from, from + n, to);
      }
    }
  }

  std::int64_t slice_;  // outputs a slice
  std::vector<std::unique_ptr<k::Linear>> slices_;
  std::vector<float> scratch_;
};

}  // namespace

std::unique_ptr<k::Linear> make_sliced_fp32_linear(k::CpuContext& ctx, const float* w, std::int64_t out,
                                                   std::int64_t in) {
  if (out <= fp32_slice_outputs(in)) return k::make_fp32_linear(ctx, w, out, in);
  return std::make_unique<SlicedLinear>(ctx, w, out, in);
}

}  // namespace ember::backend::cpu
