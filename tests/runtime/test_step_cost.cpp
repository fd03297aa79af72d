#include "runtime/step_cost.hpp"

#include <doctest/doctest.h>

#include <initializer_list>

using ember::runtime::StepCost;

TEST_CASE("nothing is known before a step was measured") {
  StepCost cost;
  CHECK_FALSE(cost.known());
  CHECK(cost.layer_seconds(16) == 0);
  CHECK(cost.rows_within(0.004) == 0);
  cost.add(0, 0.001);  // no rows, no time, nonsense: ignored
  cost.add(8, 0);
  cost.add(8, -1);
  CHECK_FALSE(cost.known());
}

TEST_CASE("a fixed cost and a per-row cost are told apart") {
  // 2 ms to read a layer's weights and 0.2 ms per row, as a 1B model's layer might cost.
  StepCost cost;
  for (int rows : {8, 512, 9, 64, 8, 300, 16, 8, 200})
    cost.add(rows, 0.002 + 0.0002 * rows);
  CHECK(cost.known());
  CHECK(cost.layer_seconds(0) == doctest::Approx(0.002).epsilon(1e-6));
  CHECK(cost.layer_seconds(100) == doctest::Approx(0.022).epsilon(1e-6));
  CHECK(cost.rows_within(0.004) == 10);
  CHECK(cost.rows_within(0.012) == 50);
  CHECK(cost.rows_within(0.0019) == 0);  // not even the weights fit
}

TEST_CASE("a prompt's next chunk is estimated from its last, not from the average of its chunks") {
  StepCost cost;
  for (int i = 0; i < 5; ++i) cost.add(8, 0.001 + 0.0001 * 8);
  // Each chunk attends to more context: its rows cost more than the chunk's before.
  for (double per_row : {0.0001, 0.00015, 0.0002, 0.00025}) cost.add(256, 0.001 + per_row * 256);
  CHECK(cost.layer_seconds(256) == doctest::Approx(0.001 + 0.00025 * 256).epsilon(0.05));
}

TEST_CASE("one kind of step only: all of its cost counts per row") {
  StepCost small;
  for (int i = 0; i < 5; ++i) small.add(8, 0.004);
  CHECK(small.layer_seconds(8) == doctest::Approx(0.004));
  CHECK(small.layer_seconds(64) == doctest::Approx(0.032));  // larger steps: overestimated, safe
  CHECK(small.rows_within(0.002) == 4);
  StepCost large;
  large.add(256, 0.016);
  CHECK(large.layer_seconds(128) == doctest::Approx(0.008));
}

TEST_CASE("noise that tilts the line never makes a cost negative nor a row free") {
  StepCost cost;
  cost.add(8, 0.010);  // a small step that met cold caches
  cost.add(64, 0.004);
  CHECK(cost.layer_seconds(1) > 0);
  CHECK(cost.layer_seconds(64) > cost.layer_seconds(8));
  CHECK(cost.layer_seconds(640) >= 0.1 * 0.004 * 10);
  CHECK(cost.rows_within(0.001) >= 0);
}
