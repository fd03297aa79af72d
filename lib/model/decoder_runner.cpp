#include "model/decoder_runner.hpp"

#include <algorithm>
#include <bit>

namespace ember::model {
namespace {

constexpr double kCostMargin = 1.25;      // a part is planned at this many times its estimate: a
                                          // part after a frame's sleep meets cold caches
constexpr double kAttentionRowKeys = 32;  // a row's work beside its keys, in keys (a rough guess)
constexpr double kExpertSlots = 2;        // an expert's weight read, in slots (a rough guess)
constexpr double kCostDecay = 0.5;        // how much an older part counts in a stage's cost

}  // namespace

void PassRunner::StageCost::learn(const StageWork& work, bool first, bool last, double part_seconds,
                                  double part_weight) {
  const bool has_setup = work.split == StageWork::Split::outputs || work.split == StageWork::Split::slots;
  const bool has_finish = work.split == StageWork::Split::slots;
  // A unit's cost is learnt from parts without the setup or the finish.
  if (has_setup && first) {
    if (known()) first_part = std::max(0.0, part_seconds - unit() * part_weight);
    return;
  }
  if (has_finish && last) {
    if (known()) last_part = std::max(0.0, part_seconds - unit() * part_weight);
    return;
  }
  // Counted by weight, a part of a few units (a frame's last, or the smallest part that learns a
  // stage) moves the estimate little: its fixed costs (a parallel region's start) weigh more
  // against its work than a large part's, and a large part planned from it overran.
  seconds = kCostDecay * seconds + part_seconds;
  weight = kCostDecay * weight + part_weight;
}

void PassRunner::begin(DecoderOps& ops, std::span<const std::int32_t> positions, std::int64_t logit_rows,
                       std::int64_t hidden_rows) {
  const auto rows = static_cast<std::int64_t>(positions.size());
  // What a unit costs depends on the rows; attention's also on the context, new every pass.
  if (rows != rows_ || logit_rows != logit_rows_ || hidden_rows != hidden_rows_) costs_.fill({});
  costs_[static_cast<std::size_t>(Stage::attention)] = {};
  ops_ = &ops;
  positions_ = positions;
  rows_ = rows;
  logit_rows_ = logit_rows;
  hidden_rows_ = hidden_rows;
  layer_ = 0;
  stage_ = 0;
  next_unit_ = 0;
  begin_step(config_, ops);
}

// The next stage with units left to run, moving past finished ones; false when the pass is done.
bool PassRunner::next_part(Part& part) {
  while (layer_ <= config_.layers) {
    const bool head = layer_ == config_.layers;
    const std::span<const Stage> stages =
        head ? std::span<const Stage>(kHeadStages) : std::span<const Stage>(kLayerStages);
    if (stage_ == stages.size()) {
      stage_ = 0;
      ++layer_;
      continue;
    }
    part.stage = stages[stage_];
    part.layer = head ? -1 : layer_;
    part.rows = head ? head_rows(part.stage, logit_rows_, hidden_rows_) : rows_;
    part.work = stage_work(config_, part.layer, part.stage, part.rows);
    if (next_unit_ < part.work.units) return true;
    ++stage_;
    next_unit_ = 0;
  }
  return false;
}

bool PassRunner::advance(Clock::time_point deadline) {
  bool ran = false;
  Part part;
  while (next_part(part)) {
    const std::int64_t n = units_to_run(part, deadline, ran);
    if (n == 0) return false;
    const auto start = Clock::now();
    run_stage(config_, part.layer, part.stage, *ops_, part.rows, next_unit_, next_unit_ + n);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    costs_[static_cast<std::size_t>(part.stage)].learn(part.work, next_unit_ == 0, next_unit_ + n == part.work.units,
                                                       seconds, units_weight(part, next_unit_, next_unit_ + n));
    next_unit_ += n;
    ran = true;
  }
  return true;
}

// The smallest part of a stage the ops may run, at most `left` units: the whole stage where they
// cannot split it.
std::int64_t PassRunner::granule(const Part& part, std::int64_t left) const {
  std::int64_t g = 0;
  if (part.work.split == StageWork::Split::outputs)
    g = ops_->output_granule(part.work.weight, part.rows);
  else if (part.work.split == StageWork::Split::rows)
    g = ops_->attention_row_granule();
  else if (part.work.split == StageWork::Split::slots)
    g = 1;
  return g <= 0 ? left : std::min(g, left);
}

// The units of the part's stage to run now: as many as are expected to end by the deadline, in
// the stage's granule; 0 when not even one granule is (unless nothing ran yet in this call).
std::int64_t PassRunner::units_to_run(const Part& part, Clock::time_point deadline, bool ran) const {
  const std::int64_t left = part.work.units - next_unit_;
  if (deadline == Clock::time_point::max()) return left;  // the rest of the pass: no parts
  const std::int64_t g = granule(part, left);
  const StageCost& cost = costs_[static_cast<std::size_t>(part.stage)];
  const auto now = Clock::now();  // (deadline - now overflows for time_point::min())
  const double time_left = deadline <= now ? 0.0 : std::chrono::duration<double>(deadline - now).count();
  if (!cost.known()) return ran && time_left <= 0 ? 0 : g;  // learn a unit's cost from the smallest part
  const double fit = (time_left / kCostMargin - (next_unit_ == 0 ? cost.first_part : 0.0)) / cost.unit();
  std::int64_t n = 0;
  if (part.work.split == StageWork::Split::slots) {
    if (next_unit_ == 0) {
      n = fit >= 0 ? g : 0;  // the routing, with one slot: where the others' experts change is not known yet
    } else if (units_weight(part, next_unit_, part.work.units) + cost.last_part / cost.unit() <= fit) {
      n = left;  // the rest, with the rows' sums
    } else {     // the most slots that fit short of the last: a part's weight grows with its slots
      for (auto step = static_cast<std::int64_t>(std::bit_floor(static_cast<std::uint64_t>(left))); step > 0; step /= 2)
        if (n + step < left && units_weight(part, next_unit_, next_unit_ + n + step) <= fit) n += step;
    }
  } else if (part.work.split == StageWork::Split::rows) {
    for (double weight = 0; n < left;) {
      const std::int64_t next = std::min(g, left - n);
      weight += units_weight(part, next_unit_ + n, next_unit_ + n + next);
      if (weight > fit) break;
      n += next;
    }
  } else {
    n = fit >= static_cast<double>(left) ? left : static_cast<std::int64_t>(std::max(0.0, fit)) / g * g;
  }
  if (n == 0 && !ran) n = g;
  return n;
}

// What units [begin, end) of a stage weigh against its others: a product's outputs alike; an
// attention row by the keys it reads, which grow along a prompt's chunk, plus its own work; a
// routed stage's slots alike, plus a weight read for each expert they fall in.
double PassRunner::units_weight(const Part& part, std::int64_t begin, std::int64_t end) const {
  if (part.work.split == StageWork::Split::slots) {
    const std::int64_t experts = ops_->routed_experts(begin, end);
    return static_cast<double>(end - begin) + (experts < 0 ? 0.0 : kExpertSlots * static_cast<double>(experts));
  }
  if (part.work.split != StageWork::Split::rows) return static_cast<double>(end - begin);
  const int window = config_.attention_window(part.layer);
  double weight = 0;
  for (std::int64_t r = begin; r < end; ++r) {
    const double keys = positions_[static_cast<std::size_t>(r)] + 1.0;
    weight += (window > 0 ? std::min<double>(keys, window) : keys) + kAttentionRowKeys;
  }
  return weight;
}

}  // namespace ember::model
