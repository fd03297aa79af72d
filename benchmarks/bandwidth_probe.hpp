// ember-bench's memory read bandwidth probe: the most this machine reads from memory with the
// engine's thread count, so that the decode ceiling it implies (bandwidth / weight bytes read per
// token) is not flattering. It measures two independent ways, on one 1 GiB buffer:
//  - an OpenMP team of `threads`, entered from the calling thread the way decode's kernels enter
//    theirs (kernels/cpu/parallel.hpp; ember-bench decodes on its main thread, so this is the
//    very team decode uses, placed wherever OMP_PROC_BIND / OMP_PLACES put decode's);
//  - `threads` std::thread workers, each pinned with pthread_setaffinity_np to its own allowed
//    CPU (one per physical core first), each reading its own slice.
// Each pass of either method reads the whole buffer with the widest loads the CPU has (AVX-512,
// else AVX2, chosen at run time), timed from a start barrier to the last worker's end; the best
// pass of each method is kept. The ceiling is the larger of the two; when they disagree by more
// than kBandwidthDisagreement, one of them is being held back (a busy core, threads sharing one)
// and the reading says so.
#pragma once

#include "kernels/cpu/weight_arena.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ember::bench {

// Above this relative difference between the two methods ember-bench warns.
inline constexpr double kBandwidthDisagreement = 0.20;

// One measurement: the best pass of each method, bytes/s.
struct BandwidthReading {
  double openmp = 0;  // the OpenMP team, as decode runs
  double pinned = 0;  // the pinned std::thread workers

  double ceiling() const { return openmp > pinned ? openmp : pinned; }
  // larger / smaller - 1 (0 when either is missing)
  double disagreement() const;
  // Each method's better figure of this and `other`.
  void keep_best(const BandwidthReading& other);
};

// Owns the buffer (1 GiB, in 2 MiB pages where the kernel gives them). Not thread-safe: one
// measurement at a time.
class BandwidthProbe {
 public:
  // threads <= 0: one per hardware thread, as the engine resolves it. The read loop is the
  // widest the active tier runs (kernels/cpu/cpu_tier.hpp, as the decode kernels choose).
  explicit BandwidthProbe(int threads);
  ~BandwidthProbe();
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;

  // `passes` passes of each method, alternating so that drift hits both alike; the best of each.
  BandwidthReading measure(int passes) const;

  int threads() const { return threads_; }
  std::size_t bytes() const { return bytes_; }
  const char* loads() const { return loads_name_; }              // "avx512", "avx2" or "baseline"
  const std::vector<int>& pinned_cpus() const { return cpus_; }  // worker t runs on cpus[t % size]
  bool explicit_huge_pages() const { return hugetlb_; }          // MAP_HUGETLB (a reserved pool)
  // The part of the buffer in huge pages, from /proc/self/smaps (-1 where it cannot be read).
  double huge_page_fraction() const;
  // OMP_PROC_BIND and OMP_PLACES as set in the environment ("unset" each otherwise).
  static std::string openmp_binding();

 private:
  using ReadFn = std::uint64_t (*)(const std::uint64_t*, std::size_t);
  double openmp_pass() const;
  double pinned_pass() const;

  int threads_;
  std::size_t bytes_;
  std::uint64_t* buffer_ = nullptr;
  bool hugetlb_ = false;
  // Without a reserved pool, the buffer lives where decode's weights do.
  std::unique_ptr<kernels::cpu::WeightArena> arena_;
  ReadFn read_;
  const char* loads_name_;
  std::vector<int> cpus_;
};

// What ember-bench reports of a reading of `passes` passes a method: two lines of text (each
// method's figure and the ceiling; how the probe read), and the same as JSON.
std::string describe(const BandwidthProbe& probe, const BandwidthReading& reading, int passes);
nlohmann::json to_json(const BandwidthProbe& probe, const BandwidthReading& reading, int passes);

// A warning when the two methods disagree by more than kBandwidthDisagreement; empty otherwise.
std::string disagreement_warning(const BandwidthReading& reading);

// A warning when decode read its weights faster than the ceiling (`fraction` > 1 of it, for a
// step reading `weight_bytes`); empty otherwise. `what` names the run ("int8 tg128").
std::string over_ceiling_warning(const std::string& what, double fraction, double weight_bytes);

}  // namespace ember::bench
