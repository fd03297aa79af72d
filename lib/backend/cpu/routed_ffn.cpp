// A routed (mixture-of-experts) feed-forward on the CPU: the router's logits for every row, each
// row's experts chosen, then the rows grouped by expert so that each expert's rows are one
// product of its gate|up and down linears (a decode row reads only its own experts' weights;
// a batch reads each routed expert once), and each row's expert outputs summed in rank order.
// Every linear's row results are independent of the rows beside them, and the sum's order is
// the row's own, so a row's result is the same in any batch, and in any split of the slots into
// parts (a budgeted step's, which may cut an expert's rows in two).
#include "backend/cpu/cpu_ops.hpp"

#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/simd.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace ember::backend::cpu {
namespace {

namespace k = ember::kernels::cpu;

template <class T>
void grow(std::vector<T>& v, std::int64_t n) {
  if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
}

// The dot products of x with N rows of w, each in one fixed order: eight lanes, summed in order.
// The rows share each load of x, and their lanes are independent chains of adds: one row at a
// time, its d / 8 dependent adds kept the router's FP32 rows from reading at the speed the
// experts' weights stream (docs/benchmarks.md#decode-stream-s25). The lanes' multiplies and adds
// are the same IEEE operations at any vector width, so the clones agree bit for bit.
constexpr int kRouterRowsAtOnce = 4;

// Eight lanes as one value: GCC and Clang keep it in registers (one AVX register, two SSE or
// NEON ones), where an array indexed in a loop lived on the stack.
using Lanes = float __attribute__((vector_size(32)));

template <int N>
[[gnu::always_inline]] inline void router_dots(const float* x, const float* w, std::int64_t d, float* out) {
  Lanes lane[N] = {};
  std::int64_t c = 0;
  for (; c + 8 <= d; c += 8) {
    Lanes xv, wv;
    std::memcpy(&xv, x + c, sizeof xv);
    for (int e = 0; e < N; ++e) {
      std::memcpy(&wv, w + e * d + c, sizeof wv);
      lane[e] += wv * xv;
    }
  }
  for (int e = 0; e < N; ++e) {
    float l[8];
    std::memcpy(l, &lane[e], sizeof l);
    for (std::int64_t i = c; i < d; ++i) l[i % 8] += w[e * d + i] * x[i];
    out[e] = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
  }
}

EMBER_CLONES void router_dots_all(const float* x, const float* w, std::int64_t d, float* out) {
  router_dots<kRouterRowsAtOnce>(x, w, d, out);
}

EMBER_CLONES void router_dot(const float* x, const float* w, std::int64_t d, float* out) {
  router_dots<1>(x, w, d, out);
}

// logits[r, e] = router row e . h row r (router_dots' order), by the same code on every tier, at
// every row count and thread count: the choice of experts is a row's own, bit for bit (a oneDNN
// product's order depends on both).
void router_logits(const float* h, std::int64_t rows, const float* router, int experts, std::int64_t d, float* logits,
                   int threads) {
  const std::int64_t sets = (experts + kRouterRowsAtOnce - 1) / kRouterRowsAtOnce;  // per row
#pragma omp parallel for num_threads(threads) schedule(static) if (rows * experts * d > (1 << 16))
  for (std::int64_t i = 0; i < rows * sets; ++i) {
    const std::int64_t row = i / sets;
    const int first = static_cast<int>(i % sets) * kRouterRowsAtOnce;
    const float* x = h + row * d;
    if (first + kRouterRowsAtOnce <= experts) {
      router_dots_all(x, router + first * d, d, logits + row * experts + first);
    } else {
      for (int e = first; e < experts; ++e) router_dot(x, router + e * d, d, logits + row * experts + e);
    }
  }
}

// The `used` most probable of `n` experts from their logits: softmax over all n (as llama.cpp's
// build_moe_ffn), then the top `used` by probability, ties to the lower index; weights are the
// probabilities, divided by their sum when `normalize`.
void select_experts(const float* logits, int n, int used, bool normalize, std::int32_t* expert, float* weight) {
  const float max = *std::max_element(logits, logits + n);
  float probs[1024];  // ModelConfig's experts are at most kMaxExperts (1024)
  float sum = 0;
  for (int e = 0; e < n; ++e) sum += probs[e] = std::exp(logits[e] - max);
  for (int e = 0; e < n; ++e) probs[e] /= sum;
  std::int32_t order[1024];
  std::iota(order, order + n, 0);
  std::partial_sort(order, order + used, order + n, [&](std::int32_t a, std::int32_t b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  float chosen = 0;
  for (int j = 0; j < used; ++j) chosen += probs[order[j]];
  for (int j = 0; j < used; ++j) {
    expert[j] = order[j];
    weight[j] = normalize ? probs[order[j]] / chosen : probs[order[j]];
  }
}

}  // namespace

// Each row's experts and weights, and the (row, rank) slots grouped by expert in row order.
void CpuOps::route(int layer, const float* h) {
  const int n = config_.experts, used = config_.experts_used;
  EMBER_ASSERT(n <= 1024 && used <= n);  // read_model_config's bounds; select_experts' arrays
  Routing& r = routing_;
  grow(r.logits, rows_ * n);
  router_logits(h, rows_, weights_[{layer, model::WeightId::router}].values.data(), n, config_.embedding,
                r.logits.data(), ctx_.threads);
  grow(r.expert, rows_ * used);
  grow(r.weight, rows_ * used);
  for (std::int64_t row = 0; row < rows_; ++row)
    select_experts(r.logits.data() + row * n, n, used, config_.expert_weights_norm, r.expert.data() + row * used,
                   r.weight.data() + row * used);
  // Counting sort of the slots by expert: each expert's slots stay in row order.
  r.first.assign(static_cast<std::size_t>(n) + 1, 0);
  for (std::int64_t s = 0; s < rows_ * used; ++s) ++r.first[static_cast<std::size_t>(r.expert[s]) + 1];
  std::partial_sum(r.first.begin(), r.first.end(), r.first.begin());
  grow(r.slots, rows_ * used);
  grow(r.position, rows_ * used);
  r.next.assign(r.first.begin(), r.first.end() - 1);
  for (std::int64_t s = 0; s < rows_ * used; ++s) {
    const std::int32_t at = r.next[static_cast<std::size_t>(r.expert[s])]++;
    r.slots[static_cast<std::size_t>(at)] = static_cast<std::int32_t>(s);
    r.position[static_cast<std::size_t>(s)] = at;
  }
  const auto& gate_up = weights_[{layer, model::WeightId::expert_gate_up}].experts;
  const auto& down = weights_[{layer, model::WeightId::expert_down}].experts;
  r.rows_independent = gate_up[0]->rows_independent() && down[0]->rows_independent();
  grow(r.group, rows_ * used);
  std::int32_t chosen = 0;
  for (int e = 0; e < n; ++e) {
    const auto begin = r.group.begin() + r.first[static_cast<std::size_t>(e)];
    const auto end = r.group.begin() + r.first[static_cast<std::size_t>(e) + 1];
    if (begin == end) continue;
    std::fill(begin, end, chosen++);
  }
}

void CpuOps::routed_feed_forward(int layer, model::FeedForward kind, model::Activation in, model::Activation out,
                                 bool accumulate, std::int64_t slot_begin, std::int64_t slot_end) {
  const int used = config_.experts_used;
  const float* h = at(in);
  if (slot_begin == 0) {
    if (observer_ != nullptr) observer_->observe({layer, model::WeightId::router}, h, rows_, config_.embedding);
    route(layer, h);
    grow(routing_.out, rows_ * used * config_.embedding);
    experts_run_ = 0;
  }
  EMBER_ASSERT(0 <= slot_begin && slot_begin <= slot_end && slot_end <= rows_ * used);
  const bool last = slot_end == rows_ * used;
  if (!routing_.rows_independent) {
    // Linears whose rows depend on their company (FP32) run an expert's rows together: a part
    // runs the experts whose first slot it holds, whole, so any split gives the same bits.
    slot_begin = expert_boundary(slot_begin);
    slot_end = expert_boundary(slot_end);
  }
  if (slot_begin < slot_end) run_slots(layer, kind, h, slot_begin, slot_end);
  if (last) finish_routed(out, accumulate);
}

// The first slot of the expert that holds `slot`, when it is that; else the next expert's.
std::int64_t CpuOps::expert_boundary(std::int64_t slot) const {
  const Routing& r = routing_;
  if (slot >= rows_ * config_.experts_used) return slot;
  const auto e = static_cast<std::size_t>(r.expert[static_cast<std::size_t>(r.slots[static_cast<std::size_t>(slot)])]);
  return r.first[e] == slot ? slot : r.first[e + 1];
}

// Slots [slot_begin, slot_end) of the routed rows: the experts they fall in (the first and last
// perhaps cut by the part's ends), each one's rows gathered after the other's, and each linear
// of all of them as one stacked product (forward_gathered, forward_stacked: one parallel region,
// not one per expert). Their down outputs land in r.out at the slots' places.
void CpuOps::run_slots(int layer, model::FeedForward kind, const float* h, std::int64_t slot_begin,
                       std::int64_t slot_end) {
  const int used = config_.experts_used;
  const std::int64_t d = config_.embedding, f = config_.expert_ffn;
  Routing& r = routing_;
  const auto& gate_up = weights_[{layer, model::WeightId::expert_gate_up}].experts;
  const auto& down = weights_[{layer, model::WeightId::expert_down}].experts;
  r.gate_up_linears.clear();
  r.down_linears.clear();
  r.expert_rows.clear();
  const auto expert_of = [&](std::int64_t slot) {
    return r.expert[static_cast<std::size_t>(r.slots[static_cast<std::size_t>(slot)])];
  };
  for (int e = expert_of(slot_begin); e <= expert_of(slot_end - 1); ++e) {
    const std::int64_t first = r.first[static_cast<std::size_t>(e)];
    const std::int64_t rows =
        std::min<std::int64_t>(r.first[static_cast<std::size_t>(e) + 1], slot_end) - std::max(first, slot_begin);
    if (rows <= 0) continue;                  // an expert no row chose: its weights are not read
    if (first >= slot_begin) ++experts_run_;  // counted in the part that holds its first slot
    r.gate_up_linears.push_back(gate_up[static_cast<std::size_t>(e)].get());
    r.down_linears.push_back(down[static_cast<std::size_t>(e)].get());
    r.expert_rows.push_back(rows);
  }
  const std::int64_t m = slot_end - slot_begin;
  grow(r.gate_up, m * 2 * f);
  grow(r.act, m * f);
  grow(r.gather, m);
  for (std::int64_t i = 0; i < m; ++i)
    r.gather[static_cast<std::size_t>(i)] = r.slots[static_cast<std::size_t>(slot_begin + i)] / used;
  const auto count = static_cast<std::int64_t>(r.expert_rows.size());
  // gate|up reads each row of h once, quantized once for all of its experts.
  k::forward_gathered(ctx_, r.gate_up_linears.data(), r.expert_rows.data(), count, h, rows_, r.gather.data(),
                      r.gate_up.data(), r.stacked);
  if (kind == model::FeedForward::geglu)
    k::gelu_mul(r.gate_up.data(), m, f, r.act.data(), ctx_.threads);
  else
    k::silu_mul(r.gate_up.data(), m, f, r.act.data(), ctx_.threads);
  // In slots order, so no copy: finish_routed finds each slot through r.position.
  k::forward_stacked(ctx_, r.down_linears.data(), r.expert_rows.data(), count, r.act.data(),
                     r.out.data() + slot_begin * d, r.stacked);
}

// After the last part: each row's sum over its experts in rank order, into the residual (or out).
void CpuOps::finish_routed(model::Activation out, bool accumulate) {
  const int used = config_.experts_used;
  const std::int64_t d = config_.embedding;
  Routing& r = routing_;
  routed_layers_run_.fetch_add(1, std::memory_order_relaxed);
  experts_run_total_.fetch_add(static_cast<std::uint64_t>(experts_run_), std::memory_order_relaxed);
  float* y = at(out);
  // Each output value's sum in rank order (the same operations whatever the split of rows).
  k::for_rows(rows_, ctx_.threads, rows_ * used * d >= (1 << 16), [&](std::int64_t row) {
    float* dst = y + row * d;
    const float* w = r.weight.data() + row * used;
    const std::int32_t* at = r.position.data() + row * used;
    float sum[256];
    for (std::int64_t i0 = 0; i0 < d; i0 += 256) {
      const std::int64_t n = std::min<std::int64_t>(256, d - i0);
      for (std::int64_t i = 0; i < n; ++i) sum[i] = 0.0f;
      for (int j = 0; j < used; ++j) {
        const float* o = r.out.data() + std::int64_t{at[j]} * d + i0;
        for (std::int64_t i = 0; i < n; ++i) sum[i] += w[j] * o[i];
      }
      for (std::int64_t i = 0; i < n; ++i) dst[i0 + i] = accumulate ? dst[i0 + i] + sum[i] : sum[i];
    }
  });
}

}  // namespace ember::backend::cpu
