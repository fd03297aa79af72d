#include "bandwidth_probe.hpp"

#include "kernels/cpu/simd.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <thread>

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define EMBER_PROBE_X86 1
#endif

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kBufferBytes = std::size_t{1} << 30;  // 1 GiB: far beyond any L3
// Slices start on 4 KiB boundaries, so every worker's loads are aligned and whole.
constexpr std::size_t kSliceWords = 4096 / sizeof(std::uint64_t);
// libgomp's idle workers spin for a while after a parallel region (decode's, or the OpenMP
// pass's), and a pass that starts then shares the cores with them and reads low.
constexpr auto kPark = std::chrono::milliseconds(50);

// Sums of n words: the result is checked (the buffer holds ones), so no load is optimised away.
std::uint64_t read_baseline(const std::uint64_t* p, std::size_t n) {
  std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  for (; i < n; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3;
}

#ifdef EMBER_PROBE_X86
// Four independent accumulators of one register each: 256 bytes in flight per iteration.
__attribute__((target("avx512f"))) std::uint64_t read_avx512(const std::uint64_t* p, std::size_t n) {
  __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_add_epi64(s0, _mm512_load_si512(p + i));
    s1 = _mm512_add_epi64(s1, _mm512_load_si512(p + i + 8));
    s2 = _mm512_add_epi64(s2, _mm512_load_si512(p + i + 16));
    s3 = _mm512_add_epi64(s3, _mm512_load_si512(p + i + 24));
  }
  alignas(64) std::uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3)));
  std::uint64_t s = 0;
  for (std::uint64_t lane : lanes) s += lane;
  for (; i < n; ++i) s += p[i];
  return s;
}

__attribute__((target("avx2"))) std::uint64_t read_avx2(const std::uint64_t* p, std::size_t n) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    s2 = _mm256_add_epi64(s2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    s3 = _mm256_add_epi64(s3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  alignas(32) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
  std::uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += p[i];
  return s;
}
#endif

// [begin, end) of worker t of `team` over n words.
std::pair<std::size_t, std::size_t> slice(std::size_t n, int t, int team) {
  const std::size_t chunk = n / static_cast<std::size_t>(team) / kSliceWords * kSliceWords;
  const std::size_t begin = chunk * static_cast<std::size_t>(t);
  return {begin, t + 1 == team ? n : begin + chunk};
}

// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}
std::vector<int> parse_cpu_list(const std::string& list) {
  std::vector<int> cpus;
  std::stringstream in(list);
  std::string range;
  while (std::getline(in, range, ',')) {
    if (range.empty()) continue;
    const std::size_t dash = range.find('-');
    const int lo = std::atoi(range.substr(0, dash).c_str());
    const int hi = dash == std::string::npos ? lo : std::atoi(range.substr(dash + 1).c_str());
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  return cpus;
}

// The CPUs this process may run on, one per physical core first (the lowest allowed hardware
// thread of each core), then the cores' other hardware threads: `threads` pinned workers then
// take distinct cores wherever the allowed set has that many. With OMP_PROC_BIND set, libgomp
// has bound this (the initial) thread to its first place at start-up, so its affinity alone
// would be that place: the CPUs of all OpenMP places are added back.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) CPU_SET(0, &set);
  for (int place = 0; place < omp_get_num_places(); ++place) {
    std::vector<int> ids(static_cast<std::size_t>(omp_get_place_num_procs(place)));
    omp_get_place_proc_ids(place, ids.data());
    for (int c : ids)
      if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  std::vector<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) allowed.push_back(c);
  std::vector<int> first, second;
  for (int c : allowed) {
    std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/thread_siblings_list");
    std::string list;
    std::getline(f, list);
    int lowest = c;
    for (int s : parse_cpu_list(list))
      if (CPU_ISSET(s, &set)) lowest = std::min(lowest, s);
    (lowest == c ? first : second).push_back(c);
  }
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

void check_sum(std::uint64_t total, std::size_t words) {
  if (total != words) std::fprintf(stderr, "bandwidth probe: check sum mismatch\n");
}

}  // namespace

double BandwidthReading::disagreement() const {
  const double lo = std::min(openmp, pinned), hi = std::max(openmp, pinned);
  return lo > 0 ? hi / lo - 1 : 0;
}

void BandwidthReading::keep_best(const BandwidthReading& other) {
  openmp = std::max(openmp, other.openmp);
  pinned = std::max(pinned, other.pinned);
}

BandwidthProbe::BandwidthProbe(int threads)
    : threads_(threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      bytes_(kBufferBytes),
      cpus_(allowed_cpus()) {
  namespace k = kernels::cpu;
  read_ = read_baseline;
  loads_name_ = "baseline";
#ifdef EMBER_PROBE_X86
  const k::CpuTier tier = k::active_tier();
  if (tier >= k::CpuTier::avx512_vnni)
    read_ = read_avx512, loads_name_ = "avx512";
  else if (tier >= k::CpuTier::avx2)
    read_ = read_avx2, loads_name_ = "avx2";
#endif

  // A reserved pool of explicit huge pages if there is one; otherwise the weight arena's
  // transparent huge pages, the memory decode streams its weights from.
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  hugetlb_ = p != MAP_FAILED;
  if (!hugetlb_) {
    arena_ = std::make_unique<k::WeightArena>();
    p = arena_->allocate(bytes_);
  }
  buffer_ = static_cast<std::uint64_t*>(p);
  std::fill(buffer_, buffer_ + bytes_ / sizeof(std::uint64_t), std::uint64_t{1});
}

BandwidthProbe::~BandwidthProbe() {
  if (hugetlb_) munmap(buffer_, bytes_);
}

double BandwidthProbe::openmp_pass() const {
  const std::size_t n = bytes_ / sizeof(std::uint64_t);
  Clock::time_point t0;
  std::uint64_t total = 0;
  // As decode's kernels: a parallel region of the engine's thread count, from this thread.
#pragma omp parallel num_threads(threads_) reduction(+ : total)
  {
    const auto [begin, end] = slice(n, omp_get_thread_num(), omp_get_num_threads());
#pragma omp barrier
#pragma omp master
    t0 = Clock::now();
#pragma omp barrier
    total += read_(buffer_ + begin, end - begin);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  check_sum(total, n);
  return static_cast<double>(bytes_) / seconds;
}

double BandwidthProbe::pinned_pass() const {
  const std::size_t n = bytes_ / sizeof(std::uint64_t);
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(threads_));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads_; ++t)
    pool.emplace_back([&, t] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpus_[static_cast<std::size_t>(t) % cpus_.size()], &set);
      if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
        std::fprintf(stderr, "bandwidth probe: cannot pin worker %d\n", t);
      const auto [begin, end] = slice(n, t, threads_);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      sums[static_cast<std::size_t>(t)] = read_(buffer_ + begin, end - begin);
    });
  // Timed from the moment every worker is pinned and waiting: thread creation is not counted.
  while (ready.load() < threads_) std::this_thread::yield();
  const auto t0 = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::uint64_t total = 0;
  for (auto s : sums) total += s;
  check_sum(total, n);
  return static_cast<double>(bytes_) / seconds;
}

