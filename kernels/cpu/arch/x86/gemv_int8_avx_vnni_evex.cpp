// gemv_int8_avx_vnni.cpp's kernel in the EVEX encoding (AVX512-VL VNNI on 256-bit registers).
#define EMBER_GEMV_EVEX 1
#include "kernels/cpu/arch/x86/gemv_int8_avx_vnni.cpp"
