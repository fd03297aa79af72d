// The instruction-set tier ember's CPU kernels run at: decided once per process, in this one
// place, from cpuid and the OS's saved register state (XCR0) on x86, from what the OS reports
// on arm64 (platform::arm_features), capped by EMBER_CPU_ISA.
//
// Each kernel has a scalar reference (kernels/cpu/<kernel>.cpp) and one file per tier
// (kernels/cpu/arch/x86/ or arch/arm/<kernel>_<tier>.cpp, compiled with that tier's flags only),
// and picks its implementation from active_tier(); kernels never ask cpuid themselves. A new
// tier is a new enumerator and a new file per kernel.
//
// Two chains of tiers share the scalar one; within a chain each tier guarantees the
// instructions of the ones before it. x86-64:
//  * scalar: x86-64 baseline (or any other CPU): the portable reference of every kernel.
//  * avx2: AVX2, FMA, F16C (Intel Haswell and later, AMD Zen 1-3).
//  * avx_vnni: avx2 plus 256-bit vpdpbusd. Intel's consumer cores have it as AVX-VNNI (VEX);
//    AVX-512 VNNI CPUs without AVX-VNNI (AMD Zen 4) have the same instruction as AVX512-VL
//    VNNI (EVEX), same results. Kernels of this tier come in both encodings and the dispatch
//    picks the one the CPU runs, so the tier is available on every CPU at or above it.
//  * avx512_vnni: AVX-512 F/BW/VL/DQ with VNNI (Intel Cascade Lake and later Xeons, Zen 4).
//  * amx: avx512_vnni plus AMX-INT8 tiles (Intel Sapphire Rapids): oneDNN's prefill kernels.
// arm64 (AArch64):
//  * neon: Advanced SIMD, the AArch64 baseline: smull/sadalp products (Cortex-A53/A57/A72).
//  * dotprod: neon plus sdot/udot (FEAT_DotProd: Apple M1 and later, Cortex-A55/A76 and later).
//  * i8mm: dotprod plus smmla/usdot (FEAT_I8MM: Apple M2 and later, Cortex-A510/A710/X2 and
//    later). The INT8 GEMV multiplies row pairs with smmla; the grouped kernel has no smmla
//    form yet and runs the dotprod one.
//
// EMBER_CPU_ISA caps the tier (never raises it above the hardware), so one machine runs and
// times every tier at or below its own: scalar|avx2|avx_vnni|avx512_vnni|amx on x86,
// scalar|neon|dotprod|i8mm on arm64. The cap also sets oneDNN's maximum ISA to match before ember
// creates its first primitive (a user's own ONEDNN_MAX_CPU_ISA is left alone when EMBER_CPU_ISA
// is unset). A value that names no tier of this CPU's chain caps nothing; cpu_tier_cap_error()
// returns it so that tools can say so (the library never prints).
//
// Thread-safety: every function may be called from any thread; the answers never change.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ember::kernels::cpu {

// Two chains, x86 (avx2..amx) and arm64 (neon..i8mm), each ordered: a tier implies the ones
// before it in its chain, and scalar. Compare tiers with tier_available, not with <.
enum class CpuTier { scalar, avx2, avx_vnni, avx512_vnni, amx, neon, dotprod, i8mm };

inline constexpr CpuTier kAllCpuTiers[] = {CpuTier::scalar, CpuTier::avx2, CpuTier::avx_vnni, CpuTier::avx512_vnni,
                                           CpuTier::amx,    CpuTier::neon, CpuTier::dotprod,  CpuTier::i8mm};

// Whether a tier is one of the arm64 chain (neon, dotprod, i8mm).
constexpr bool is_arm_tier(CpuTier tier) { return tier >= CpuTier::neon; }

// "scalar", "avx2", "avx_vnni", "avx512_vnni", "amx", "neon", "dotprod", "i8mm": the
// EMBER_CPU_ISA spellings.
const char* to_string(CpuTier tier);
// The tier an EMBER_CPU_ISA value names (exact spelling, or upper case); nullopt otherwise.
std::optional<CpuTier> parse_cpu_tier(std::string_view name);

// The hardware's tier: cpuid plus the OS's XSAVE state (xgetbv) on x86, the OS's report on
// arm64; checked once per process.
CpuTier detected_tier();
// min(detected_tier(), the EMBER_CPU_ISA cap), decided once per process.
CpuTier active_tier();
// scalar, or a tier of active_tier()'s chain at or below it: tests loop over every available tier.
bool tier_available(CpuTier tier);
// Whether this CPU executes 256-bit vpdpbusd in its VEX form (AVX-VNNI); otherwise the avx_vnni
// tier's kernels use the EVEX (AVX512-VL VNNI) form. Meaningful when avx_vnni is available.
bool cpu_has_avx_vnni_vex();
// Whether the CPU is AMD's (cpuid vendor "AuthenticAMD"): the weight streams prefetch
// differently there (weight_arena.hpp, grouped_prefetch()).
bool cpu_vendor_amd();
// The size in bytes of the CPU's last-level cache up to L3 (the L3 a core shares with the others
// of its socket, die or core complex; the L2 where there is none), from cpuid on x86; 0 where
// unknown (arm64, or a CPU that lists no caches). Decode's weight streams ask whether a model's
// weights fit in it (WeightArena::outgrows_cache()).
std::int64_t cpu_last_level_cache_bytes();

// The EMBER_CPU_ISA value that was not understood (and so capped nothing); empty if none.
std::string_view cpu_tier_cap_error();

}  // namespace ember::kernels::cpu
