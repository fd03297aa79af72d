#include "backend/load_progress.hpp"

#include "util/check.hpp"

#include <algorithm>

namespace ember::backend {
namespace {

// Shares of a cold INT8 load of the default model (SmolLM2-135M, 2 threads): reading and
// tokenizer a few percent, preparing the weights (dequantize, calibrate, quantize and pack, a
// layer at a time) the rest. Only the shape of the bar depends on them.
constexpr float kReading = 2, kTokenizer = 3, kWeights = 93, kCache = 2;

}  // namespace

LoadProgress::LoadProgress(LoadProgressCallback callback) : callback_(std::move(callback)) {
  plan({{LoadPhase::reading, kReading},
        {LoadPhase::tokenizer, kTokenizer},
        {LoadPhase::weights, kWeights},
        {LoadPhase::cache, kCache}});
}

void LoadProgress::plan_preparation() { plan({{LoadPhase::weights, kWeights}, {LoadPhase::cache, kCache}}); }

void LoadProgress::plan(std::initializer_list<std::pair<LoadPhase, float>> phases) {
  float total = 0;
  for (const auto& [phase, weight] : phases) total += std::max(weight, 0.0f);
  spans_.clear();
  float begin = reported_;
  for (const auto& [phase, weight] : phases) {
    const float end = total > 0 ? begin + (1.0f - reported_) * std::max(weight, 0.0f) / total : begin;
    spans_.push_back({phase, begin, end});
    begin = end;
  }
  if (!spans_.empty()) spans_.back().end = 1.0f;  // no rounding gap before the last report
}

void LoadProgress::report(LoadPhase phase, float fraction) {
  fraction = std::clamp(fraction, 0.0f, 1.0f);
  float overall = reported_;
  for (const Span& s : spans_)
    if (s.phase == phase) overall = s.begin + (s.end - s.begin) * fraction;
  reported_ = std::max(reported_, overall);
  last_phase_ = phase;
  if (callback_ && !callback_(phase, reported_))
    fail(ErrorCode::cancelled, "loading was cancelled by the progress callback ({}, {:.0f} % done)", to_string(phase),
         100.0f * reported_);
}

void LoadProgress::finish() {
  reported_ = 1.0f;
  report(last_phase_, 1.0f);
}

}  // namespace ember::backend
