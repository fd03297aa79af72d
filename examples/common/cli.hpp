// The command line of every ember program: flags declared once with their help text, so that
// `--help` lists each flag, what it does and its default (stdout, exit 0), and a bad command
// line gets a one-line error and the usage on stderr (exit 2). The engine's own flags
// (--model, --precision, --threads, --context, --kv-cache-mb, --weight-cache, --progress) are
// declared in one place, so they mean the same thing in every program.
//
// C++17 and the public API only: an example that copies it needs nothing else.
#pragma once

#include <ember/ember.hpp>

#include "default_model.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace ember_examples {

class CommandLine {
 public:
  // `synopsis` follows the program's name on the usage line ("[flags] MODEL.gguf");
  // `description` is the paragraph under it.
  CommandLine(std::string program, std::string description, std::string synopsis = "[flags]")
      : program_(std::move(program)), description_(std::move(description)), synopsis_(std::move(synopsis)) {}

  // A switch: present on the command line = true.
  CommandLine& flag(std::string name, bool& target, std::string help) {
    flags_.push_back({std::move(name), "", std::move(help), "", [&target](const std::string&) { target = true; }});
    return *this;
  }

  // A flag with a value, parsed into `target`; the default shown is target's value now, unless
  // `default_text` says it in words ("all cores").
  template <class T>
  CommandLine& option(std::string name, std::string metavar, T& target, std::string help,
                      std::string default_text = {}) {
    if (default_text.empty()) default_text = show(target);
    std::string flag_name = name;
    return option(std::move(name), std::move(metavar), std::move(help), std::move(default_text),
                  [&target, flag_name](const std::string& value) { target = parse<T>(flag_name, value); });
  }

  // A flag with a value and a parser of its own, which throws std::invalid_argument (its
  // message is the error shown) for a value it refuses.
  CommandLine& option(std::string name, std::string metavar, std::string help, std::string default_text,
                      std::function<void(const std::string&)> set) {
    flags_.push_back({std::move(name), std::move(metavar), std::move(help), std::move(default_text), std::move(set)});
    return *this;
  }

  // A required argument without a flag, in the order declared.
  CommandLine& positional(std::string name, std::string& target, std::string help) {
    positionals_.push_back({std::move(name), std::move(help), &target});
    return *this;
  }

