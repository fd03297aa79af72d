// util/platform.hpp on Windows. Paths are UTF-8 in ember and wide (UTF-16) for the Win32 calls.
#include "util/platform.hpp"

#include "util/check.hpp"

#include <filesystem>

#include <malloc.h>

#ifndef NOMINMAX
#define NOMINMAX
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>

namespace ember::platform {
namespace {

std::wstring wide(const std::string& utf8) {
  const int n = MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), nullptr, 0);
  std::wstring out(static_cast<std::size_t>(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), out.data(), n);
  return out;
}

HANDLE handle_of(FileHandle file) { return reinterpret_cast<HANDLE>(file); }

}  // namespace

std::string os_error_text(OsError error) { return std::system_category().message(error); }

bool is_already_exists(OsError error) noexcept { return error == ERROR_FILE_EXISTS || error == ERROR_ALREADY_EXISTS; }

FileView map_file_readonly(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(std::filesystem::u8path(path), ec))
    fail(ErrorCode::io, "cannot read '{}': is a directory", path);
  // Others may read, and delete or replace the file (as on POSIX): the mapping keeps its data.
  HANDLE file = CreateFileW(wide(path).c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, nullptr,
                            OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (file == INVALID_HANDLE_VALUE)
    fail(ErrorCode::io, "cannot open '{}': {}", path, os_error_text(static_cast<int>(GetLastError())));
  LARGE_INTEGER size{};
  if (!GetFileSizeEx(file, &size) || GetFileType(file) != FILE_TYPE_DISK) {
    CloseHandle(file);
    fail(ErrorCode::io, "cannot map '{}': not a regular file", path);
  }
  if (size.QuadPart == 0) {
    CloseHandle(file);
    fail(ErrorCode::io, "cannot map '{}': the file is empty", path);
  }
  HANDLE mapping = CreateFileMappingW(file, nullptr, PAGE_READONLY, 0, 0, nullptr);
  const DWORD map_error = GetLastError();
  CloseHandle(file);  // the mapping keeps the file open
  if (mapping == nullptr) fail(ErrorCode::io, "cannot map '{}': {}", path, os_error_text(static_cast<int>(map_error)));
  void* p = MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0);
  const DWORD view_error = GetLastError();
  CloseHandle(mapping);  // the view keeps the mapping alive
  if (p == nullptr) fail(ErrorCode::io, "cannot map '{}': {}", path, os_error_text(static_cast<int>(view_error)));
  FileView view;
  view.data = static_cast<const std::uint8_t*>(p);
  view.size = static_cast<std::uint64_t>(size.QuadPart);
  view.owner = std::shared_ptr<void>(p, [](void* q) { UnmapViewOfFile(q); });
  view.mapped = true;
  return view;
}

void release_pages(const void* data, std::uint64_t size) noexcept {
  // Pages of a read-only file view are clean: unlocking drops them from the working set.
  if (size != 0) VirtualUnlock(const_cast<void*>(data), static_cast<SIZE_T>(size));
}

std::size_t page_size() noexcept {
  SYSTEM_INFO info;
  GetSystemInfo(&info);
  return info.dwPageSize;
}

void* aligned_alloc(std::size_t alignment, std::size_t bytes) noexcept {
  return _aligned_malloc(bytes == 0 ? 1 : bytes, alignment);
}

void aligned_free(void* p) noexcept { _aligned_free(p); }

std::uint64_t available_memory_bytes() noexcept {
  MEMORYSTATUSEX status;
  status.dwLength = sizeof(status);
  return GlobalMemoryStatusEx(&status) ? status.ullAvailPhys : 0;
}

void* allocate_pages(std::size_t bytes, std::size_t alignment) {
  // VirtualAlloc returns 64 KiB-aligned, zeroed memory; for a larger alignment reserve slack and
  // commit the aligned part only (a reservation cannot be trimmed, so the slack stays reserved,
  // never committed). Large pages need a privilege games do not have: small pages.
  const std::size_t reserved = bytes + (alignment > 65536 ? alignment : 0);
  auto* first = static_cast<std::uint8_t*>(VirtualAlloc(nullptr, reserved, MEM_RESERVE, PAGE_NOACCESS));
  if (first == nullptr) fail(ErrorCode::out_of_memory, "cannot reserve {} bytes of memory", reserved);
  auto* begin = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(first) + alignment - 1) / alignment *
                                                alignment);
  if (VirtualAlloc(begin, bytes, MEM_COMMIT, PAGE_READWRITE) == nullptr) {
    VirtualFree(first, 0, MEM_RELEASE);
    fail(ErrorCode::out_of_memory, "cannot commit {} bytes of memory", bytes);
  }
  return begin;
}

