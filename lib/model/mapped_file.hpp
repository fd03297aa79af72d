// Read-only whole-file mapping (the OS's file mapping, util/platform.hpp), or a private copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace ember::model {

struct MappedFile {
  const std::uint8_t* data = nullptr;
  std::uint64_t size = 0;
  std::shared_ptr<void> owner;  // unmaps (or frees) when the last reference goes
  bool mapped = false;          // a file mapping, not a private copy
};

// Throws Error(io) naming the path and the OS reason: missing, a directory, empty, unreadable.
MappedFile map_file(const std::string& path);

// Drops the whole pages of [data, data + size), a range of a file mapping, from the process's
// resident memory; the next read faults them back in from the page cache. For a model whose
// matrices are read once, at load, into a prepared copy. Advice: a no-op where the OS has none.
void release_pages(const void* data, std::uint64_t size);

// A 64-byte aligned private copy of `size` bytes (tensor data keeps its file alignment).
MappedFile copy_bytes(const void* bytes, std::uint64_t size);

}  // namespace ember::model
