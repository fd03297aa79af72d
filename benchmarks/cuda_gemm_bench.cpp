// The CUDA backend's matrix products alone, INT8 against FP16, at the 1B and 8B shapes and from
// one row (decode) to thousands (prefill, many streams): does the INT8 GEMM beat the FP16 one,
// and what do its quantize and dequantize kernels cost around it? Timed with CUDA events over
// repeated launches after a warm-up. The inputs are one small non-zero byte pattern (filled on the
// device: random host data for the 8B shapes would take longer than the timings), the same for
// both precisions.
//
//   cuda-gemm-bench [--json FILE]
#include "backend/cuda/device_memory.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/ops.hpp"

#include <nlohmann/json.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace kc = ember::kernels::cuda;
using ember::backend::cuda::DeviceBuffer;

struct Shape {
  const char* name;
  std::int64_t n, k;
};

// Milliseconds per call of `fn`, the median of 5 timings of `reps` calls each.
double time_ms(cudaStream_t stream, const std::function<void()>& fn, int reps) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t start, stop;
  kc::check_cuda(cudaEventCreate(&start), "event");
  kc::check_cuda(cudaEventCreate(&stop), "event");
  std::vector<float> runs;
  for (int t = 0; t < 5; ++t) {
    kc::check_cuda(cudaEventRecord(start, stream), "record");
    for (int i = 0; i < reps; ++i) fn();
    kc::check_cuda(cudaEventRecord(stop, stream), "record");
    kc::check_cuda(cudaEventSynchronize(stop), "synchronize");
    float ms = 0;
    kc::check_cuda(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    runs.push_back(ms / static_cast<float>(reps));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

// Bytes 0x11: int8 17, a small positive half and float; finite whatever the precision.
DeviceBuffer filled_device(std::size_t bytes) {
  DeviceBuffer d(0, bytes, "benchmark data");
  kc::check_cuda(cudaMemset(d.get(), 0x11, bytes), "fill");
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--json FILE]\n  INT8 vs FP16 GEMMs of the CUDA backend at 1B/8B shapes\n",
                   argv[0]);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  try {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      std::fprintf(stderr, "cuda-gemm-bench: no CUDA device\n");
      return 1;
    }
    cudaStream_t stream;
    kc::check_cuda(cudaStreamCreate(&stream), "stream");
    const kc::Blas blas(stream);
    const Shape shapes[] = {{"1b qkv", 3072, 2048},
                            {"1b gate_up", 16384, 2048},
                            {"1b down", 2048, 8192},
                            {"8b gate_up", 28672, 4096},
                            {"8b down", 4096, 14336}};
    const std::int64_t batch[] = {1, 4, 32, 512, 4096};
    nlohmann::json out = nlohmann::json::array();
    std::printf("%-11s %6s %12s %12s %12s %9s %9s\n", "shape", "m", "s8 gemm us", "s8 linear us", "f16 linear us",
                "gemm x", "linear x");
    for (const Shape& s : shapes) {
      const DeviceBuffer w8 = filled_device(static_cast<std::size_t>(s.n * s.k));
      const DeviceBuffer w16 = filled_device(static_cast<std::size_t>(s.n * s.k) * 2);
      const DeviceBuffer ws = filled_device(static_cast<std::size_t>(s.n) * sizeof(float));
      for (std::int64_t m : batch) {
        DeviceBuffer x = filled_device(static_cast<std::size_t>(m * s.k) * sizeof(float));
        DeviceBuffer xq = filled_device(static_cast<std::size_t>(m * s.k));
        DeviceBuffer xh = filled_device(static_cast<std::size_t>(m * s.k) * 2);
        DeviceBuffer xs = filled_device(static_cast<std::size_t>(m) * sizeof(float));
        DeviceBuffer acc(0, static_cast<std::size_t>(m * s.n) * sizeof(std::int32_t), "accumulators");
        DeviceBuffer y(0, static_cast<std::size_t>(m * s.n) * sizeof(float), "output");
        const int reps = m * s.n * s.k > (std::int64_t{1} << 34) ? 5 : 50;
        const double gemm_s8 = time_ms(
            stream,
            [&] { kc::gemm_s8(blas, xq.as<std::int8_t>(), w8.as<std::int8_t>(), m, s.n, s.k, acc.as<std::int32_t>()); },
            reps);
        const double linear_s8 = time_ms(
            stream,
            [&] {
              kc::quantize_rows_s8(x.as<float>(), m, s.k, xq.as<std::int8_t>(), xs.as<float>(), stream);
              if (m <= kc::kMaxGemvRows) {  // as the backend chooses
                kc::gemv_s8(xq.as<std::int8_t>(), xs.as<float>(), w8.as<std::int8_t>(), ws.as<float>(), m, s.n, s.k,
                            y.as<float>(), false, stream);
                return;
              }
              kc::gemm_s8(blas, xq.as<std::int8_t>(), w8.as<std::int8_t>(), m, s.n, s.k, acc.as<std::int32_t>());
              kc::dequantize_s32(acc.as<std::int32_t>(), xs.as<float>(), ws.as<float>(), m, s.n, y.as<float>(), false,
                                 stream);
            },
            reps);
        const double gemm_f16 = time_ms(
            stream,
            [&] {
              kc::gemm_f16(blas, xh.as<std::uint16_t>(), w16.as<std::uint16_t>(), m, s.n, s.k, y.as<float>(), false);
            },
            reps);
        const double linear_f16 = time_ms(
            stream,
            [&] {
              kc::to_f16(x.as<float>(), m * s.k, xh.as<std::uint16_t>(), stream);
              kc::gemm_f16(blas, xh.as<std::uint16_t>(), w16.as<std::uint16_t>(), m, s.n, s.k, y.as<float>(), false);
            },
            reps);
        kc::check_cuda(cudaStreamSynchronize(stream), "benchmark");
        std::printf("%-11s %6lld %12.1f %12.1f %12.1f %8.2fx %8.2fx\n", s.name, static_cast<long long>(m),
                    1e3 * gemm_s8, 1e3 * linear_s8, 1e3 * linear_f16, gemm_f16 / gemm_s8, linear_f16 / linear_s8);
        const double ops = 2.0 * static_cast<double>(m * s.n * s.k);
        out.push_back({{"shape", s.name},
                       {"m", m},
                       {"n", s.n},
                       {"k", s.k},
                       {"gemm_s8_ms", gemm_s8},
                       {"linear_s8_ms", linear_s8},
                       {"gemm_f16_ms", gemm_f16},
                       {"linear_f16_ms", linear_f16},
                       {"gemm_s8_tops", ops / gemm_s8 / 1e9},
                       {"gemm_f16_tflops", ops / gemm_f16 / 1e9}});
      }
    }
    std::printf(
        "gemm x, linear x: FP16 time / INT8 time (above 1: INT8 faster); a linear is what the backend "
        "runs: the activations' conversion, the product and INT8's dequantization (the fused GEMV "
        "for m <= %lld)\n",
        static_cast<long long>(kc::kMaxGemvRows));
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    cudaStreamDestroy(stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda-gemm-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
