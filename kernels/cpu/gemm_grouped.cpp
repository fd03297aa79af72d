// The grouped kernel (see gemm_grouped.hpp for the layout and the arithmetic): packing,
// activation quantization, and the dispatch to the instruction-set tiers that multiply
// (gemm_grouped_tiers.hpp; kernels/cpu/gemm_grouped_scalar.cpp, kernels/cpu/arch/x86/ and
// kernels/cpu/arch/arm/).
#include "kernels/cpu/gemm_grouped.hpp"

#include "kernels/cpu/gemm_grouped_tiers.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/quantize.hpp"
#include "util/check.hpp"
#include "util/fp16.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace ember::kernels::cpu {

namespace {

// Below this many weight bytes per thread, forking the OpenMP team costs more than it saves.
constexpr std::int64_t kMinBytesPerThread = 64 * 1024;

// A tier's kernels: the tile product and the activations' quantizer.
struct TierKernels {
  grouped::TileFn tile;
  grouped::QuantizeGroupsFn quantize_groups;
};

// The one table of the grouped kernel's tiers. AVX2's quantizer serves every x86 tier above it;
// the arm64 tiers quantize with the portable form.
TierKernels tier_kernels(CpuTier tier) {
  static_assert(kWeightGroup == 32, "the quantizers' groups");
#if defined(__x86_64__) || defined(_M_X64)
  switch (tier) {
    case CpuTier::amx:
    case CpuTier::avx512_vnni: return {&grouped::tile_avx512_vnni, &grouped::quantize_groups_avx2};
    case CpuTier::avx_vnni:
      return {cpu_has_avx_vnni_vex() ? &grouped::tile_avx_vnni : &grouped::tile_avx_vnni_evex,
              &grouped::quantize_groups_avx2};
    case CpuTier::avx2: return {&grouped::tile_avx2, &grouped::quantize_groups_avx2};
    default: break;
  }
#elif defined(__aarch64__) || defined(_M_ARM64)
  switch (tier) {
    case CpuTier::i8mm:  // no smmla form yet: the dotprod kernel
    case CpuTier::dotprod: return {&grouped::tile_dotprod, &grouped::quantize_groups_scalar};
    case CpuTier::neon: return {&grouped::tile_neon, &grouped::quantize_groups_scalar};
    default: break;
  }
#else
  (void)tier;
#endif
  return {&grouped::tile_scalar, &grouped::quantize_groups_scalar};
}

// What every tile of one product shares.
// x's rows [first_row, first_row + rows).
grouped::TileJob job_of(const GroupedWeights& w, const GroupedActivations& x, std::int64_t first_row, std::int64_t rows,
                        float* y, bool accumulate) {
  const auto by_group = static_cast<std::size_t>(x.rows * x.groups());
  if (x.sums_by_group.size() != by_group || x.scales_by_group.size() != by_group)
    fail(ErrorCode::invalid_argument,
         "grouped gemm: activations of {} rows without their sums by group (index_by_group)", x.rows);
  grouped::TileJob job;
  job.spans = w.spans();
  job.record_bytes = w.record_bytes();
  job.bits = w.format().bits;
  job.offsets = w.format().offsets;
  job.accumulate = accumulate;
  job.terms = x.terms;
  const GroupedPrefetch prefetch = grouped_prefetch(w.streamed_from_memory());
  job.prefetch_ahead = prefetch.ahead;
  job.prefetch_into_l1 = prefetch.into_l1;
  const std::int64_t first_term_row = first_row * x.terms;
  job.q = x.q.data() + first_term_row * x.q_stride();
  job.scales = x.scales.data() + first_term_row * x.groups();
  job.sums = x.sums.data() + first_term_row * x.groups();
  if (x.terms == 2) job.wide = x.wide.data() + first_row * x.q_stride();
  job.sums_by_group = x.sums_by_group.data() + first_row;
  job.scales_by_group = x.scales_by_group.data() + first_row;
  job.by_group_stride = x.rows;
  job.q_stride = x.q_stride();
  job.groups = x.groups();
  job.term_rows = rows * x.terms;
  job.y = y;
  job.out = w.out();
  return job;
}

// The work of one output tile of w over `term_rows` rows, in weight bytes streamed (once per
// grouped::kTileRows rows), and the team that work is worth.
std::int64_t tile_work(const GroupedWeights& w, std::int64_t term_rows) {
  return w.bytes() / w.tiles() * ((term_rows + grouped::kTileRows - 1) / grouped::kTileRows);
}
int team_for(std::int64_t work, int threads) {
  return static_cast<int>(std::clamp<std::int64_t>(work / kMinBytesPerThread, 1, std::max(threads, 1)));
}

void size_by_group(GroupedActivations& a) {
  a.sums_by_group.resize(static_cast<std::size_t>(a.rows * a.groups()));
  a.scales_by_group.resize(static_cast<std::size_t>(a.rows * a.groups()));
}

// Row r's terms into a's copy by group (sized by size_by_group).
void index_row_by_group(GroupedActivations& a, std::int64_t r) {
  const std::int64_t rows = a.rows, groups = a.groups(), terms = a.terms;
  const std::int32_t* sums = a.sums.data() + r * terms * groups;
  const float* scales = a.scales.data() + (r * terms + terms - 1) * groups;  // the low term's with two
  for (std::int64_t g = 0; g < groups; ++g) {
    const auto at = static_cast<std::size_t>(g * rows + r);
    a.sums_by_group[at] = terms == 2 ? kLowTermSteps * sums[g] + sums[groups + g] : sums[g];
    a.scales_by_group[at] = scales[g];
  }
}

}  // namespace