BandwidthReading BandwidthProbe::measure(int passes) const {
  BandwidthReading best;
  for (int pass = 0; pass < passes; ++pass) {
    std::this_thread::sleep_for(kPark);  // idle OpenMP workers stop spinning
    best.pinned = std::max(best.pinned, pinned_pass());
    best.openmp = std::max(best.openmp, openmp_pass());
  }
  return best;
}

double BandwidthProbe::huge_page_fraction() const {
  if (hugetlb_) return 1.0;
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return -1;
  const auto lo = reinterpret_cast<std::uintptr_t>(buffer_), hi = lo + bytes_;
  bool inside = false;
  double huge_kb = 0;
  std::string line;
  while (std::getline(smaps, line)) {
    // A mapping's header ("7f12...-7f13... rw-p ...") starts with a hex range; fields follow.
    const std::size_t dash = line.find('-'), space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space && line.find(':') > space) {
      const std::uintptr_t start = std::strtoull(line.substr(0, dash).c_str(), nullptr, 16);
      const std::uintptr_t stop = std::strtoull(line.substr(dash + 1, space - dash - 1).c_str(), nullptr, 16);
      inside = start < hi && stop > lo;
    } else if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      huge_kb += std::atof(line.c_str() + 14);
    }
  }
  return std::min(1.0, huge_kb * 1024 / static_cast<double>(bytes_));
}

std::string BandwidthProbe::openmp_binding() {
  const char* bind = std::getenv("OMP_PROC_BIND");
  const char* places = std::getenv("OMP_PLACES");
  return std::string("OMP_PROC_BIND=") + (bind ? bind : "unset") + " OMP_PLACES=" + (places ? places : "unset");
}

