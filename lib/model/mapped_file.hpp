// Read-only whole-file mapping (POSIX mmap; elsewhere the file is read into memory).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace ember::model {

struct MappedFile {
  const std::uint8_t* data = nullptr;
  std::uint64_t size = 0;
  std::shared_ptr<void> owner;  // unmaps (or frees) when the last reference goes
};

// Throws Error(io) naming the path and the OS reason: missing, a directory, empty, unreadable.
MappedFile map_file(const std::string& path);

// A 64-byte aligned private copy of `size` bytes (tensor data keeps its file alignment).
MappedFile copy_bytes(const void* bytes, std::uint64_t size);

}  // namespace ember::model
