// The operating system behind one small seam: what ember asks of the OS that the C++ standard
// library does not give (file mappings, page-level memory, durable file writes, thread
// priority, free memory, the CPU features only the OS reports). platform_posix.cpp implements it for Linux, macOS and Android,
// platform_windows.cpp for Windows; CMake compiles one of them, and no other file of ember
// includes an OS header. Stateless: every function is safe to call from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ember::platform {

// ---- reading model files ---------------------------------------------------------------------

// A whole regular file, read-only: a file mapping where the OS has one, else a private copy.
struct FileView {
  const std::uint8_t* data = nullptr;
  std::uint64_t size = 0;
  std::shared_ptr<void> owner;  // unmaps (or frees) when the last reference goes
  bool mapped = false;          // a file mapping, not a private copy
};

// Throws Error(io) naming the path and the OS reason: missing, a directory, not a regular file,
// empty, unreadable.
FileView map_file_readonly(const std::string& path);

// Drops the whole pages of [data, data + size), a range of a file mapping, from the process's
// resident memory; the next read faults them back in. Advice: a no-op where the OS has none.
void release_pages(const void* data, std::uint64_t size) noexcept;

// ---- memory ------------------------------------------------------------------------------------

std::size_t page_size() noexcept;

// `bytes` (any size) at a multiple of `alignment` (a power of two), freed with aligned_free;
// nullptr when out of memory. std::aligned_alloc is missing on Windows.
void* aligned_alloc(std::size_t alignment, std::size_t bytes) noexcept;
void aligned_free(void* p) noexcept;

// The memory the system can give this process now; 0 when the OS does not say.
std::uint64_t available_memory_bytes() noexcept;

// `bytes` of zeroed, writable memory starting at a multiple of `alignment` (a power of two, at
// least the page size), with huge pages asked for where the OS takes the advice. Throws
// Error(out_of_memory). Freed with free_pages(p, bytes).
void* allocate_pages(std::size_t bytes, std::size_t alignment);
void free_pages(void* p, std::size_t bytes) noexcept;

// ---- writing files durably (util/atomic_file.hpp) ----------------------------------------------

// An open file being written; kNoFile when none.
using FileHandle = std::intptr_t;
inline constexpr FileHandle kNoFile = -1;

// An OS error code (errno on POSIX, GetLastError() on Windows), 0 for success.
using OsError = int;
std::string os_error_text(OsError error);
bool is_already_exists(OsError error) noexcept;

// Creates `path` for writing, failing if anything is there already (a file, or a link, which is
// never followed). On failure returns kNoFile and sets *error.
FileHandle create_new_file(const std::string& path, OsError* error) noexcept;
// Each returns 0 or the error; a write is whole or an error (a full disk).
OsError write_all(FileHandle file, const void* bytes, std::size_t n) noexcept;
OsError write_all_at(FileHandle file, std::uint64_t offset, const void* bytes, std::size_t n) noexcept;
OsError sync_file(FileHandle file) noexcept;  // the bytes are on the device when it returns 0
OsError close_file(FileHandle file) noexcept;
// Renames `from` over `to` in one step (both in one folder): a reader sees the old or the new.
OsError replace_file(const std::string& from, const std::string& to) noexcept;
void remove_file(const std::string& path) noexcept;
// Makes a folder's entries durable (a new name after replace_file); best effort.
void sync_folder(const std::string& folder) noexcept;

// ---- threads -----------------------------------------------------------------------------------

// Lowers the calling thread's scheduling priority (nice + 10 on Linux, below normal on
// Windows); threads it starts afterwards inherit it where the OS passes it on. False where the
// OS has no per-thread setting or refuses it.
bool lower_current_thread_priority() noexcept;

// ---- the CPU --------------------------------------------------------------------------------------

// The arm64 instruction-set extensions ember's kernel tiers use (kernels/cpu/cpu_tier.hpp). On
// arm64 only the OS can say which the CPU has (user code may not read the ID registers
// everywhere): getauxval(AT_HWCAP, AT_HWCAP2) on Linux and Android, sysctlbyname on macOS,
// IsProcessorFeaturePresent on Windows. All false on other CPUs; x86 is detected by cpuid.
struct ArmFeatures {
  bool neon = false;     // Advanced SIMD (every AArch64 CPU)
  bool dotprod = false;  // FEAT_DotProd: sdot/udot
  bool i8mm = false;     // FEAT_I8MM: smmla/usmmla/usdot
};
ArmFeatures arm_features() noexcept;

}  // namespace ember::platform
