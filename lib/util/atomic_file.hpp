// A file that appears whole or not at all, written so that nothing already in its folder can
// redirect the write: every file ember writes (saved state, prefix stores, the weight cache) goes
// through it.
//
// The bytes go to a temporary file in the target's own folder (rename is atomic only within one
// file system) with a random name, created only if nothing is there (platform::create_new_file):
// a file or symlink planted under that name makes the create fail instead of being followed or
// truncated. commit() syncs the file, renames it over the target and syncs the folder, so after a crash a reader
// finds the old file or the whole new one. On any failure, and when the object is destroyed
// without commit(), the temporary file is removed.
//
// Thread-safety: one object belongs to one thread; two writers of the same target never share a
// temporary file, and the last rename wins.
#pragma once

#include "util/platform.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace ember::util {

class AtomicFile {
 public:
  // Creates the temporary file; throws Error(io) naming the path and the system's reason.
  explicit AtomicFile(std::string target);
  ~AtomicFile();  // removes the temporary file unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends `n` bytes; throws Error(io) (a full disk) and removes the temporary file.
  void write(const void* bytes, std::size_t n);
  // Overwrites `n` bytes at `offset` (a header written last) without moving the append position.
  void write_at(std::uint64_t offset, const void* bytes, std::size_t n);
  // Sync, close, rename over the target, sync the folder. Throws Error(io) on failure, after
  // removing the temporary file; the target is then untouched.
  void commit();

  const std::string& target() const { return target_; }
  const std::string& temp_path() const { return temp_; }

 private:
  [[noreturn]] void fail_and_discard(const char* what, int error);
  void discard() noexcept;

  std::string target_, temp_;
  platform::FileHandle file_ = platform::kNoFile;
};

// The whole of `bytes` as the new content of `path`, through an AtomicFile.
void write_file_atomically(const std::string& path, std::span<const std::uint8_t> bytes);

}  // namespace ember::util