  // Parses argv; exits on --help (0) and on a bad command line (2).
  void parse(int argc, char** argv) {
    std::size_t next_positional = 0;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        print_usage(stdout);
        std::exit(0);
      }
      if (arg.size() > 1 && arg[0] == '-') {
        const Flag* f = find(arg);
        if (f == nullptr) fail("unknown flag " + arg);
        std::string value;
        if (!f->metavar.empty()) {
          if (i + 1 >= argc) fail("missing " + f->metavar + " after " + arg);
          value = argv[++i];
        }
        try {
          f->set(value);
        } catch (const std::exception& e) {
          fail(e.what());
        }
      } else if (next_positional < positionals_.size()) {
        *positionals_[next_positional++].target = arg;
      } else {
        fail("unexpected argument '" + arg + "'");
      }
    }
    if (next_positional < positionals_.size()) fail("missing " + positionals_[next_positional].name);
  }

  [[noreturn]] void fail(const std::string& problem) const {
    std::fprintf(stderr, "%s: %s\n", program_.c_str(), problem.c_str());
    print_usage(stderr);
    std::exit(2);
  }

  void print_usage(std::FILE* out) const {
    std::fprintf(out, "usage: %s %s\n\n%s\n", program_.c_str(), synopsis_.c_str(), wrapped(description_, 0, 0).c_str());
    if (!positionals_.empty()) {
      std::fprintf(out, "\narguments:\n");
      for (const Positional& p : positionals_) print_row(out, p.name, p.help, "");
    }
    std::fprintf(out, "\nflags:\n");
    for (const Flag& f : flags_)
      print_row(out, f.metavar.empty() ? f.name : f.name + " " + f.metavar, f.help, f.default_text);
    print_row(out, "-h, --help", "print this text and exit", "");
  }

  const std::string& program() const { return program_; }

  // A value parsed as T, or std::invalid_argument naming the flag.
  template <class T>
  static T parse(const std::string& flag, const std::string& value) {
    if constexpr (std::is_same_v<T, std::string>) {
      return value;
    } else {
      std::size_t used = 0;
      T result{};
      try {
        if constexpr (std::is_floating_point_v<T>) {
          result = static_cast<T>(std::stod(value, &used));
        } else if constexpr (std::is_signed_v<T>) {
          const long long v = std::stoll(value, &used);
          if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) throw std::out_of_range(value);
          result = static_cast<T>(v);
        } else {
          const std::size_t first = value.find_first_not_of(" \t\n\v\f\r");
          if (first != std::string::npos && value[first] == '-') throw std::out_of_range(value);
          const unsigned long long v = std::stoull(value, &used);
          if (v > std::numeric_limits<T>::max()) throw std::out_of_range(value);
          result = static_cast<T>(v);
        }
      } catch (const std::logic_error&) {
        used = 0;
      }
      if (used == 0 || used != value.size())
        throw std::invalid_argument(flag + ": '" + value + "' is not " +
                                    (std::is_floating_point_v<T> ? "a number"
                                     : std::is_signed_v<T>       ? "a whole number"
                                                                 : "a non-negative whole number"));
      return result;
    }
  }

 private:
  struct Flag {
    std::string name, metavar, help, default_text;
    std::function<void(const std::string&)> set;
  };
  struct Positional {
    std::string name, help;
    std::string* target;
  };

  const Flag* find(const std::string& name) const {
    for (const Flag& f : flags_)
      if (f.name == name) return &f;
    return nullptr;
  }

  template <class T>
  static std::string show(const T& value) {
    if constexpr (std::is_same_v<T, std::string>)
      return value.empty() ? "none" : value;
    else if constexpr (std::is_same_v<T, bool>)
      return value ? "on" : "off";
    else {
      std::string s = std::to_string(value);
      if constexpr (std::is_floating_point_v<T>) {  // 0.800000 -> 0.8
        s.erase(s.find_last_not_of('0') + 1);
        if (!s.empty() && s.back() == '.') s.pop_back();
      }
      return s;
    }
  }

  // "  --flag VALUE            help (default: ...)", the help wrapped at 100 columns.
  static void print_row(std::FILE* out, const std::string& left, const std::string& help,
                        const std::string& default_text) {
    constexpr std::size_t indent = 26;
    std::string line = "  " + left;
    if (line.size() < indent)
      line.resize(indent, ' ');
    else
      line.append(1, '\n').append(indent, ' ');
    std::string text = help;
    if (!default_text.empty()) text += " (default: " + default_text + ")";
    std::fprintf(out, "%s%s\n", line.c_str(), wrapped(text, indent, indent).c_str());
  }

  // `text` broken into lines of 100 columns at most (a longer word keeps its own line), the
  // first starting at column `column`, the others indented by `indent`.
  static std::string wrapped(const std::string& text, std::size_t column, std::size_t indent) {
    constexpr std::size_t width = 100;
    std::string out;
    bool line_empty = true;
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t end = text.find(' ', pos);
      if (end == std::string::npos) end = text.size();
      const std::size_t word = end - pos;
      if (!line_empty && column + 1 + word > width) {
        out.append(1, '\n').append(indent, ' ');
        column = indent;
      } else if (!line_empty) {
        out += ' ';
        ++column;
      }
      out.append(text, pos, word);
      column += word;
      line_empty = false;
      pos = end + 1;
    }
    return out;
  }

  std::string program_, description_, synopsis_;
  std::vector<Flag> flags_;
  std::vector<Positional> positionals_;
};

// Exits (status 1) with a message saying how to get a model when `path` names no file;
// `alternatives` ends the message with the program's other ways of naming one.
inline void require_model_file(const std::string& program, const std::string& path,
                               const std::string& alternatives = "or pass --model PATH, or set EMBER_MODEL=PATH") {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return;
  std::fprintf(stderr,
               "%s: no model file at '%s'.\n"
               "  Fetch the default model (SmolLM2-135M-Instruct) with scripts/fetch-model.sh,\n"
               "  %s.\n",
               program.c_str(), path.c_str(), alternatives.c_str());
  std::exit(1);
}

// The engine's flags, shared by every program that opens a model. Declare the ones that make
// sense for the program, parse, then call open_options() for the EngineOptions to open with.
struct EngineFlags {
  enum Which : unsigned {
    model = 1u << 0,
    precision = 1u << 1,
    threads = 1u << 2,
    context = 1u << 3,
    kv_cache_mb = 1u << 4,
    weight_cache = 1u << 5,
    progress = 1u << 6,
    context_policy = 1u << 7,
    kv_type = 1u << 8,
    chat_template = 1u << 9,
    all = (1u << 10) - 1,
  };

  std::string model_path = default_model_path();
  ember::EngineOptions options;  // what the flags set; a program may preset fields first
  bool show_progress = false;

