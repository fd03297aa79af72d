// strftime_now: Python's datetime.strftime in the C locale, written out so that a host's locale
// (setlocale) cannot change what a template renders.
#include "template/builtins.hpp"

#include "util/check.hpp"

namespace ember::jinja {
namespace {

constexpr const char* kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                   "July",    "August",   "September", "October", "November", "December"};
constexpr const char* kDays[] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int day_of_year(const CivilTime& t) {
  static constexpr int kBefore[] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
  return kBefore[t.month - 1] + t.day + (t.month > 2 && leap(t.year) ? 1 : 0);
}

// 0 = Monday (Sakamoto's method, shifted).
int weekday(const CivilTime& t) {
  static constexpr int kOffsets[] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};
  const int y = t.month < 3 ? t.year - 1 : t.year;
  const int sunday_based = (y + y / 4 - y / 100 + y / 400 + kOffsets[t.month - 1] + t.day) % 7;
  return (sunday_based + 6) % 7;
}

}  // namespace

std::string format_time(std::string_view format, const CivilTime& t) {
  if (t.month < 1 || t.month > 12 || t.day < 1 || t.day > 31)
    fail(ErrorCode::invalid_argument, "strftime_now: bad date");
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 == format.size()) {
      out += format[i];
      continue;
    }
    const char c = format[++i];
    switch (c) {
      case 'Y': out += std::to_string(t.year); break;
      case 'y': out += fmt::format("{:02d}", t.year % 100); break;
      case 'm': out += fmt::format("{:02d}", t.month); break;
      case 'd': out += fmt::format("{:02d}", t.day); break;
      case 'e': out += fmt::format("{:2d}", t.day); break;
      case 'H': out += fmt::format("{:02d}", t.hour); break;
      case 'I': out += fmt::format("{:02d}", t.hour % 12 == 0 ? 12 : t.hour % 12); break;
      case 'M': out += fmt::format("{:02d}", t.minute); break;
      case 'S': out += fmt::format("{:02d}", t.second); break;
      case 'p': out += t.hour < 12 ? "AM" : "PM"; break;
      case 'B': out += kMonths[t.month - 1]; break;
      case 'b': out += std::string_view(kMonths[t.month - 1]).substr(0, 3); break;
      case 'A': out += kDays[weekday(t)]; break;
      case 'a': out += std::string_view(kDays[weekday(t)]).substr(0, 3); break;
      case 'j': out += fmt::format("{:03d}", day_of_year(t)); break;
      case '%': out += '%'; break;
      default: out += '%'; out += c;
    }
  }
  return out;
}

Value strftime_function(CivilTime time) {
  return Value::callable("strftime_now", [time](CallArgs& a) {
    const Value* f = a.get(0, "format");
    if (f == nullptr || !f->is_string()) fail(ErrorCode::invalid_argument, "strftime_now() takes a format string");
    return Value(format_time(f->as_string(), time));
  });
}

}  // namespace ember::jinja
