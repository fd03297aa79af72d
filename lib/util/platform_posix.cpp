// util/platform.hpp on POSIX systems (Linux, macOS, Android).
#include "util/platform.hpp"

#include "util/check.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <system_error>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
// The Linux ABI's bit numbers, for C libraries whose headers predate them.
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

namespace ember::platform {

std::string os_error_text(OsError error) { return std::generic_category().message(error); }

bool is_already_exists(OsError error) noexcept { return error == EEXIST; }

FileView map_file_readonly(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorCode::io, "cannot open '{}': {}", path, os_error_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(ErrorCode::io, "cannot stat '{}': {}", path, os_error_text(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail(ErrorCode::io, "cannot read '{}': {}", path, os_error_text(EISDIR));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(ErrorCode::io, "cannot map '{}': not a regular file", path);
  }
  if (st.st_size == 0) {
    ::close(fd);
    fail(ErrorCode::io, "cannot map '{}': the file is empty", path);
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  void* p = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (p == MAP_FAILED) fail(ErrorCode::io, "cannot map '{}': {}", path, os_error_text(err));
  FileView view;
  view.data = static_cast<const std::uint8_t*>(p);
  view.size = size;
  view.owner = std::shared_ptr<void>(p, [size](void* q) { ::munmap(q, static_cast<std::size_t>(size)); });
  view.mapped = true;
  return view;
}

void release_pages(const void* data, std::uint64_t size) noexcept {
  const auto page = static_cast<std::uintptr_t>(page_size());
  const auto begin = (reinterpret_cast<std::uintptr_t>(data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + size) / page * page;
  // Advice only: a failure leaves the pages resident, which is what not calling it would do.
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

std::size_t page_size() noexcept { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

void* aligned_alloc(std::size_t alignment, std::size_t bytes) noexcept {
  // std::aligned_alloc wants a size that is a multiple of the alignment.
  const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
}

void aligned_free(void* p) noexcept { std::free(p); }

std::uint64_t available_memory_bytes() noexcept {
#if defined(__linux__)
  try {
    std::ifstream meminfo("/proc/meminfo");
    std::string key, unit;
    std::uint64_t kib = 0;
    while (meminfo >> key >> kib >> unit)
      if (key == "MemAvailable:") return kib * 1024;
  } catch (...) {
  }
#endif
  return 0;
}

void* allocate_pages(std::size_t bytes, std::size_t alignment) {
  // Anonymous pages come zeroed. `alignment` of slack lets the block start on that boundary
  // (transparent huge pages need it); the slack on either side is unmapped again.
  const std::size_t mapped = bytes + alignment;
  void* mapping = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) fail(ErrorCode::out_of_memory, "cannot map {} bytes of memory", mapped);
  auto* first = static_cast<std::uint8_t*>(mapping);
  auto* begin = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(first) + alignment - 1) / alignment *
                                                alignment);
  if (begin > first) ::munmap(first, static_cast<std::size_t>(begin - first));
  if (first + mapped > begin + bytes)
    ::munmap(begin + bytes, static_cast<std::size_t>(first + mapped - (begin + bytes)));
#ifdef MADV_HUGEPAGE
  ::madvise(begin, bytes, MADV_HUGEPAGE);  // advice: small pages where it is not taken
#endif
  return begin;
}

void free_pages(void* p, std::size_t bytes) noexcept {
  if (p != nullptr) ::munmap(p, bytes);
}

FileHandle create_new_file(const std::string& path, OsError* error) noexcept {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = errno;
    return kNoFile;
  }
  return fd;
}

OsError write_all(FileHandle file, const void* bytes, std::size_t n) noexcept {
  const auto* p = static_cast<const std::uint8_t*>(bytes);
  while (n > 0) {
    const ssize_t done = ::write(static_cast<int>(file), p, n);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return done < 0 ? errno : ENOSPC;
    p += done;
    n -= static_cast<std::size_t>(done);
  }
  return 0;
}

OsError write_all_at(FileHandle file, std::uint64_t offset, const void* bytes, std::size_t n) noexcept {
  const auto* p = static_cast<const std::uint8_t*>(bytes);
  while (n > 0) {
    const ssize_t done = ::pwrite(static_cast<int>(file), p, n, static_cast<off_t>(offset));
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return done < 0 ? errno : ENOSPC;
    p += done;
    offset += static_cast<std::uint64_t>(done);
    n -= static_cast<std::size_t>(done);
  }
  return 0;
}

OsError sync_file(FileHandle file) noexcept { return ::fsync(static_cast<int>(file)) == 0 ? 0 : errno; }

OsError close_file(FileHandle file) noexcept { return ::close(static_cast<int>(file)) == 0 ? 0 : errno; }

OsError replace_file(const std::string& from, const std::string& to) noexcept {
  // rename replaces the target's directory entry; a symlink at the target is replaced, never
  // followed.
  return ::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
}

void remove_file(const std::string& path) noexcept { ::unlink(path.c_str()); }

void sync_folder(const std::string& folder) noexcept {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the data itself is already synced
  (void)::fsync(fd);
  ::close(fd);
}

bool lower_current_thread_priority() noexcept {
#if defined(__linux__)
  // Linux keeps nice per thread and a new thread starts with its creator's, so the OpenMP team
  // this thread starts for its first parallel region inherits it (libgomp keeps a pool per master).
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int nice_now = ::getpriority(PRIO_PROCESS, tid);
  if (errno != 0) return false;
  return ::setpriority(PRIO_PROCESS, tid, std::min(nice_now + 10, 19)) == 0;
#else
  return false;  // macOS: nice is per process, which would slow the host too
#endif
}

namespace {

#if defined(__aarch64__) && defined(__APPLE__)
bool sysctl_flag(const char* name) noexcept {
  int value = 0;
  std::size_t size = sizeof value;
  return ::sysctlbyname(name, &value, &size, nullptr, 0) == 0 && value != 0;
}
#endif

}  // namespace

ArmFeatures arm_features() noexcept {
  ArmFeatures f;
#if defined(__aarch64__)
  f.neon = true;  // Advanced SIMD is part of the AArch64 baseline
#if defined(__linux__)
  const unsigned long hwcap = ::getauxval(AT_HWCAP);
  f.neon = (hwcap & HWCAP_ASIMD) != 0;
  f.dotprod = (hwcap & HWCAP_ASIMDDP) != 0;
  f.i8mm = (::getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
#elif defined(__APPLE__)
  f.dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd");
  f.i8mm = sysctl_flag("hw.optional.arm.FEAT_I8MM");
#endif
#endif
  return f;
}

}  // namespace ember::platform
