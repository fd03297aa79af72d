#include "kernels/cpu/cpu_tier.hpp"

#include "util/platform.hpp"

#if defined(EMBER_WITH_ONEDNN)
#include <dnnl.hpp>
#endif

#include <cstdlib>
#include <string>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define EMBER_TIER_X86 1
#else
#define EMBER_TIER_X86 0
#endif

namespace ember::kernels::cpu {

namespace {

#if EMBER_TIER_X86

struct Cpuid {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Cpuid cpuid(unsigned leaf, unsigned subleaf) {
  Cpuid r;
  if (__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx) == 0) return {};
  return r;
}

bool bit(unsigned word, int n) { return ((word >> n) & 1u) != 0; }

// XCR0: which register state the OS saves on a context switch. A CPU may have AVX-512 that the
// OS has not enabled (then its instructions fault).
unsigned long long xcr0() {
  unsigned eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}

struct Features {
  bool avx2 = false, avx_vnni_vex = false, avx512_vnni = false, amx = false;
  bool amd = false;
  std::int64_t last_level_cache_bytes = 0;
  platform::ArmFeatures arm;
};

// The size of the highest-level data or unified cache up to L3 among cpuid's deterministic cache
// parameters (leaf 4 on Intel, 0x8000001D on AMD, one subleaf a cache until a null type); 0 where
// the CPU lists none. An L4 (the eDRAM of some Haswell and Broadwell parts) is left out: it sits
// beside memory, and what decode asks is whether the weights stay in the cores' own caches.
std::int64_t last_level_cache_bytes(bool amd) {
  const unsigned leaf = amd ? 0x8000001Du : 4u;
  std::int64_t bytes = 0;
  unsigned last_level = 0;
  for (unsigned sub = 0; sub < 16; ++sub) {
    const Cpuid c = cpuid(leaf, sub);
    const unsigned type = c.eax & 0x1Fu, level = (c.eax >> 5) & 0x7u;
    if (type == 0) break;
    if (type == 2 /*instructions*/ || level > 3 || level < last_level) continue;
    const std::uint64_t ways = (c.ebx >> 22) + 1, partitions = ((c.ebx >> 12) & 0x3FFu) + 1,
                        line = (c.ebx & 0xFFFu) + 1, sets = std::uint64_t{c.ecx} + 1;
    std::uint64_t size = 0;  // no real cache comes near the overflow; a hypervisor's nonsense might
    if (__builtin_mul_overflow(ways * partitions, line * sets, &size) || size > (std::uint64_t{1} << 40)) continue;
    bytes = static_cast<std::int64_t>(size);
    last_level = level;
  }
  return bytes;
}

Features read_features() {
  Features f;
  const Cpuid l0 = cpuid(0, 0);                                                     // the vendor string: ebx, edx, ecx
  f.amd = l0.ebx == 0x68747541u && l0.edx == 0x69746e65u && l0.ecx == 0x444d4163u;  // "AuthenticAMD"
  f.last_level_cache_bytes = last_level_cache_bytes(f.amd);
  const Cpuid l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.ecx, 27);
  if (!osxsave || !bit(l1.ecx, 28) /*AVX*/) return f;
  const unsigned long long xcr = xcr0();
  const bool ymm_state = (xcr & 0x6u) == 0x6u;           // SSE + AVX
  const bool zmm_state = (xcr & 0xE6u) == 0xE6u;         // + opmask, ZMM_Hi256, Hi16_ZMM
  const bool tile_state = (xcr & 0x60000u) == 0x60000u;  // XTILECFG + XTILEDATA
  const Cpuid l7 = cpuid(7, 0);
  const Cpuid l7s1 = cpuid(7, 1);
  f.avx2 = ymm_state && bit(l7.ebx, 5) && bit(l1.ecx, 12) /*FMA*/ && bit(l1.ecx, 29) /*F16C*/;
  f.avx_vnni_vex = f.avx2 && bit(l7s1.eax, 4);
  f.avx512_vnni = f.avx2 && zmm_state && bit(l7.ebx, 16) /*F*/ && bit(l7.ebx, 17) /*DQ*/ && bit(l7.ebx, 30) /*BW*/ &&
                  bit(l7.ebx, 31) /*VL*/ && bit(l7.ecx, 11) /*VNNI*/;
  f.amx = f.avx512_vnni && tile_state && bit(l7.edx, 24) /*AMX-TILE*/ && bit(l7.edx, 25) /*AMX-INT8*/;
  return f;
}

#else

struct Features {
  bool avx2 = false, avx_vnni_vex = false, avx512_vnni = false, amx = false;
  bool amd = false;
  std::int64_t last_level_cache_bytes = 0;
  platform::ArmFeatures arm;
};

Features read_features() {
  Features f;
  f.arm = platform::arm_features();
  return f;
}

#endif

const Features& features() {
  static const Features f = read_features();  // immutable after the first call
  return f;
}

CpuTier tier_of(const Features& f) {
#if defined(__aarch64__) || defined(_M_ARM64)
  // Only the tiers whose kernel files this build has (kernels/CMakeLists.txt builds them on arm64).
  if (f.arm.neon && f.arm.dotprod && f.arm.i8mm) return CpuTier::i8mm;
  if (f.arm.neon && f.arm.dotprod) return CpuTier::dotprod;
  if (f.arm.neon) return CpuTier::neon;
#endif
  if (f.amx) return CpuTier::amx;
  if (f.avx512_vnni) return CpuTier::avx512_vnni;
  if (f.avx_vnni_vex) return CpuTier::avx_vnni;
  if (f.avx2) return CpuTier::avx2;
  return CpuTier::scalar;
}

#if defined(EMBER_WITH_ONEDNN)
dnnl::cpu_isa onednn_isa(CpuTier tier) {
  switch (tier) {
    case CpuTier::scalar: return dnnl::cpu_isa::sse41;
    case CpuTier::avx2: return dnnl::cpu_isa::avx2;
    case CpuTier::avx_vnni: return dnnl::cpu_isa::avx2_vnni;
    case CpuTier::avx512_vnni: return dnnl::cpu_isa::avx512_core_vnni;
    case CpuTier::amx:
    case CpuTier::neon:
    case CpuTier::dotprod:
    case CpuTier::i8mm: return dnnl::cpu_isa::all;  // its x86 names only: no cap on arm64
  }
  return dnnl::cpu_isa::all;
}
#endif

struct Decision {
  CpuTier tier = CpuTier::scalar;
  std::string cap_error;
};

Decision decide() {
  Decision d;
  d.tier = detected_tier();
  const char* cap = std::getenv("EMBER_CPU_ISA");
  if (cap == nullptr || *cap == '\0') return d;
  const std::optional<CpuTier> parsed = parse_cpu_tier(cap);
  if (!parsed) {
    d.cap_error = cap;
    return d;
  }
  if (*parsed != CpuTier::scalar && is_arm_tier(*parsed) != is_arm_tier(d.tier)) {
    d.cap_error = cap;  // another architecture's tier: nothing here to cap to
    return d;
  }
  if (*parsed < d.tier) d.tier = *parsed;
#if defined(EMBER_WITH_ONEDNN)
  // Before ember's first primitive (CpuContext asks for the tier before creating its engine).
  // oneDNN refuses once it has dispatched a kernel (an embedding host that used it first); then
  // its own kernels stay at the hardware's ISA, while ember's follow the cap.
  try {
    dnnl::set_max_cpu_isa(onednn_isa(d.tier));
  } catch (const dnnl::error&) {
  }
#endif
  return d;
}

const Decision& decision() {
  static const Decision d = decide();  // immutable after the first call
  return d;
}

}  // namespace

