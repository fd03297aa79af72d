// The x86 instruction-set tier ember's CPU kernels run at: decided once per process, in this one
// place, from cpuid and the OS's saved register state (XCR0), capped by EMBER_CPU_ISA.
//
// Each kernel has a scalar reference (kernels/cpu/<kernel>.cpp) and one file per tier
// (kernels/cpu/arch/x86/<kernel>_<tier>.cpp, compiled with that tier's flags only), and picks
// its implementation from active_tier(); kernels never ask cpuid themselves. A new tier or
// architecture (NEON) is a new enumerator and a new file per kernel.
//
// The tiers are ordered: each one guarantees the instructions of the ones before it.
//  * scalar: x86-64 baseline (or any other CPU): the portable reference of every kernel.
//  * avx2: AVX2, FMA, F16C (Intel Haswell and later, AMD Zen 1-3).
//  * avx_vnni: avx2 plus 256-bit vpdpbusd. Intel's consumer cores have it as AVX-VNNI (VEX);
//    AVX-512 VNNI CPUs without AVX-VNNI (AMD Zen 4) have the same instruction as AVX512-VL
//    VNNI (EVEX), same results. Kernels of this tier come in both encodings and the dispatch
//    picks the one the CPU runs, so the tier is available on every CPU at or above it.
//  * avx512_vnni: AVX-512 F/BW/VL/DQ with VNNI (Intel Cascade Lake and later Xeons, Zen 4).
//  * amx: avx512_vnni plus AMX-INT8 tiles (Intel Sapphire Rapids): oneDNN's prefill kernels.
//
// EMBER_CPU_ISA=scalar|avx2|avx_vnni|avx512_vnni|amx caps the tier (never raises it above the
// hardware), so one machine runs and times every tier at or below its own. The cap also sets
// oneDNN's maximum ISA to match before ember creates its first primitive (a user's own
// ONEDNN_MAX_CPU_ISA is left alone when EMBER_CPU_ISA is unset). A value that names no tier caps
// nothing; cpu_tier_cap_error() returns it so that tools can say so (the library never prints).
//
// Thread-safety: every function may be called from any thread; the answers never change.
#pragma once

#include <optional>
#include <string_view>

namespace ember::kernels::cpu {

// Ordered: each tier implies the ones before it.
enum class CpuTier { scalar, avx2, avx_vnni, avx512_vnni, amx };

inline constexpr CpuTier kAllCpuTiers[] = {CpuTier::scalar, CpuTier::avx2, CpuTier::avx_vnni, CpuTier::avx512_vnni,
                                           CpuTier::amx};

// "scalar", "avx2", "avx_vnni", "avx512_vnni", "amx": the EMBER_CPU_ISA spellings.
const char* to_string(CpuTier tier);
// The tier an EMBER_CPU_ISA value names (exact spelling, or upper case); nullopt otherwise.
std::optional<CpuTier> parse_cpu_tier(std::string_view name);

// The hardware's tier: cpuid plus the OS's XSAVE state (xgetbv), checked once per process.
CpuTier detected_tier();
// min(detected_tier(), the EMBER_CPU_ISA cap), decided once per process.
CpuTier active_tier();
// tier <= active_tier(): tests loop over every available tier.
bool tier_available(CpuTier tier);
// Whether this CPU executes 256-bit vpdpbusd in its VEX form (AVX-VNNI); otherwise the avx_vnni
// tier's kernels use the EVEX (AVX512-VL VNNI) form. Meaningful when avx_vnni is available.
bool cpu_has_avx_vnni_vex();

// The EMBER_CPU_ISA value that was not understood (and so capped nothing); empty if none.
std::string_view cpu_tier_cap_error();

}  // namespace ember::kernels::cpu