namespace {

std::string cpu_list(const std::vector<int>& cpus, int count) {
  std::string out;
  for (int t = 0; t < count; ++t) {
    if (t > 0) out += ',';
    out += std::to_string(cpus[static_cast<std::size_t>(t) % cpus.size()]);
  }
  return out;
}

// The last-level cache's size in bytes, as sysfs reports it for CPU 0 (0 if unknown). Not
// sysconf(_SC_LEVEL3_CACHE_SIZE): glibc has reported far more than the L3 there is
// (docs/benchmarks.md#bench-bandwidth-passes).
double last_level_cache_bytes() {
  double best = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string size;
    if (!(f >> size)) break;
    double bytes = std::atof(size.c_str());
    if (size.back() == 'K') bytes *= 1024;
    if (size.back() == 'M') bytes *= 1024 * 1024;
    best = std::max(best, bytes);
  }
  return best;
}

std::string format(const char* fmt, double a, double b = 0, double c = 0) {
  char text[256];
  std::snprintf(text, sizeof text, fmt, a, b, c);
  return text;
}

}  // namespace

std::string describe(const BandwidthProbe& probe, const BandwidthReading& reading, int passes) {
  const double huge = probe.huge_page_fraction();
  const std::string pages = probe.explicit_huge_pages() ? "explicit 2 MiB pages"
                            : huge < 0                  ? "page size unknown"
                                                        : format("%.0f %% in 2 MiB pages", 100 * huge);
  return format(
             "read bandwidth: OpenMP team as decode %.1f GB/s, pinned threads %.1f GB/s -> ceiling %.1f GB/s "
             "(the larger)\n",
             reading.openmp / 1e9, reading.pinned / 1e9, reading.ceiling() / 1e9) +
         "         (" + std::to_string(probe.bytes() >> 20) + " MiB buffer, " + pages + ", " + probe.loads() +
         " loads, " + std::to_string(probe.threads()) + (probe.threads() == 1 ? " thread" : " threads") + ", best of " +
         std::to_string(passes) + " passes each; OpenMP " + BandwidthProbe::openmp_binding() + "; pinned to CPUs " +
         cpu_list(probe.pinned_cpus(), probe.threads()) + ")";
}

nlohmann::json to_json(const BandwidthProbe& probe, const BandwidthReading& reading, int passes) {
  std::vector<int> cpus;
  for (int t = 0; t < probe.threads(); ++t)
    cpus.push_back(probe.pinned_cpus()[static_cast<std::size_t>(t) % probe.pinned_cpus().size()]);
  return {{"openmp_bytes_per_s", reading.openmp},
          {"pinned_threads_bytes_per_s", reading.pinned},
          {"ceiling_bytes_per_s", reading.ceiling()},
          {"disagreement", reading.disagreement()},
          {"passes_per_method", passes},
          {"buffer_bytes", probe.bytes()},
          {"loads", probe.loads()},
          {"threads", probe.threads()},
          {"pinned_cpus", cpus},
          {"openmp_binding", BandwidthProbe::openmp_binding()},
          {"explicit_huge_pages", probe.explicit_huge_pages()},
          {"huge_page_fraction", probe.huge_page_fraction()}};
}

std::string disagreement_warning(const BandwidthReading& reading) {
  if (reading.disagreement() <= kBandwidthDisagreement) return "";
  const bool openmp_low = reading.openmp < reading.pinned;
  return format(
             "warning: the two bandwidth methods disagree by %.0f %% (OpenMP %.1f GB/s, pinned %.1f GB/s); "
             "the ceiling takes the larger. ",
             100 * reading.disagreement(), reading.openmp / 1e9, reading.pinned / 1e9) +
         (openmp_low ? "The OpenMP team read low: are its threads sharing a core (OMP_PROC_BIND / OMP_PLACES), "
                       "or another program busy on this machine?"
                     : "The pinned threads read low: another program may be busy on the CPUs they were pinned to.");
}

std::string over_ceiling_warning(const std::string& what, double fraction, double weight_bytes) {
  if (fraction <= 1.0) return "";
  const double cache_bytes = last_level_cache_bytes();
  const std::string cache = cache_bytes > 0 ? format(" (last-level cache %.0f MB)", cache_bytes / 1e6) : "";
  return "warning: " + what +
         format(
             " decode read its weights at %.0f %% of the measured ceiling: either the "
             "probe under-measures this machine's bandwidth, or part of the %.1f MB "
             "read per token stays in the caches",
             100 * fraction, weight_bytes / 1e6) +
         cache + "; the ceiling is no bound on this run";
}

}  // namespace ember::bench
