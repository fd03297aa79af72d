#include "runtime/stop_matcher.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using ember::runtime::StopMatcher;

namespace {

struct Outcome {
  std::string emitted;  // everything released, including flush() when not stopped
  bool stopped = false;
  bool operator==(const Outcome&) const = default;
};

// Feeds `pieces` and checks on the way that nothing is released after a stop.
Outcome run(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopMatcher m(stops);
  Outcome out;
  for (const std::string& piece : pieces) {
    StopMatcher::Result r = m.push(piece);
    if (out.stopped) CHECK(r.text.empty());
    out.emitted += r.text;
    out.stopped = out.stopped || r.stopped;
  }
  const std::string rest = m.flush();
  if (out.stopped) CHECK(rest.empty());
  out.emitted += rest;
  return out;
}

// Every way of cutting `text` into two or three pieces (cuts at every byte offset, UTF-8
// characters included) must give `expected`.
void check_all_splits(const std::vector<std::string>& stops, const std::string& text, const Outcome& expected) {
  INFO("text: ", text);
  CHECK(run(stops, {text}) == expected);
  for (std::size_t i = 0; i <= text.size(); ++i) {
    for (std::size_t j = i; j <= text.size(); ++j) {
      const Outcome got = run(stops, {text.substr(0, i), text.substr(i, j - i), text.substr(j)});
      INFO("cuts at ", i, " and ", j);
      CHECK(got == expected);
    }
  }
  // And one byte at a time.
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  CHECK(run(stops, bytes) == expected);
}

}  // namespace

TEST_CASE("no stop strings: pass-through with nothing held back") {
  StopMatcher m({});
  const StopMatcher::Result r = m.push("hello ");
  CHECK(r.text == "hello ");
  CHECK_FALSE(r.stopped);
  CHECK(m.push("world").text == "world");
  CHECK(m.held_bytes() == 0);
  CHECK(m.flush().empty());
  check_all_splits({}, "some text", {"some text", false});
}

TEST_CASE("a stop split across pieces at every point is cut and never emitted") {
  check_all_splits({"STOP"}, "abc STOP def", {"abc ", true});
  check_all_splits({"STOP"}, "abc STO", {"abc STO", false});  // a partial stop is flushed
  check_all_splits({"\n\n"}, "line\n \nline\n\nmore", {"line\n \nline", true});
}

TEST_CASE("text is released as soon as it cannot start a stop") {
  StopMatcher m({"</s>"});
  StopMatcher::Result r = m.push("hi <");
  CHECK(r.text == "hi ");  // '<' could start "</s>"
  CHECK(m.held_bytes() == 1);
  r = m.push("/x");
  CHECK(r.text == "</x");  // no longer a prefix: released at once
  CHECK(m.held_bytes() == 0);
  r = m.push("</");
  CHECK(r.text.empty());
  r = m.push("s> tail");
  CHECK(r.stopped);
  CHECK(r.text.empty());
  CHECK(m.stopped());
  CHECK(m.push("more").stopped);
  CHECK(m.push("more").text.empty());
}

TEST_CASE("a stop at the very start emits nothing") {
  check_all_splits({"###"}, "### heading", {"", true});
  StopMatcher m({"###"});
  const StopMatcher::Result r = m.push("###");
  CHECK(r.stopped);
  CHECK(r.text.empty());
}

TEST_CASE("overlapping stops: the first to complete wins, independent of splitting") {
  // "ab" completes before "abc" could.
  check_all_splits({"ab", "abc"}, "xxabcz", {"xx", true});
  check_all_splits({"abc", "ab"}, "xxabcz", {"xx", true});
  // "aab" and "ab" complete at the same byte: cut where the longer (earlier) one starts.
  check_all_splits({"ab", "aab"}, "xaabz", {"x", true});
  // Self-overlapping stop: "aab" inside "aaab".
  check_all_splits({"aab"}, "aaaab!", {"aa", true});
  // "b" completes before "xabc" can: the first completed stop decides, not the first started.
  check_all_splits({"xabc", "b"}, "1xabc", {"1xa", true});
  // A held-back prefix that fails must release its bytes and still find a later stop.
  check_all_splits({"abc"}, "ababc", {"ab", true});
}

TEST_CASE("multiple stops: whichever appears first") {
  const std::vector<std::string> stops{"User:", "\nAssistant:", "<|im_end|>"};
  check_all_splits(stops, "Sure.<|im_end|>User:", {"Sure.", true});
  check_all_splits(stops, "Answer\nAssistant: hi", {"Answer", true});
  check_all_splits(stops, "Use the <|im", {"Use the <|im", false});
}

TEST_CASE("UTF-8 multi-byte stop strings, split inside characters") {
  // "。" is 3 bytes, "🛑" is 4 bytes.
  check_all_splits({"。"}, "你好。世界", {"你好", true});
  check_all_splits({"🛑 end"}, "go 🛑 end now", {"go ", true});
  check_all_splits({"🛑 end"}, "go 🛑 en", {"go 🛑 en", false});
  // Held-back text starts at a character boundary: the bytes released so far are whole chars.
  StopMatcher m({"ünd"});
  const StopMatcher::Result r = m.push("grün");
  CHECK(r.text == "gr");
  CHECK(m.push("e").text == "üne");
}

TEST_CASE("empty stop strings are ignored") {
  check_all_splits({"", "END"}, "a END b", {"a ", true});
  check_all_splits({""}, "abc", {"abc", false});
}
