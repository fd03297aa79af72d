// Row loops that go parallel only when they are large enough.
#pragma once

#include <cstdint>

namespace ember::kernels::cpu {

// fn(r) for every r in [0, rows): on `threads` OpenMP threads when `parallel` (and threads > 1),
// otherwise in a plain loop on the calling thread. The serial case does not enter OpenMP at
// all: `#pragma omp parallel if (false)` still builds a team of one thread, ~0.3 us per call on
// the dev box, and a decode step calls the small kernels ~270 times.
template <class Fn>
void for_rows(std::int64_t rows, int threads, bool parallel, Fn&& fn) {
  if (!parallel || threads <= 1) {
    for (std::int64_t r = 0; r < rows; ++r) fn(r);
    return;
  }
#pragma omp parallel for num_threads(threads)
  for (std::int64_t r = 0; r < rows; ++r) fn(r);
}

}  // namespace ember::kernels::cpu