CpuTier grouped_gemm_tier() { return active_tier() == CpuTier::amx ? CpuTier::avx512_vnni : active_tier(); }

GroupedWeights::GroupedWeights(std::int64_t out, std::int64_t in, GroupFormat format, const GroupedRowSource& source,
                               std::shared_ptr<WeightArena> arena, int threads)
    : out_(out), in_(in), format_(format), spans_((in + 63) / 64), arena_(std::move(arena)) {
  if (format.bits != 4 && format.bits != 8)
    fail(ErrorCode::invalid_argument, "grouped weights: {} bits a value (4 or 8)", format.bits);
  if (out <= 0 || in <= 0 || in % kWeightGroup != 0)
    fail(ErrorCode::invalid_argument, "grouped weights: bad weight shape out={} in={} (in must be a multiple of {})",
         out, in, kWeightGroup);
  if (!arena_) fail(ErrorCode::invalid_argument, "grouped weights: no weight arena");
  if (!source) fail(ErrorCode::invalid_argument, "grouped weights: no row source");
  std::uint8_t* dst = reinterpret_cast<std::uint8_t*>(arena_->allocate(static_cast<std::size_t>(bytes())));
  packed_ = dst;
  const std::int64_t groups = in / kWeightGroup, record = record_bytes(), lines = value_lines();
  const std::int64_t group_bytes = kWeightGroup * format.bits / 8;
  // One block of 16 rows per task: its rows' values land in the same records.
  for_rows(blocks(), threads, blocks() > 1, [&](std::int64_t block) {
    std::vector<std::uint8_t> values(static_cast<std::size_t>(groups * group_bytes));
    std::vector<float> scales(static_cast<std::size_t>(groups)), offs(static_cast<std::size_t>(groups));
    const std::int64_t t = block / kTileBlocks, nb = blocks_in(t);
    std::uint8_t* tile = dst + t * kTileBlocks * spans_ * record;
    const std::int64_t b = block % kTileBlocks;
    for (std::int64_t r = 0; r < 16 && block * 16 + r < out; ++r) {
      source(block * 16 + r, values.data(), scales.data(), offs.data());
      for (std::int64_t g = 0; g < groups; ++g) {
        std::uint8_t* span = tile + g / 2 * nb * record;
        const std::int64_t h = g % 2;
        // 4 bits: inputs 4j..4j+3 and 16+4j..16+4j+3 of the group are nibble bytes 4j..4j+3;
        // 8 bits: each has its line, the same 4 bytes of it.
        const std::uint8_t* v = values.data() + g * group_bytes;
        for (std::int64_t j = 0; j < group_bytes / 4; ++j)
          std::memcpy(span + ((h * lines / 2 + j) * nb + b) * 64 + r * 4, v + 4 * j, 4);
        const std::uint16_t d = float_to_fp16(scales[static_cast<std::size_t>(g)]);
        std::memcpy(span + nb * lines * 64 + (h * nb + b) * 32 + r * 2, &d, 2);
        if (format.offsets) {
          const std::uint16_t o = float_to_fp16(offs[static_cast<std::size_t>(g)]);
          std::memcpy(span + nb * (lines + 1) * 64 + (h * nb + b) * 32 + r * 2, &o, 2);
        }
      }
    }
  });
}

