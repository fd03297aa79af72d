// What one layer of a step costs as a function of its rows, learned from the steps the engine
// ran: time = fixed + per_row * rows, the line through a running average of small steps (a few
// decodes) and the latest large one (a prefill chunk). The fixed part is mostly reading the
// layer's weights, the per-row part the rows' arithmetic and attention over their context (a
// long prompt's later chunks attend to more of it and cost more per row than its first: an
// average over its chunks would lag behind and overrun the budget). A budgeted step takes as
// many rows as fit in its budget (Stepper::rows_for_budget), so a frame is spent on work it can
// finish.
//
// A least-squares line through all steps was tried first: the many small steps of a decode
// phase pinned its slope, which then said a 400-row layer of the default model would take half
// of what it took.
//
// Thread-safety: none; the stepper owns it.
#pragma once

namespace ember::runtime {

class StepCost {
 public:
  // Steps of at least this many rows are large (the latest sets the per-row cost), smaller ones
  // go into the small steps' average.
  static constexpr int kLargeStep = 32;

  // A finished step: `rows` rows, `layer_seconds` per layer.
  void add(int rows, double layer_seconds);
  bool known() const { return small_.rows > 0 || large_.rows > 0; }
  // The expected seconds of one layer of a step of `rows` rows (0 while nothing is known).
  double layer_seconds(int rows) const { return fixed_ + per_row_ * rows; }
  // The most rows whose layer is expected to take at most `seconds` (0: not even one row, or
  // nothing known yet).
  int rows_within(double seconds) const;

 private:
  struct Average {  // running averages of the steps' rows and per-layer seconds
    double new_weight;  // of a new step
    double rows = 0, seconds = 0;
    void add(double r, double s);
  };
  void fit();

  // Small steps are noisy (a layer of a few decodes is short) and alike: an average. A large
  // step is measured over many rows, and the next one is most like it (a prompt's next chunk):
  // the latest counts alone.
  Average small_{0.3}, large_{1.0};
  double fixed_ = 0, per_row_ = 0;  // the line
};

}  // namespace ember::runtime
