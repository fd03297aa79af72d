// GBNF parsing and byte matching: the language of each grammar, the errors and their positions.
#include "grammar/grammar.hpp"
#include "grammar/matcher.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <string>

using namespace ember::grammar;

namespace {

Matcher matcher(const std::string& gbnf) { return Matcher(std::make_shared<const Grammar>(parse_gbnf(gbnf))); }

std::string error_of(const std::string& gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const ember::Error& e) {
    CHECK(e.code() == ember::ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("literals, alternatives and sequences") {
  Matcher m = matcher(R"(root ::= "yes" | "no" | "maybe" " " "so")");
  CHECK(m.matches("yes"));
  CHECK(m.matches("no"));
  CHECK(m.matches("maybe so"));
  CHECK_FALSE(m.matches("ye"));
  CHECK_FALSE(m.matches("yess"));
  CHECK_FALSE(m.matches(""));
  CHECK_FALSE(m.matches("maybe"));
}

TEST_CASE("repetition operators") {
  Matcher star = matcher(R"(root ::= "a" "b"* "c")");
  CHECK(star.matches("ac"));
  CHECK(star.matches("abbbbc"));
  CHECK_FALSE(star.matches("abcc"));
  Matcher plus = matcher(R"(root ::= [0-9]+)");
  CHECK(plus.matches("0"));
  CHECK(plus.matches("123456789"));
  CHECK_FALSE(plus.matches(""));
  CHECK_FALSE(plus.matches("12a"));
  Matcher opt = matcher(R"(root ::= "-"? [0-9])");
  CHECK(opt.matches("-1"));
  CHECK(opt.matches("1"));
  CHECK_FALSE(opt.matches("--1"));
  Matcher bounded = matcher(R"(root ::= "x"{2,4} ("ab"){1} "y"{2,})");
  CHECK_FALSE(bounded.matches("xabyy"));
  CHECK(bounded.matches("xxabyy"));
  CHECK(bounded.matches("xxxxabyyyyy"));
  CHECK_FALSE(bounded.matches("xxxxxabyy"));
  CHECK_FALSE(bounded.matches("xxaby"));
  Matcher exact = matcher(R"(root ::= [a-c]{3})");
  CHECK(exact.matches("abc"));
  CHECK_FALSE(exact.matches("ab"));
  CHECK_FALSE(exact.matches("abca"));
}

TEST_CASE("character classes over UTF-8") {
  Matcher m = matcher(R"(root ::= [a-zé日-本]+)");
  CHECK(m.matches("abc"));
  CHECK(m.matches("é"));
  CHECK(m.matches("日本"));  // 日 U+65E5 .. 本 U+672C
  CHECK_FALSE(m.matches("E"));
  CHECK_FALSE(m.matches("\xC3"));      // half of é: not complete
  CHECK_FALSE(m.matches("\xC3\xA8"));  // è is not in the class
  Matcher neg = matcher(R"(root ::= [^"\\]*)");
  CHECK(neg.matches("hello world ü 😀"));
  CHECK_FALSE(neg.matches("a\"b"));
  CHECK_FALSE(neg.matches("a\\"));
  CHECK_FALSE(neg.matches("\xFF"));  // not UTF-8
  Matcher dot = matcher(R"(root ::= . .)");
  CHECK(dot.matches("a😀"));
  CHECK_FALSE(dot.matches("a"));
  Matcher none = matcher(R"(root ::= "a" [^\x00-\U0010FFFF] | "b")");  // an empty class matches nothing
  CHECK(none.matches("b"));
  CHECK(none.advance(none.start(), "a") == Matcher::kDead);
  Matcher esc = matcher(R"(root ::= "\x41\u00e9\n\t\"" [\]\-])");
  CHECK(esc.matches("Aé\n\t\"]"));
  CHECK(esc.matches("Aé\n\t\"-"));
}

TEST_CASE("rules, recursion and multi-line definitions") {
  // The arithmetic grammar of llama.cpp's examples, written without left recursion.
  Matcher m = matcher(R"G(
# arithmetic
root  ::= expr
expr  ::= term (("+" | "-") term)*
term  ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")"
)G");
  CHECK(m.matches("1+2*3"));
  CHECK(m.matches("(1+2)*3"));
  CHECK(m.matches("((((7))))"));
  CHECK_FALSE(m.matches("1+"));
  CHECK_FALSE(m.matches("(1+2"));
  CHECK_FALSE(m.matches("1++2"));
  Matcher list = matcher(R"(root ::= "[" (
    item ("," item)*
  )? "]"
item ::= "a" |
         "b")");
  CHECK(list.matches("[]"));
  CHECK(list.matches("[a,b,a]"));
  CHECK_FALSE(list.matches("[a,]"));
}

TEST_CASE("prefix states: accepting, continuing, dead") {
  Matcher m = matcher(R"(root ::= "ab" "c"?)");
  auto s = m.advance(m.start(), "ab");
  CHECK(m.accepting(s));
  CHECK(m.can_continue(s));
  s = m.advance(s, 'c');
  CHECK(m.accepting(s));
  CHECK_FALSE(m.can_continue(s));
  CHECK(m.advance(s, 'c') == Matcher::kDead);
  CHECK(m.advance(m.start(), 'x') == Matcher::kDead);
  // Equal parse positions are the same state (the DFA is memoised).
  Matcher r = matcher(R"(root ::= ("x" "y")*)");
  const auto a = r.advance(r.start(), "xy");
  CHECK(a == r.start());
  CHECK(r.advance(a, "xyxy") == a);
}

TEST_CASE("errors name the problem and where it is") {
  CHECK(error_of("root ::= \"abc").find("unterminated string literal at line 1, column 10") != std::string::npos);
  CHECK(error_of("root ::= foo").find("undefined rule 'foo' at line 1, column 10") != std::string::npos);
  CHECK(error_of("start ::= \"a\"").find("no 'root' rule") != std::string::npos);
  CHECK(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice at line 2, column 1") != std::string::npos);
  CHECK(error_of("root ::= root \"a\" | \"b\"").find("'root' is left-recursive") != std::string::npos);
  CHECK(error_of("root ::= x \"a\"\nx ::= \"\" | root").find("left-recursive") != std::string::npos);
  CHECK(error_of("root ::= [a-").find("unterminated character class") != std::string::npos);
  CHECK(error_of("root ::= \"a\"{3,2}").find("max < min") != std::string::npos);
  CHECK(error_of("root ::= \"a\"{99999}").find("over 10000") != std::string::npos);
  CHECK(error_of("root ::= ( \"a\"").find("expected ')' at line 1, column 15") != std::string::npos);
  CHECK(error_of("root ::= * \"a\"").find("nothing to repeat at line 1, column 10") != std::string::npos);
  CHECK(error_of("root ::= \"\\q\"").find("unknown escape") != std::string::npos);
  CHECK(error_of("root ::= <tok>").find("token references") != std::string::npos);
  CHECK(error_of("root = \"a\"").find("expected '::=' at line 1, column 6") != std::string::npos);
  CHECK(error_of("root ::= \"\\uD800\"").find("not a Unicode scalar value") != std::string::npos);
}

TEST_CASE("ambiguous alternatives collapse into shared states") {
  // Every prefix of a's splits into exponentially many parses; the stack sets dedupe equal
  // stacks, so this stays small and matches.
  Matcher m = matcher(R"(root ::= ("a" | "a" "a")*)");
  CHECK(m.matches(std::string(200, 'a')));
  CHECK(m.state_count() < 10);
}
