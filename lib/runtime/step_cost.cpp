#include "runtime/step_cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ember::runtime {

void StepCost::Average::add(double r, double s) {
  const double keep = rows > 0 ? 1 - new_weight : 0;
  rows = keep * rows + (1 - keep) * r;
  seconds = keep * seconds + (1 - keep) * s;
}

void StepCost::add(int rows, double layer_seconds) {
  if (rows <= 0 || !(layer_seconds > 0) || !std::isfinite(layer_seconds)) return;
  (rows < kLargeStep ? small_ : large_).add(rows, layer_seconds);
  fit();
}

void StepCost::fit() {
  // With one kind of step only, all of its cost counts per row: larger steps are then
  // overestimated (safe) and smaller ones underestimated, until the other kind is measured.
  const Average& one = large_.rows > 0 ? large_ : small_;
  fixed_ = 0;
  per_row_ = one.seconds / one.rows;
  if (small_.rows <= 0 || large_.rows <= 0) return;
  const double slope = (large_.seconds - small_.seconds) / (large_.rows - small_.rows);
  // Noise (a small step meeting cold caches) can tilt the line: a row is never nearly free,
  // and the fixed part never negative nor more than a small step's whole cost.
  per_row_ = std::max(slope, 0.1 * large_.seconds / large_.rows);
  fixed_ = std::clamp(small_.seconds - per_row_ * small_.rows, 0.0, small_.seconds);
}

int StepCost::rows_within(double seconds) const {
  if (!known() || seconds <= fixed_) return 0;
  const double rows = (seconds - fixed_) / per_row_ * (1 + 1e-9);  // 9.99999 rows are 10
  return rows >= std::numeric_limits<int>::max() ? std::numeric_limits<int>::max() : static_cast<int>(rows);
}

}  // namespace ember::runtime
