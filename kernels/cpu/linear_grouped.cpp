// The grouped Linear (W4A8, and 8-bit groups): gemm_grouped behind the Linear interface.
#include "kernels/cpu/linear.hpp"

#include "util/check.hpp"

#include <mutex>

namespace ember::kernels::cpu {

namespace {

class GroupedLinear final : public Linear {
 public:
  GroupedLinear(CpuContext& ctx, std::int64_t out, std::int64_t in, GroupFormat format, const GroupedRowSource& source,
                ActivationQuant activations, int pack_threads)
      : Linear(out, in),
        weights_(out, in, format, source, ctx.decode_weights, pack_threads > 0 ? pack_threads : ctx.threads),
        terms_(activations == ActivationQuant::residual ? 2 : 1) {}

  void forward(CpuContext& ctx, const float* x, std::int64_t m, float* y, bool accumulate) override {
    if (m < 0) fail(ErrorCode::invalid_argument, "linear: m = {} rows is negative", m);
    run(ctx, x, m, y, accumulate, 0, weights_.tiles(), LinearInput::fresh);
  }

  std::string implementation(CpuContext&, std::int64_t, bool) override {
    return std::string(weights_.format().bits == 4 ? "w4a8:" : "w8a8-g32:") + to_string(grouped_gemm_tier());
  }
  std::int64_t decode_bytes() const override { return weights_.bytes(); }
  const GroupedWeights& weights() const { return weights_; }
  int terms() const { return terms_; }
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

// The linears as grouped ones when every one is, with one number of activation terms; else null.
const GroupedLinear* all_grouped(Linear* const* linears, std::int64_t count) {
  const auto* first = dynamic_cast<const GroupedLinear*>(linears[0]);
  if (first == nullptr) return nullptr;
  for (std::int64_t i = 1; i < count; ++i) {
    const auto* g = dynamic_cast<const GroupedLinear*>(linears[i]);
    if (g == nullptr || g->terms() != first->terms() || g->weights().padded_in() != first->weights().padded_in())
      return nullptr;
  }
  return first;
}

}  // namespace

void forward_stacked(CpuContext& ctx, Linear* const* linears, const std::int64_t* rows, std::int64_t count,
                     const float* x, float* y, StackedScratch& scratch) {
  if (count <= 0) return;
  const std::int64_t in = linears[0]->in_features(), out = linears[0]->out_features();
  std::int64_t total = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    if (linears[i]->in_features() != in || linears[i]->out_features() != out || rows[i] < 0)
      fail(ErrorCode::invalid_argument, "stacked linears: linear {} is [{}, {}] over {} rows, the first [{}, {}]", i,
           linears[i]->out_features(), linears[i]->in_features(), rows[i], out, in);
    total += rows[i];
  }
  const GroupedLinear* grouped = all_grouped(linears, count);
  if (grouped == nullptr) {
    for (std::int64_t i = 0, row = 0; i < count; row += rows[i], ++i)
      linears[i]->forward(ctx, x + row * in, rows[i], y + row * out);
    return;
  }
  // Each row is quantized on its own (the same bits in any company), so one call over the stack
  // gives every linear the rows its own forward() would have quantized.
  quantize_grouped_activations(x, total, in, in, grouped->weights().padded_in(), scratch.activations, ctx.threads,
                               grouped->terms());
  scratch.products.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0, row = 0; i < count; row += rows[i], ++i)
    scratch.products[static_cast<std::size_t>(i)] = {&static_cast<const GroupedLinear*>(linears[i])->weights(),
                                                     &scratch.activations,
                                                     row,
                                                     rows[i],
                                                     y + row * out,
                                                     false};
  gemm_grouped_batch(scratch.products.data(), count, ctx.threads);
}

std::unique_ptr<Linear> make_grouped_linear(CpuContext& ctx, std::int64_t out, std::int64_t in, GroupFormat format,
                                            const GroupedRowSource& source, ActivationQuant activations,
                                            int pack_threads) {
  return std::make_unique<GroupedLinear>(ctx, out, in, format, source, activations, pack_threads);
}

}  // namespace ember::kernels::cpu