void quantize_grouped_activations(const float* x, std::int64_t rows, std::int64_t in, std::int64_t ldx,
                                  std::int64_t padded_in, GroupedActivations& a, int threads, int terms, CpuTier tier) {
  if (rows < 0 || in <= 0 || in % kWeightGroup != 0 || ldx < in || padded_in < in || padded_in % kWeightGroup != 0 ||
      (terms != 1 && terms != 2))
    fail(ErrorCode::invalid_argument, "grouped activations: bad shape rows={} in={} ldx={} padded_in={} terms={}", rows,
         in, ldx, padded_in, terms);
  if (!tier_available(tier))
    fail(ErrorCode::invalid_argument, "grouped activations: tier {} is not available on this CPU", to_string(tier));
  const grouped::QuantizeGroupsFn quantize_groups = tier_kernels(tier).quantize_groups;
  a.rows = rows;
  a.padded_in = padded_in;
  a.terms = terms;
  const std::int64_t groups = a.groups(), in_groups = in / kWeightGroup, stride = a.q_stride();
  a.q.resize(static_cast<std::size_t>(a.term_rows() * stride));
  a.scales.resize(static_cast<std::size_t>(a.term_rows() * groups));
  a.sums.resize(static_cast<std::size_t>(a.term_rows() * groups));
  a.wide.resize(terms == 2 ? static_cast<std::size_t>(rows * stride) : 0);
  size_by_group(a);
  for_rows(rows, threads, rows * in >= kQuantizeParallelElements, [&](std::int64_t r) {
    std::int8_t* q = a.q.data() + r * terms * stride;
    float* scales = a.scales.data() + r * terms * groups;
    if (terms == 1) {
      quantize_groups(x + r * ldx, in_groups, q, scales, a.sums.data() + r * groups);
    } else {  // each group is a "row" of the two-term quantizer: its own two scales
      quantize_rows_s8_residual(x + r * ldx, in_groups, kWeightGroup, kWeightGroup, q, scales, q + stride,
                                scales + groups);
      for (int term = 0; term < terms; ++term)
        grouped::sum_groups(q + term * stride, in_groups, a.sums.data() + (r * terms + term) * groups);
    }
    for (int term = 0; term < terms; ++term) {
      std::int8_t* tq = q + term * stride;
      std::int32_t* sums = a.sums.data() + (r * terms + term) * groups;
      std::fill(sums + in_groups, sums + groups, 0);
      std::fill(tq + in, tq + stride, std::int8_t{0});
      std::fill(scales + term * groups + in_groups, scales + (term + 1) * groups, 0.0f);
    }
    if (terms == 2)
      for (std::int64_t k = 0; k < stride; ++k)
        a.wide[static_cast<std::size_t>(r * stride + k)] =
            static_cast<std::int16_t>(kLowTermSteps * q[k] + q[stride + k]);
    index_row_by_group(a, r);  // here, while the row is in this thread's cache
  });
}

void index_by_group(GroupedActivations& a) {
  size_by_group(a);
  for (std::int64_t r = 0; r < a.rows; ++r) index_row_by_group(a, r);
}

void gemm_grouped(const GroupedWeights& w, const GroupedActivations& x, float* y, bool accumulate, int threads) {
  gemm_grouped(w, x, y, accumulate, threads, 0, w.tiles());
}

void gemm_grouped(const GroupedWeights& w, const GroupedActivations& x, float* y, bool accumulate, int threads,
                  std::int64_t tile_begin, std::int64_t tile_end, CpuTier tier) {
  if (tile_begin < 0 || tile_begin > tile_end || tile_end > w.tiles())
    fail(ErrorCode::invalid_argument, "grouped gemm: tiles [{}, {}) of {}", tile_begin, tile_end, w.tiles());
  if (x.padded_in != w.padded_in())
    fail(ErrorCode::invalid_argument, "grouped gemm: activations of {} inputs for weights of {}", x.padded_in,
         w.padded_in());
  if (!tier_available(tier))
    fail(ErrorCode::invalid_argument, "grouped gemm: tier {} is not available on this CPU", to_string(tier));
  if (x.rows == 0) return;
  const grouped::TileFn fn = tier_kernels(tier).tile;
  const grouped::TileJob shared = job_of(w, x, 0, x.rows, y, accumulate);
  // Decode's few rows are bandwidth bound and small matrices are not worth a team; prefill
  // always is.
  const std::int64_t tiles = tile_end - tile_begin;
  const auto team = team_for(tile_work(w, x.term_rows()) * tiles, threads);
  for_tiles(tiles, team, [&](std::int64_t i, std::int64_t next) {
    const std::int64_t t = tile_begin + i;
    grouped::TileJob job = shared;
    job.weights = w.tile(t);
    job.next_weights = next < 0 ? nullptr : w.tile(tile_begin + next);
    job.blocks = static_cast<int>(w.blocks_in(t));
    job.first_output = t * GroupedWeights::kTileOutputs;
    fn(job);
  });
}

