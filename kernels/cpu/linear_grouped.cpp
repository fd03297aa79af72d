// The grouped Linear (W4A8, and 8-bit groups): gemm_grouped behind the Linear interface.
#include "kernels/cpu/linear.hpp"

#include "util/check.hpp"

#include <algorithm>
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
  bool rows_independent() const override { return true; }
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

// The stack's rows, after its linears are checked to be of one shape.
std::int64_t stacked_rows(Linear* const* linears, const std::int64_t* rows, std::int64_t count) {
  const std::int64_t in = linears[0]->in_features(), out = linears[0]->out_features();
  std::int64_t total = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    if (linears[i]->in_features() != in || linears[i]->out_features() != out || rows[i] < 0)
      fail(ErrorCode::invalid_argument, "stacked linears: linear {} is [{}, {}] over {} rows, the first [{}, {}]", i,
           linears[i]->out_features(), linears[i]->in_features(), rows[i], out, in);
    total += rows[i];
  }
  return total;
}

// The products of grouped linears over the quantized stack in scratch.activations.
void run_stacked(CpuContext& ctx, Linear* const* linears, const std::int64_t* rows, std::int64_t count, float* y,
                 StackedScratch& scratch) {
  const std::int64_t out = linears[0]->out_features();
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

}  // namespace

void forward_stacked(CpuContext& ctx, Linear* const* linears, const std::int64_t* rows, std::int64_t count,
                     const float* x, float* y, StackedScratch& scratch) {
  if (count <= 0) return;
  const std::int64_t total = stacked_rows(linears, rows, count);
  const std::int64_t in = linears[0]->in_features(), out = linears[0]->out_features();
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
  run_stacked(ctx, linears, rows, count, y, scratch);
}

void forward_gathered(CpuContext& ctx, Linear* const* linears, const std::int64_t* rows, std::int64_t count,
                      const float* x, std::int64_t x_rows, const std::int32_t* gather, float* y,
                      StackedScratch& scratch) {
  if (count <= 0) return;
  const std::int64_t total = stacked_rows(linears, rows, count);
  const std::int64_t in = linears[0]->in_features();
  for (std::int64_t i = 0; i < total; ++i)
    if (gather[i] < 0 || gather[i] >= x_rows)
      fail(ErrorCode::invalid_argument, "gathered linears: row {} of {}", gather[i], x_rows);
  const GroupedLinear* grouped = all_grouped(linears, count);
  if (grouped == nullptr) {  // each linear's own forward() over its gathered rows
    scratch.rows.resize(static_cast<std::size_t>(total * in));
    for (std::int64_t i = 0; i < total; ++i) std::copy_n(x + gather[i] * in, in, scratch.rows.data() + i * in);
    forward_stacked(ctx, linears, rows, count, scratch.rows.data(), y, scratch);
    return;
  }
  // The distinct rows, in order of first use, quantized once.
  scratch.position.assign(static_cast<std::size_t>(x_rows), -1);
  scratch.distinct_rows.clear();
  for (std::int64_t i = 0; i < total; ++i) {
    std::int32_t& p = scratch.position[static_cast<std::size_t>(gather[i])];
    if (p >= 0) continue;
    p = static_cast<std::int32_t>(scratch.distinct_rows.size());
    scratch.distinct_rows.push_back(gather[i]);
  }
  const auto distinct = static_cast<std::int64_t>(scratch.distinct_rows.size());
  scratch.rows.resize(static_cast<std::size_t>(distinct * in));
  for (std::int64_t k = 0; k < distinct; ++k)
    std::copy_n(x + std::int64_t{scratch.distinct_rows[static_cast<std::size_t>(k)]} * in, in,
                scratch.rows.data() + k * in);
  const std::int64_t padded_in = grouped->weights().padded_in();
  quantize_grouped_activations(scratch.rows.data(), distinct, in, in, padded_in, scratch.distinct, ctx.threads,
                               grouped->terms());
  // The stack: each row's quantized terms copied from its distinct row.
  GroupedActivations& a = scratch.activations;
  const GroupedActivations& d = scratch.distinct;
  a.rows = total;
  a.padded_in = padded_in;
  a.terms = d.terms;
  const std::int64_t q_row = d.terms * d.q_stride(), g_row = d.terms * d.groups();
  a.q.resize(static_cast<std::size_t>(total * q_row));
  a.scales.resize(static_cast<std::size_t>(total * g_row));
  a.sums.resize(static_cast<std::size_t>(total * g_row));
  const std::int64_t wide_row = d.terms == 2 ? d.q_stride() : 0;
  a.wide.resize(static_cast<std::size_t>(total * wide_row));
  for (std::int64_t i = 0; i < total; ++i) {
    const std::int64_t k = scratch.position[static_cast<std::size_t>(gather[i])];
    std::copy_n(d.q.data() + k * q_row, q_row, a.q.data() + i * q_row);
    std::copy_n(d.scales.data() + k * g_row, g_row, a.scales.data() + i * g_row);
    std::copy_n(d.sums.data() + k * g_row, g_row, a.sums.data() + i * g_row);
    std::copy_n(d.wide.data() + k * wide_row, wide_row, a.wide.data() + i * wide_row);
  }
  index_by_group(a);
  run_stacked(ctx, linears, rows, count, y, scratch);
}

std::unique_ptr<Linear> make_grouped_linear(CpuContext& ctx, std::int64_t out, std::int64_t in, GroupFormat format,
                                            const GroupedRowSource& source, ActivationQuant activations,
                                            int pack_threads) {
  return std::make_unique<GroupedLinear>(ctx, out, in, format, source, activations, pack_threads);
}

}  // namespace ember::kernels::cpu