const char* to_string(CpuTier tier) {
  switch (tier) {
    case CpuTier::scalar: return "scalar";
    case CpuTier::avx2: return "avx2";
    case CpuTier::avx_vnni: return "avx_vnni";
    case CpuTier::avx512_vnni: return "avx512_vnni";
    case CpuTier::amx: return "amx";
    case CpuTier::neon: return "neon";
    case CpuTier::dotprod: return "dotprod";
    case CpuTier::i8mm: return "i8mm";
  }
  return "?";
}

std::optional<CpuTier> parse_cpu_tier(std::string_view name) {
  std::string lower(name);
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  for (CpuTier tier : kAllCpuTiers)
    if (lower == to_string(tier)) return tier;
  return std::nullopt;
}

CpuTier detected_tier() {
  // An AVX-512 VNNI CPU without AVX-VNNI still has the avx_vnni tier (its EVEX form).
  return tier_of(features());
}

CpuTier active_tier() { return decision().tier; }

bool tier_available(CpuTier tier) {
  const CpuTier active = active_tier();
  if (tier == CpuTier::scalar) return true;
  // Within one chain the enumerators are in order (cpu_tier.hpp).
  return is_arm_tier(tier) == is_arm_tier(active) && active != CpuTier::scalar && tier <= active;
}

bool cpu_has_avx_vnni_vex() { return features().avx_vnni_vex; }

bool cpu_vendor_amd() { return features().amd; }

std::int64_t cpu_last_level_cache_bytes() { return features().last_level_cache_bytes; }

std::string_view cpu_tier_cap_error() { return decision().cap_error; }

}  // namespace ember::kernels::cpu