void gemm_grouped_batch(const GroupedProduct* products, std::int64_t count, int threads, CpuTier tier) {
  if (!tier_available(tier))
    fail(ErrorCode::invalid_argument, "grouped gemm: tier {} is not available on this CPU", to_string(tier));
  // first[p]: the first of product p's tiles in the batch's numbering; jobs[p]: what its tiles
  // share, built before the region (each tile read its product's weights object, a cache miss
  // once the tile before had streamed through L1). On the stack for the few products of a decode
  // step: no allocation per call.
  constexpr std::int64_t kInline = 16;
  std::array<std::int64_t, kInline + 1> inline_first{};
  std::array<grouped::TileJob, kInline> inline_jobs{};
  std::vector<std::int64_t> heap_first;
  std::vector<grouped::TileJob> heap_jobs;
  std::int64_t* first = inline_first.data();
  grouped::TileJob* jobs = inline_jobs.data();
  if (count > kInline) {
    heap_first.resize(static_cast<std::size_t>(count + 1));
    heap_jobs.resize(static_cast<std::size_t>(count));
    first = heap_first.data();
    jobs = heap_jobs.data();
  }
  first[0] = 0;
  std::int64_t work = 0;
  for (std::int64_t p = 0; p < count; ++p) {
    const GroupedProduct& g = products[p];
    if (g.w == nullptr || g.x == nullptr || g.first_row < 0 || g.rows < 0 || g.first_row + g.rows > g.x->rows)
      fail(ErrorCode::invalid_argument, "grouped gemm batch: product {} has rows [{}, {}) of {}", p, g.first_row,
           g.first_row + g.rows, g.x == nullptr ? 0 : g.x->rows);
    if (g.x->padded_in != g.w->padded_in())
      fail(ErrorCode::invalid_argument, "grouped gemm: activations of {} inputs for weights of {}", g.x->padded_in,
           g.w->padded_in());
    const std::int64_t tiles = g.rows == 0 ? 0 : g.w->tiles();
    first[p + 1] = first[p] + tiles;
    work += tile_work(*g.w, g.rows * g.x->terms) * tiles;
    jobs[p] = job_of(*g.w, *g.x, g.first_row, g.rows, g.y, g.accumulate);
    jobs[p].weights = g.w->tile(0);
    // The last tile's blocks (every other tile has kTileBlocks).
    jobs[p].blocks = tiles == 0 ? 0 : static_cast<int>(g.w->blocks_in(tiles - 1));
  }
  const grouped::TileFn fn = tier_kernels(tier).tile;
  // Where tile i of the batch's numbering starts (a product's tiles are one after another).
  const auto tile_weights = [&](std::int64_t i, std::int64_t p) {
    return jobs[p].weights + (i - first[p]) * GroupedWeights::kTileBlocks * jobs[p].spans * jobs[p].record_bytes;
  };
  for_tiles(first[count], team_for(work, threads), [&](std::int64_t i, std::int64_t next) {
    const std::int64_t p = std::upper_bound(first, first + count + 1, i) - first - 1;
    const std::int64_t t = i - first[p];
    grouped::TileJob job = jobs[p];
    job.weights = tile_weights(i, p);
    if (next >= 0) {  // in the next product with tiles when it is past p's last
      std::int64_t q = p;
      while (next >= first[q + 1]) ++q;
      job.next_weights = tile_weights(next, q);
    }
    if (i + 1 < first[p + 1]) job.blocks = static_cast<int>(GroupedWeights::kTileBlocks);
    job.first_output = t * GroupedWeights::kTileOutputs;
    fn(job);
  });
}

}  // namespace ember::kernels::cpu
