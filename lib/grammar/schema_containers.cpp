// Arrays and objects of the JSON Schema converter (the rest is in json_schema.cpp).
#include "grammar/schema_converter.hpp"

#include "grammar/grammar.hpp"
#include "grammar/schema_regex.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <bit>

namespace ember::grammar {
namespace {

using Type = JsonValue::Type;

std::string pointer_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

JsonValue both(const JsonValue& a, const JsonValue& b) {
  JsonValue v, list;
  v.type = Type::object;
  list.type = Type::array;
  list.items = {a, b};
  v.members.push_back({"allOf", std::move(list)});
  return v;
}

JsonValue value_of(Type type, bool boolean = false, std::string text = {}) {
  JsonValue v;
  v.type = type;
  v.boolean = boolean;
  v.text = std::move(text);
  return v;
}

// How many distinct values a (normalized) schema allows, when it is plainly finite: an enum or
// const, a boolean or null type. nullopt: unbounded or not worked out.
std::optional<std::size_t> distinct_values(const JsonValue& s) {
  if (s.type != Type::object) return std::nullopt;
  if (const JsonValue* e = s.find("enum"); e && e->type == Type::array) return e->items.size();
  if (s.find("const")) return 1;
  const JsonValue* t = s.find("type");
  if (t && t->type == Type::string && t->text == "boolean") return 2;
  if (t && t->type == Type::string && t->text == "null") return 1;
  return std::nullopt;
}

bool trivially_true(const JsonValue& v) {
  return (v.type == Type::boolean && v.boolean) || (v.type == Type::object && v.members.empty());
}

}  // namespace

std::string SchemaConverter::array(const JsonValue& s, const std::string& path, const std::string& hint) {
  const JsonValue* prefix_items = s.find("prefixItems");
  const JsonValue* items = s.find("items");
  const JsonValue* contains = s.find("contains");
  if (prefix_items && prefix_items->type != Type::array) invalid(path, "'prefixItems' must be an array");
  int lo = count_of(s, path, "minItems").value_or(0);
  std::optional<int> hi = count_of(s, path, "maxItems");
  bool unique = false;
  if (const JsonValue* u = s.find("uniqueItems"); u && u->type == Type::boolean && u->boolean) {
    // Items from a small finite set: every order of distinct ones, exactly. Otherwise checked
    // while decoding (unique_items.hpp), once the rule below is named.
    std::vector<JsonValue> set;
    std::optional<std::size_t> distinct;
    if (items && !prefix_items && !contains) {
      // Normalized once: a schema outside the root document is normalized afresh on every call,
      // and each call counts towards the converter's recursion budget.
      const JsonValue& n = normalizer_.normalize_once(*items, path + "/items").value;
      const JsonValue* e = n.type == Type::object ? n.find("enum") : nullptr;
      if (e && e->items.size() <= 6 && n.members.size() <= 2)
        set = e->items;
      else if (n.type == Type::object && n.members.size() == 1 && n.find("type") && n.find("type")->text == "boolean")
        set = {parse_json("true"), parse_json("false")};
      distinct = distinct_values(n);
    }
    if (!set.empty()) return unique_array(set, lo, hi, hint);
    if (distinct && static_cast<std::size_t>(lo) > *distinct)
      unsatisfiable(path, "'minItems' above the number of distinct items 'uniqueItems' allows");
    unique = true;
  }
  std::vector<std::string> prefix;
  std::vector<JsonValue> prefix_schemas = prefix_items ? prefix_items->items : std::vector<JsonValue>{};
  if (contains) {  // the first item satisfies `contains` (narrower than "some item")
    const JsonValue first =
        prefix_schemas.empty() ? (items ? *items : value_of(Type::boolean, true)) : prefix_schemas[0];
    if (prefix_schemas.empty())
      prefix_schemas.push_back(both(first, *contains));
    else
      prefix_schemas[0] = both(first, *contains);
    lo = std::max(lo, 1);
  }
  for (std::size_t i = 0; i < prefix_schemas.size(); ++i)
    prefix.push_back(
        visit(prefix_schemas[i], fmt::format("{}/prefixItems/{}", path, i), fmt::format("{}-{}", hint, i)));
  std::optional<std::string> rest;  // the schema after the prefix; none: no more items
  if (items && items->type == Type::boolean && !items->boolean)
    rest = std::nullopt;
  else if (items)
    try {
      rest = visit(*items, path + "/items", hint + "-item");
    } catch (const Unsatisfiable&) {  // no item satisfies it: only the prefix
    }
  else if (prefix.empty())
    rest = use("json-value");
  const std::size_t k = prefix.size();
  // A tuple without `items`: exactly its prefix (any more would be unconstrained values).
  if (!items && k > 0)
    hi = hi ? std::min(*hi, std::max<int>(lo, static_cast<int>(k))) : std::max<int>(lo, static_cast<int>(k));
  if (!rest) hi = hi ? std::min(*hi, static_cast<int>(k)) : static_cast<int>(k);
  if (hi && lo > *hi) unsatisfiable(path, "'minItems' that the other array keywords cannot reach");
  lo = std::max(lo, std::min(static_cast<int>(k), hi.value_or(static_cast<int>(k))));
  const std::string sep = use("ws") + " \",\" ws ";
  const auto item_at = [&](int i) {
    return i < static_cast<int>(k) ? prefix[static_cast<std::size_t>(i)] : rest.value_or("");
  };
  // tail(i): the items from position i on, each after a comma.
  std::string tail;
  const int fixed = std::max<int>(static_cast<int>(k), 1);  // positions written one by one
  if ((!hi || *hi > fixed) && rest && (!hi || *hi > static_cast<int>(k))) {
    const int need = std::max(0, lo - fixed);
    const std::string reps = hi ? fmt::format("{{{},{}}}", need, *hi - fixed) : fmt::format("{{{},}}", need);
    if (!hi || *hi - fixed > 0) tail = "(" + sep + *rest + ")" + reps;
  }
  for (int i = fixed - 1; i >= 1; --i) {
    if (hi && i >= *hi) continue;
    const std::string step = sep + item_at(i) + (tail.empty() ? "" : " " + tail);
    tail = i < lo ? "(" + step + ")" : "(" + step + ")?";
  }
  std::string body;
  if (!hi || *hi >= 1) {
    const std::string first = item_at(0) + (tail.empty() ? "" : " " + tail);
    body = lo >= 1 ? first : "(" + first + ")?";
  }
  const std::string name = add_rule(hint, "\"[\" ws " + (body.empty() ? "" : body + " ") + "ws \"]\"");
  if (unique) unique_rules_.push_back(name);
  return name;
}

// Distinct items from `set`, in any order, between lo and hi of them: one rule per subset
// already written (at most 2^6).
std::string SchemaConverter::unique_array(const std::vector<JsonValue>& set, int lo, std::optional<int> hi,
                                          const std::string& hint) {
  const std::size_t n = set.size();
  const int most = std::min<int>(static_cast<int>(n), hi.value_or(static_cast<int>(n)));
  if (lo > most) unsatisfiable(hint, "'minItems' above the number of distinct items 'uniqueItems' allows");
  const std::string sep = use("ws") + " \",\" ws ";
  std::vector<std::string> rule(std::size_t{1} << n);
  for (std::size_t m = 0; m < rule.size(); ++m) rule[m] = rule_name(hint + "-unique");
  for (std::size_t m = rule.size(); m-- > 0;) {
    const int count = std::popcount(m);
    std::vector<std::string> alts;
    if (count < most)
      for (std::size_t i = 0; i < n; ++i)
        if (!(m & (std::size_t{1} << i)))
          alts.push_back((m ? sep : std::string()) + gbnf_literal(set[i].dump()) + " " +
                         rule[m | (std::size_t{1} << i)]);
    std::string body;
    for (std::size_t a = 0; a < alts.size(); ++a) body += (a ? " | " : "") + alts[a];
    if (count >= lo) body = alts.empty() ? "\"\"" : "\"\" | " + body;  // "": the array may end here
    rules_.emplace_back(rule[m], body);
  }
  return "\"[\" ws " + rule[0] + " ws \"]\"";
}

std::string SchemaConverter::object(const JsonValue& s, const std::string& path, const std::string& hint) {
  const JsonValue* props = s.find("properties");
  if (props && props->type != Type::object) invalid(path, "'properties' must be an object");
  std::vector<std::string> required;
  if (const JsonValue* r = s.find("required")) {
    if (r->type != Type::array) invalid(path, "'required' must be an array");
    for (const JsonValue& v : r->items) {
      if (v.type != Type::string) invalid(path, "'required' must list strings");
      if (std::find(required.begin(), required.end(), v.text) == required.end()) required.push_back(v.text);
    }
  }
  const JsonValue* additional = s.find("additionalProperties");
  const bool closed = additional && additional->type == Type::boolean && !additional->boolean;
  struct Listed {
    std::string name;
    JsonValue schema;
    bool required;
  };
  std::vector<Listed> listed;
  std::vector<std::string> names;  // every name an extra member must not take
  const auto is_required = [&](const std::string& n) {
    return std::find(required.begin(), required.end(), n) != required.end();
  };
  // A name is validated by every patternProperties pattern it matches, beside `properties`:
  // the patterns' schemas (not trivially true) a known name must satisfy; nullopt when some
  // pattern cannot be tested (pattern_matches).
  const JsonValue* patterns = s.find("patternProperties");
  const auto matching = [&](const std::string& name) -> std::optional<std::vector<const JsonValue*>> {
    std::vector<const JsonValue*> out;
    if (!patterns || patterns->type != Type::object) return out;
    for (const auto& [pattern, schema] : patterns->members) {
      const std::optional<bool> m = pattern_matches(pattern, name);
      if (!m) return std::nullopt;
      if (*m) out.push_back(&schema);
    }
    return out;
  };
  const auto with_patterns = [&](JsonValue schema, const std::vector<const JsonValue*>& ms) {
    for (const JsonValue* m : ms)
      if (!trivially_true(*m)) schema = trivially_true(schema) ? *m : both(schema, *m);
    return schema;
  };
  if (props)
    for (const auto& [name, schema] : props->members) {
      names.push_back(name);
      const JsonValue& n = normalizer_.normalize_once(schema, path + "/properties/" + pointer_escape(name)).value;
      if (n.type == Type::boolean && !n.boolean) {  // the property must be absent
        if (is_required(name))
          unsatisfiable(path, fmt::format("a required property '{}' that no value satisfies", name));
        continue;
      }
      const auto ms = matching(name);
      if (!ms) note(path, fmt::format("whether '{}' matches a patternProperties pattern is not checked", name));
      listed.push_back({name, ms ? with_patterns(schema, *ms) : schema, is_required(name)});
    }
  // A required name `properties` does not list takes the schemas of the patterns it matches, or
  // of extra members when it matches none.
  for (const std::string& name : required) {
    if (props && props->find(name)) continue;
    const auto ms = matching(name);
    if (!ms)
      note(path, fmt::format("whether the required '{}' matches a patternProperties pattern is not checked", name));
    if (closed && ms && ms->empty())
      unsatisfiable(path, fmt::format("'required' naming '{}', which 'additionalProperties' forbids", name));
    names.push_back(name);
    const JsonValue extra =
        additional && additional->type == Type::object ? *additional : value_of(Type::boolean, true);
    listed.push_back({name, ms && !ms->empty() ? with_patterns(value_of(Type::boolean, true), *ms) : extra, true});
  }
  std::size_t required_count = required.size();
  // minProperties: optional ones become required, in order (narrower).
  if (auto minp = count_of(s, path, "minProperties"))
    for (Listed& l : listed)
      if (required_count < static_cast<std::size_t>(*minp) && !l.required) l.required = true, ++required_count;
  std::optional<int> max_extra;
  if (auto maxp = count_of(s, path, "maxProperties")) {
    if (required_count > static_cast<std::size_t>(*maxp))
      unsatisfiable(path, "'maxProperties' below the number of required properties");
    // Optional ones are left out from the end until every listed one fits (narrower).
    for (std::size_t i = listed.size(); i-- > 0 && listed.size() > static_cast<std::size_t>(*maxp);)
      if (!listed[i].required) listed.erase(listed.begin() + static_cast<std::ptrdiff_t>(i));
    max_extra = *maxp - static_cast<int>(listed.size());
  }
  if (auto minp = count_of(s, path, "minProperties"); minp && required_count < static_cast<std::size_t>(*minp))
    note(path, "'minProperties' above the properties it lists is not enforced");
  use("ws");
  struct Prop {
    std::string kv;
    bool required;
  };
  std::vector<Prop> list;
  for (const Listed& l : listed) {
    std::string value;
    try {
      value = visit(l.schema, path + "/properties/" + pointer_escape(l.name), hint + "-" + l.name);
    } catch (const Unsatisfiable&) {
      if (l.required) throw;
      continue;  // an optional property no value satisfies is left out
    }
    list.push_back({add_rule(hint + "-" + l.name + "-kv", gbnf_literal(json_quote(l.name)) + " ws \":\" ws " + value),
                    l.required});
  }
  bool any_extra = false;
  std::string extra_kv;
  if (!max_extra || *max_extra > 0) extra_kv = extra_members(s, names, path, hint, any_extra);
  const bool extra = any_extra;
  const std::string sep = "ws \",\" ws ";
  // after[i]: members from i on when one was already written (each after a comma).
  std::vector<std::string> after(list.size() + 1);
  const std::string more = max_extra ? fmt::format("{{0,{}}}", *max_extra - 1) : "*";
  after[list.size()] =
      extra ? "(" + sep + extra_kv + ")" + (max_extra ? fmt::format("{{0,{}}}", *max_extra) : "*") : "";
  for (std::size_t i = list.size(); i-- > 0;) {
    const std::string rest = after[i + 1].empty() ? "" : " " + after[i + 1];
    std::string body = list[i].required ? sep + list[i].kv + rest : "(" + sep + list[i].kv + ")?" + rest;
    after[i] = add_rule(hint + "-after", body);
  }
  // first(i): members from i on when none was written yet.
  // With no listed member written, the first extra one has no comma, and one fewer may follow.
  std::string first = extra ? "(" + extra_kv + " (" + sep + extra_kv + ")" + more + ")?" : "";
  for (std::size_t i = list.size(); i-- > 0;) {
    const std::string with = list[i].kv + (after[i + 1].empty() ? "" : " " + after[i + 1]);
    if (list[i].required)
      first = with;
    else
      first = "(" + with + (first.empty() ? ")?" : " | " + first + ")");
  }
  return add_rule(hint, "\"{\" ws " + (first.empty() ? "" : first + " ") + "ws \"}\"");
}

// One member that `properties` does not list, or "" (any = false) when none may be written:
// names matching a patternProperties pattern with its schema (a pattern ember cannot write is
// left out: narrower), and other names (never one of `names`; within propertyNames) with the
// additionalProperties schema, only when no pattern's schema could object to them. Without
// additionalProperties, an object that lists properties gets no others (narrower).
std::string SchemaConverter::extra_members(const JsonValue& s, const std::vector<std::string>& names,
                                           const std::string& path, const std::string& hint, bool& any) {
  const JsonValue* additional = s.find("additionalProperties");
  const JsonValue* patterns = s.find("patternProperties");
  const JsonValue* key_schema = s.find("propertyNames");
  std::vector<std::string> alts;
  bool patterns_trivial = true;
  if (patterns && patterns->type == Type::object)
    for (const auto& [pattern, schema] : patterns->members) {
      patterns_trivial &= trivially_true(schema);
      std::string key;
      try {
        key = pattern_to_gbnf(pattern);
      } catch (const Error&) {
        continue;
      }
      std::string value;
      try {
        value = visit(schema, path + "/patternProperties/" + pointer_escape(pattern), hint + "-pattern");
      } catch (const Unsatisfiable&) {
        continue;
      }
      alts.push_back(add_rule(hint + "-pattern-key", "\"\\\"\" " + key + " \"\\\"\"") + " ws \":\" ws " + value);
    }
  const bool open = additional ? !(additional->type == Type::boolean && !additional->boolean) : !s.find("properties");
  if (open && patterns_trivial) {
    std::string key;
    if (key_schema && !trivially_true(*key_schema)) {
      if (key_schema->type == Type::object && (key_schema->find("enum") || key_schema->find("const"))) {
        JsonValue not_listed = *key_schema;  // names a listed property does not take
        JsonValue excluded = value_of(Type::array);
        for (const std::string& n : names) excluded.items.push_back(value_of(Type::string, false, n));
        not_listed.members.push_back({"x-ember-not", std::move(excluded)});
        key = visit(not_listed, path + "/propertyNames", hint + "-name");
      } else {
        JsonValue as_string = both(*key_schema, parse_json(R"({"type": "string"})"));
        key = visit(as_string, path + "/propertyNames", hint + "-name");
      }
    } else {
      key = other_key(names, hint);
    }
    try {
      const std::string value =
          additional ? visit(*additional, path + "/additionalProperties", hint + "-extra") : use("json-value");
      alts.push_back(key + " ws \":\" ws " + value);
    } catch (const Unsatisfiable&) {  // no extra member can be written
    }
  }
  any = !alts.empty();
  if (!any) return "";
  std::string body;
  for (std::size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
  return add_rule(hint + "-extra-kv", body);
}

// A member name that is none of `names`: a trie of the names over code points, leaving it
// at some character (then anything), or ending where no name ends. Names that need JSON
// escapes cannot be spelled with plain characters, so they need no exclusion.
std::string SchemaConverter::other_key(const std::vector<std::string>& names, const std::string& hint) {
  if (names.empty()) return use("json-string");
  struct TrieNode {
    std::map<std::string, int> next;  // UTF-8 character -> node
    bool terminal = false;
  };
  std::vector<TrieNode> trie(1);
  for (const std::string& n : names) {
    if (std::any_of(n.begin(), n.end(),
                    [](char c) { return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20; }))
      continue;
    int at = 0;
    for (std::size_t i = 0; i < n.size();) {
      std::size_t len = 1;
      while (i + len < n.size() && (static_cast<unsigned char>(n[i + len]) & 0xC0) == 0x80) ++len;
      const std::string ch = n.substr(i, len);
      auto it = trie[static_cast<std::size_t>(at)].next.find(ch);
      if (it == trie[static_cast<std::size_t>(at)].next.end()) {
        trie.emplace_back();
        it = trie[static_cast<std::size_t>(at)].next.emplace(ch, static_cast<int>(trie.size() - 1)).first;
      }
      at = it->second;
      i += len;
    }
    trie[static_cast<std::size_t>(at)].terminal = true;
  }
  const std::string rest = add_rule(hint + "-other-rest", "[^\"\\\\\\x00-\\x1F]* \"\\\"\"");
  std::vector<std::string> rule(trie.size());
  for (std::size_t i = 0; i < trie.size(); ++i) rule[i] = rule_name(hint + "-other");
  for (std::size_t i = 0; i < trie.size(); ++i) {
    std::vector<std::string> alts;
    if (!trie[i].terminal) alts.push_back("\"\\\"\"");
    std::string cls = "[^\"\\\\\\x00-\\x1F";
    for (const auto& [ch, child] : trie[i].next) {
      alts.push_back(gbnf_literal(ch) + " " + rule[static_cast<std::size_t>(child)]);
      cls += ch == "]" || ch == "-" || ch == "^" ? "\\" + ch : ch;
    }
    alts.push_back(cls + "] " + rest);
    std::string body;
    for (std::size_t a = 0; a < alts.size(); ++a) body += (a ? " | " : "") + alts[a];
    rules_.emplace_back(rule[i], body);
  }
  return "\"\\\"\" " + rule[0];
}

}  // namespace ember::grammar
