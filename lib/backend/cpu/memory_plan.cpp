#include "backend/cpu/memory_plan.hpp"

#include "util/check.hpp"
#include "util/platform.hpp"

#include <algorithm>
#include <string>

namespace ember::backend::cpu {

MemoryPlan plan_memory(const model::ModelConfig& c, Precision gemm, FourBitShares four_bit) {
  const std::uint64_t d = static_cast<std::uint64_t>(c.embedding), ffn = static_cast<std::uint64_t>(c.ffn);
  const std::uint64_t q = static_cast<std::uint64_t>(c.heads) * static_cast<std::uint64_t>(c.head_dim);
  const std::uint64_t kv = static_cast<std::uint64_t>(c.kv_heads) * static_cast<std::uint64_t>(c.head_dim);
  // A routed layer's feed-forward: every expert's three matrices and the router; preparation
  // holds one expert at a time beside the layer's attention.
  const std::uint64_t experts = static_cast<std::uint64_t>(c.experts),
                      expert_ffn = static_cast<std::uint64_t>(c.expert_ffn);
  const std::uint64_t feed_forward = c.routed() ? experts * 3 * expert_ffn * d + experts * d : 3 * ffn * d;
  const std::uint64_t layer = d * (q + 2 * kv) + q * d + feed_forward;  // weights per layer
  const std::uint64_t prepared_at_once = c.routed() ? d * (q + 2 * kv) + q * d + 3 * expert_ffn * d : layer;
  const std::uint64_t lm_head = static_cast<std::uint64_t>(c.vocab) * d;
  const std::uint64_t weights = layer * static_cast<std::uint64_t>(c.layers) + lm_head;
  MemoryPlan plan;
  if (gemm == Precision::int8) {
    // Two layouts of one byte a weight (scales are noise), or one of 9/16 or 5/8 of a byte.
    const auto share = [&](double s) { return static_cast<std::uint64_t>(s * static_cast<double>(weights)); };
    const std::uint64_t scale_only = share(four_bit.scale_only), with_offsets = share(four_bit.with_offsets);
    plan.prepared_bytes = 2 * (weights - scale_only - with_offsets) + scale_only / 16 * 9 + with_offsets / 8 * 5;
    plan.transient_bytes = std::max(2 * 4 * prepared_at_once, lm_head);
  } else {
    plan.prepared_bytes = 4 * weights;
    plan.transient_bytes = 4 * prepared_at_once;
  }
  return plan;
}

std::uint64_t available_memory() { return platform::available_memory_bytes(); }

void check_fits(const MemoryPlan& plan, std::uint64_t available, const model::ModelConfig& config) {
  if (available == 0 || plan.total() <= available) return;
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  fail(ErrorCode::out_of_memory,
       "model '{}' ({} layers, width {}, vocabulary {}) needs about {:.1f} GiB to open ({:.1f} GiB of "
       "prepared weights, {:.1f} GiB more while preparing them); {:.1f} GiB are available",
       config.name, config.layers, config.embedding, config.vocab, plan.total() / kGiB, plan.prepared_bytes / kGiB,
       plan.transient_bytes / kGiB, available / kGiB);
}

}  // namespace ember::backend::cpu
