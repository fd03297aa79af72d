// A QEMU TCG plugin: how many guest instructions each function of the program executed.
// qemu is not a clock, so arm64 speed is unmeasured here; instruction counts per kernel and
// tier are what emulation can say (scripts/arm64-insn-count.sh, docs/benchmarks.md#arm64-insns).
//
//   qemu-aarch64 -plugin ./libsymbol_insns.so,out=counts.tsv ./program
//
// Writes "<instructions>\t<symbol>" per function, most first. Debian's qemu-user (the dynamic
// one; qemu-user-static cannot load plugins) supports plugins but ships none, and no package has
// qemu-plugin.h: the few declarations below are QEMU 7.2's plugin API (version 1), the one
// Debian 12 has. Each translated block adds its instructions, per function, atomically when it
// runs: the program's threads (one guest thread each) may share a kernel.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

extern "C" {
using qemu_plugin_id_t = std::uint64_t;
struct qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
using tb_trans_cb = void (*)(qemu_plugin_id_t, qemu_plugin_tb*);
using vcpu_udata_cb = void (*)(unsigned int, void*);
using udata_cb = void (*)(qemu_plugin_id_t, void*);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb cb);
std::size_t qemu_plugin_tb_n_insns(const qemu_plugin_tb* tb);
qemu_plugin_insn* qemu_plugin_tb_get_insn(const qemu_plugin_tb* tb, std::size_t idx);
const char* qemu_plugin_insn_symbol(const qemu_plugin_insn* insn);
void qemu_plugin_register_vcpu_tb_exec_cb(qemu_plugin_tb* tb, vcpu_udata_cb cb, qemu_plugin_cb_flags flags,
                                          void* userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, udata_cb cb, void* userdata);

__attribute__((visibility("default"))) extern const int qemu_plugin_version;
__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info, int argc,
                                                               char** argv);
}

const int qemu_plugin_version = 1;

namespace {

std::string out_path = "symbol_insns.tsv";
// One counter per symbol, by name; std::map nodes never move. Translation is serialised in
// user-mode qemu; execution is not (atomic adds).
std::map<std::string, std::uint64_t> counters;

// What one translated block adds when it runs: (counter, instructions) per run of instructions
// of one function. Blocks live until the program ends.
struct BlockCounts {
  std::vector<std::pair<std::uint64_t*, std::uint64_t>> adds;
};

std::uint64_t* counter_of(const char* symbol) { return &counters[symbol != nullptr ? symbol : "?"]; }

void on_block_exec(unsigned int, void* userdata) {
  for (const auto& [counter, n] : static_cast<const BlockCounts*>(userdata)->adds)
    __atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

void on_translate(qemu_plugin_id_t, qemu_plugin_tb* tb) {
  auto* block = new BlockCounts;
  const std::size_t n = qemu_plugin_tb_n_insns(tb);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t* counter = counter_of(qemu_plugin_insn_symbol(qemu_plugin_tb_get_insn(tb, i)));
    if (block->adds.empty() || block->adds.back().first != counter) block->adds.emplace_back(counter, 0);
    ++block->adds.back().second;
  }
  qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block_exec, QEMU_PLUGIN_CB_NO_REGS, block);
}

void on_exit(qemu_plugin_id_t, void*) {
  std::vector<std::pair<std::uint64_t, std::string>> rows;
  for (const auto& [symbol, count] : counters)
    if (count > 0) rows.emplace_back(count, symbol);
  std::sort(rows.rbegin(), rows.rend());
  if (std::FILE* f = std::fopen(out_path.c_str(), "w")) {
    for (const auto& [count, symbol] : rows)
      std::fprintf(f, "%llu\t%s\n", static_cast<unsigned long long>(count), symbol.c_str());
    std::fclose(f);
  }
}

}  // namespace

int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t*, int argc, char** argv) {
  for (int i = 0; i < argc; ++i)
    if (std::strncmp(argv[i], "out=", 4) == 0) out_path = argv[i] + 4;
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, on_exit, nullptr);
  return 0;
}
