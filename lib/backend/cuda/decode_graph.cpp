#include "backend/cuda/decode_graph.hpp"

#include "kernels/cuda/check.hpp"

namespace ember::backend::cuda {

using kernels::cuda::check_cuda;

GraphCache::~GraphCache() { clear(); }

void GraphCache::clear() noexcept {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
  seen_.clear();
}

void GraphCache::run(std::uint64_t key, cudaStream_t stream, const std::function<void()>& record) {
  auto it = graphs_.find(key);
  if (it == graphs_.end() && seen_.insert(key).second) {
    record();
    return;
  }
  if (it == graphs_.end()) {
    // Thread-local mode: other threads of the host program may use CUDA meanwhile.
    check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin graph capture");
    cudaGraph_t graph = nullptr;
    try {
      record();
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);  // leave the stream usable
      if (graph != nullptr) cudaGraphDestroy(graph);
      cudaGetLastError();
      throw;
    }
    check_cuda(cudaStreamEndCapture(stream, &graph), "end graph capture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check_cuda(status, "instantiate the decode graph");
    it = graphs_.emplace(key, exec).first;
  }
  check_cuda(cudaGraphLaunch(it->second, stream), "launch the decode graph");
}

}  // namespace ember::backend::cuda
