// The main of every doctest program. A run capped (EMBER_CPU_ISA) at a tier this CPU does not
// have is skipped: the cap cannot raise the tier, so it would repeat the uncapped run under a
// name that claims another tier (kernels_test_avx512_vnni on an AVX2-only CPU).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "kernels/cpu/cpu_tier.hpp"

#include <cstdio>
#include <cstdlib>
#include <optional>

int main(int argc, char** argv) {
  namespace k = ember::kernels::cpu;
  const char* cap = std::getenv("EMBER_CPU_ISA");
  const std::optional<k::CpuTier> capped = cap != nullptr ? k::parse_cpu_tier(cap) : std::nullopt;
  if (capped && !k::tier_available(*capped)) {
    std::fprintf(stderr,
                 "SKIPPED: EMBER_CPU_ISA=%s names a tier this CPU does not have (it has %s): the run would repeat the "
                 "uncapped one\n",
                 cap, k::to_string(k::detected_tier()));
    return 77;
  }
  return doctest::Context(argc, argv).run();
}