void free_pages(void* p, std::size_t) noexcept {
  if (p == nullptr) return;
  MEMORY_BASIC_INFORMATION info;
  if (VirtualQuery(p, &info, sizeof(info)) != 0) VirtualFree(info.AllocationBase, 0, MEM_RELEASE);
}

FileHandle create_new_file(const std::string& path, OsError* error) noexcept {
  // CREATE_NEW fails on any existing name, a link included (never followed).
  HANDLE h = CreateFileW(wide(path).c_str(), GENERIC_WRITE, 0, nullptr, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) {
    *error = static_cast<OsError>(GetLastError());
    return kNoFile;
  }
  return reinterpret_cast<FileHandle>(h);
}

OsError write_all(FileHandle file, const void* bytes, std::size_t n) noexcept {
  const auto* p = static_cast<const std::uint8_t*>(bytes);
  while (n > 0) {
    const DWORD chunk = n > (1u << 30) ? (1u << 30) : static_cast<DWORD>(n);
    DWORD done = 0;
    if (!WriteFile(handle_of(file), p, chunk, &done, nullptr)) return static_cast<OsError>(GetLastError());
    if (done == 0) return ERROR_DISK_FULL;
    p += done;
    n -= done;
  }
  return 0;
}

OsError write_all_at(FileHandle file, std::uint64_t offset, const void* bytes, std::size_t n) noexcept {
  // An explicit offset (OVERLAPPED on a synchronous handle) leaves the append position as it was
  // only if it is restored: remember it.
  LARGE_INTEGER zero{}, position{};
  if (!SetFilePointerEx(handle_of(file), zero, &position, FILE_CURRENT)) return static_cast<OsError>(GetLastError());
  const auto* p = static_cast<const std::uint8_t*>(bytes);
  OsError result = 0;
  while (n > 0 && result == 0) {
    OVERLAPPED at{};
    at.Offset = static_cast<DWORD>(offset & 0xffffffffu);
    at.OffsetHigh = static_cast<DWORD>(offset >> 32);
    const DWORD chunk = n > (1u << 30) ? (1u << 30) : static_cast<DWORD>(n);
    DWORD done = 0;
    if (!WriteFile(handle_of(file), p, chunk, &done, &at))
      result = static_cast<OsError>(GetLastError());
    else if (done == 0)
      result = ERROR_DISK_FULL;
    p += done;
    offset += done;
    n -= done;
  }
  if (!SetFilePointerEx(handle_of(file), position, nullptr, FILE_BEGIN) && result == 0)
    result = static_cast<OsError>(GetLastError());
  return result;
}

OsError sync_file(FileHandle file) noexcept {
  return FlushFileBuffers(handle_of(file)) ? 0 : static_cast<OsError>(GetLastError());
}

OsError close_file(FileHandle file) noexcept {
  return CloseHandle(handle_of(file)) ? 0 : static_cast<OsError>(GetLastError());
}

OsError replace_file(const std::string& from, const std::string& to) noexcept {
  return MoveFileExW(wide(from).c_str(), wide(to).c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)
             ? 0
             : static_cast<OsError>(GetLastError());
}

void remove_file(const std::string& path) noexcept { DeleteFileW(wide(path).c_str()); }

void sync_folder(const std::string&) noexcept {
  // MOVEFILE_WRITE_THROUGH already flushed the rename; NTFS has no folder fsync.
}

bool lower_current_thread_priority() noexcept {
  return SetThreadPriority(GetCurrentThread(), THREAD_PRIORITY_BELOW_NORMAL) != 0;
}

ArmFeatures arm_features() noexcept {
  ArmFeatures f;
#if defined(_M_ARM64) || defined(__aarch64__)
  f.neon = true;
  // Windows names no i8mm feature for AArch64 user code (only SVE's): the dotprod tier at most.
#if defined(PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE)
  f.dotprod = IsProcessorFeaturePresent(PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE) != 0;
#endif
#endif
  return f;
}

}  // namespace ember::platform