  void declare(CommandLine& cli, unsigned which = all) {
    if (which & model)
      cli.option("--model", "PATH", model_path,
                 "the GGUF model to run; without it $EMBER_MODEL, else the default model that "
                 "scripts/fetch-model.sh caches",
                 model_path.empty() ? "none" : model_path);
    if (which & precision)
      cli.option("--precision", "int8|fp32", "numeric path of the matrix products",
                 options.precision == ember::Precision::fp32 ? "fp32" : "int8", [this](const std::string& p) {
                   if (p == "int8")
                     options.precision = ember::Precision::int8;
                   else if (p == "fp32")
                     options.precision = ember::Precision::fp32;
                   else
                     throw std::invalid_argument("--precision must be int8 or fp32, not '" + p + "'");
                 });
    if (which & precision)
      cli.option("--weights", "automatic|w8a8",
                 "how int8 keeps the matrices: automatic (a file's 4-bit matrices stay 4-bit, w4a8) or "
                 "w8a8 (all requantized to INT8)",
                 ember::to_string(options.weight_format), [this](const std::string& p) {
                   if (p == "automatic")
                     options.weight_format = ember::WeightFormat::automatic;
                   else if (p == "w8a8")
                     options.weight_format = ember::WeightFormat::w8a8;
                   else
                     throw std::invalid_argument("--weights must be automatic or w8a8, not '" + p + "'");
                 });
    if (which & threads)
      cli.option("--threads", "N", options.threads, "compute threads",
                 options.threads == 0 ? "all hardware threads" : "");
    if (which & context)
      cli.option("--context", "N", options.context_length, "tokens per sequence",
                 options.context_length == 0 ? "the model's, at most 8192" : "");
    if (which & context_policy)
      cli.option("--context-policy", "error|truncate|shift",
                 "when a chat outgrows the context: error, truncate (drop its oldest turns), or "
                 "shift (also make room in a generation that fills the window)",
                 ember::to_string(options.context_policy), [this](const std::string& p) {
                   if (p == "error")
                     options.context_policy = ember::ContextPolicy::error;
                   else if (p == "truncate")
                     options.context_policy = ember::ContextPolicy::truncate;
                   else if (p == "shift")
                     options.context_policy = ember::ContextPolicy::shift;
                   else
                     throw std::invalid_argument("--context-policy must be error, truncate or shift, not '" + p + "'");
                 });
    if (which & kv_cache_mb) {
      kv_cache_mb_ = options.kv_cache_bytes >> 20;
      cli.option("--kv-cache-mb", "MB", "memory of the paged KV cache, in MiB", std::to_string(kv_cache_mb_),
                 [this](const std::string& v) {
                   kv_cache_mb_ = CommandLine::parse<std::size_t>("--kv-cache-mb", v);
                   if (kv_cache_mb_ == 0 || kv_cache_mb_ > (SIZE_MAX >> 20))
                     throw std::invalid_argument("--kv-cache-mb must be at least 1 and fit in memory");
                   options.kv_cache_bytes = kv_cache_mb_ << 20;
                 });
    }
    if (which & kv_type)
      cli.option("--kv-type", "f16|f32|int8",
                 "storage of the KV cache; int8 (CPU only) holds about twice the tokens of f16",
                 kv_type_name(options.kv_cache_type), [this](const std::string& t) {
                   if (t == "f16")
                     options.kv_cache_type = ember::KvCacheType::f16;
                   else if (t == "f32")
                     options.kv_cache_type = ember::KvCacheType::f32;
                   else if (t == "int8")
                     options.kv_cache_type = ember::KvCacheType::int8;
                   else
                     throw std::invalid_argument("--kv-type must be f16, f32 or int8, not '" + t + "'");
                 });
    if (which & weight_cache)
      cli.option("--weight-cache", "DIR", options.weight_cache_dir,
                 "keep the prepared INT8 weights in DIR, so the next start skips their "
                 "preparation");
    if (which & chat_template)
      cli.option("--chat-template", "FILE",
                 "a Jinja chat template to use instead of the model file's (as a Hugging Face "
                 "chat_template.jinja holds it)",
                 "the file's", [this](const std::string& path) {
                   std::ifstream in(path, std::ios::binary);
                   if (!in) throw std::invalid_argument("--chat-template: cannot read '" + path + "'");
                   options.chat_template.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
                   if (options.chat_template.empty())
                     throw std::invalid_argument("--chat-template: '" + path + "' is empty");
                 });
    if (which & progress) cli.flag("--progress", show_progress, "draw the model's load progress on stderr");
  }

  // The options to open the model with: --progress installs a progress bar and a log on stderr.
  // Exits with a message saying how to get a model when the file is not there.
  ember::EngineOptions open_options(const CommandLine& cli) const {
    require_model_file(cli.program(), model_path);
    ember::EngineOptions o = options;
    if (show_progress) {
      o.on_load_progress = [](ember::LoadPhase phase, float fraction) {
        std::fprintf(stderr, "\rloading %3.0f %% (%s)      ", 100.0f * fraction, ember::to_string(phase));
        if (fraction >= 1.0f) std::fprintf(stderr, "\n");
        return true;
      };
      if (!o.log)
        o.log = [](ember::LogLevel, std::string_view message) {
          std::fprintf(stderr, "\n[ember] %.*s\n", static_cast<int>(message.size()), message.data());
        };
    }
    return o;
  }

 private:
  static const char* kv_type_name(ember::KvCacheType t) {
    return t == ember::KvCacheType::f16 ? "f16" : t == ember::KvCacheType::f32 ? "f32" : "int8";
  }
  std::size_t kv_cache_mb_ = 0;
};

}  // namespace ember_examples
