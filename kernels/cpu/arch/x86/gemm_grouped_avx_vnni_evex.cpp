// The avx_vnni tier's grouped kernel in the EVEX encoding (AVX512-VL VNNI), for AVX-512 VNNI CPUs
// without AVX-VNNI (AMD Zen 4): gemm_grouped_avx_vnni.cpp compiled without -mavxvnni defines
// tile_avx_vnni_evex (kernels/CMakeLists.txt).
#include "gemm_grouped_avx_vnni.cpp"  // NOLINT(bugprone-suspicious-include): one source, two encodings
