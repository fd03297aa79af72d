#include "grammar/schema_overlap.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace ember::grammar {
namespace {

using Type = JsonValue::Type;

// A value a const or enum allows: its JSON type name and its text (numbers compare by value).
struct Value {
  std::string type;  // "null", "boolean", "number", "string", "array", "object"
  std::string text;
};

bool same_value(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  if (a.type == "array" || a.type == "object") return true;  // member order may differ: assume equal
  if (a.type == "number") return std::strtod(a.text.c_str(), nullptr) == std::strtod(b.text.c_str(), nullptr);
  return a.text == b.text;
}

Value value_of(const JsonValue& v) {
  static const char* names[] = {"null", "boolean", "number", "string", "array", "object"};
  return {names[static_cast<int>(v.type)], v.type == Type::number ? v.text : v.dump()};
}

// What is known about the values a schema accepts.
struct Shape {
  bool any_type = true;                              // nothing known about the type
  std::set<std::string> types;                       // when !any_type: the JSON Schema type names allowed
  std::optional<std::vector<Value>> values;          // const / enum: exactly these
  std::map<std::string, std::vector<Value>> tags;    // object: required property -> its values
  std::map<std::string, const JsonValue*> required;  // object: required property -> its schema (or null)
  bool closed = false;                               // object: no names but `names` (additionalProperties false)
  std::set<std::string> names;                       // object: its listed properties
  bool objects_only() const { return !any_type && types.size() == 1 && *types.begin() == "object"; }
};

bool types_meet(const std::string& a, const std::string& b) {
  const auto numeric = [](const std::string& t) { return t == "number" || t == "integer"; };
  return a == b || (numeric(a) && numeric(b));
}

bool value_has_type(const Value& v, const Shape& s) {
  if (s.any_type) return true;
  return std::any_of(s.types.begin(), s.types.end(), [&](const std::string& t) {
    return types_meet(v.type, t == "integer" ? "number" : t);  // 1.0 is an integer too
  });
}

bool disjoint_values(const std::vector<Value>& a, const std::vector<Value>& b) {
  for (const Value& x : a)
    for (const Value& y : b)
      if (same_value(x, y)) return false;
  return true;
}

std::optional<std::vector<Value>> listed_values(const JsonValue& s) {
  if (s.type != Type::object) return std::nullopt;
  if (const JsonValue* c = s.find("const")) return std::vector<Value>{value_of(*c)};
  if (const JsonValue* e = s.find("enum"); e && e->type == Type::array) {
    std::vector<Value> out;
    for (const JsonValue& v : e->items) out.push_back(value_of(v));
    return out;
  }
  return std::nullopt;
}

Shape shape_of(const JsonValue& s, const JsonValue& root, int depth) {
  Shape out;
  if (depth > 16 || s.type != Type::object) return out;  // true, or too deep to follow
  if (const JsonValue* ref = s.find("$ref"); ref && ref->type == Type::string) {
    const JsonValue* target = resolve_pointer(root, ref->text);
    return target ? shape_of(*target, root, depth + 1) : out;
  }
  out.values = listed_values(s);
  if (const JsonValue* t = s.find("type")) {
    out.any_type = false;
    if (t->type == Type::string) out.types.insert(t->text);
    for (const JsonValue& v : t->items)
      if (v.type == Type::string) out.types.insert(v.text);
  } else if (out.values) {
    out.any_type = false;
    for (const Value& v : *out.values) out.types.insert(v.type);
  } else if (s.find("properties") || s.find("required") || s.find("additionalProperties")) {
    out.any_type = false;
    out.types.insert("object");
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    const JsonValue* list = s.find(key);
    if (!list || list->type != Type::array || list->items.empty()) continue;
    // A union: its types and values are the branches' together, when every branch knows them.
    Shape u;
    u.any_type = false;
    bool all_values = true;
    std::vector<Value> values;
    for (const JsonValue& branch : list->items) {
      const Shape b = shape_of(branch, root, depth + 1);
      u.any_type |= b.any_type;
      u.types.insert(b.types.begin(), b.types.end());
      if (b.values)
        values.insert(values.end(), b.values->begin(), b.values->end());
      else
        all_values = false;
    }
    if (all_values) u.values = values;
    return u;
  }
  const JsonValue* required = s.find("required");
  const JsonValue* properties = s.find("properties");
  if (required && properties && required->type == Type::array)
    for (const JsonValue& name : required->items)
      if (const JsonValue* p = name.type == Type::string ? properties->find(name.text) : nullptr)
        if (auto v = listed_values(*p)) out.tags[name.text] = *v;
  if (required && required->type == Type::array)
    for (const JsonValue& name : required->items)
      if (name.type == Type::string)
        out.required[name.text] =
            properties && properties->type == Type::object ? properties->find(name.text) : nullptr;
  const JsonValue* additional = s.find("additionalProperties");
  out.closed = additional && additional->type == Type::boolean && !additional->boolean && !s.find("patternProperties");
  if (properties && properties->type == Type::object)
    for (const auto& [name, _] : properties->members) out.names.insert(name);
  return out;
}

}  // namespace

const JsonValue* resolve_pointer(const JsonValue& root, std::string_view ref, std::string* last) {
  if (last) last->clear();
  if (ref.empty() || ref[0] != '#') return nullptr;
  const std::string_view p = ref.substr(1);
  if (!p.empty() && p[0] != '/') return nullptr;
  const JsonValue* target = &root;
  for (std::size_t i = 1; i <= p.size() && !p.empty();) {
    std::size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    std::string token;
    for (std::size_t k = i; k < j; ++k) {
      if (p[k] == '~' && k + 1 < j && (p[k + 1] == '0' || p[k + 1] == '1')) {
        token += p[k + 1] == '0' ? '~' : '/';
        ++k;
      } else {
        token += p[k];
      }
    }
    if (target->type == Type::object) {
      target = target->find(token);
    } else if (target->type == Type::array) {
      std::size_t idx = 0;
      const auto r = std::from_chars(token.data(), token.data() + token.size(), idx);
      target = r.ec == std::errc() && idx < target->items.size() ? &target->items[idx] : nullptr;
    } else {
      target = nullptr;
    }
    if (!target) return nullptr;
    if (last) *last = token;
    i = j + 1;
  }
  return target;
}

namespace {

bool overlap(const JsonValue& a, const JsonValue& b, const JsonValue& root, int depth);

// Two object shapes no object satisfies both of: one requires a name the other, closed, does not
// list, or both require a name whose schemas cannot meet.
bool objects_disjoint(const Shape& x, const Shape& y, const JsonValue& root, int depth) {
  if (!x.objects_only() && !y.objects_only()) return false;  // a non-object might pass both
  for (const auto& [name, _] : x.required)
    if (y.closed && !y.names.count(name)) return true;
  for (const auto& [name, _] : y.required)
    if (x.closed && !x.names.count(name)) return true;
  for (const auto& [name, schema] : x.required) {
    const auto it = y.required.find(name);
    if (it != y.required.end() && schema && it->second && !overlap(*schema, *it->second, root, depth + 1)) return true;
  }
  return false;
}

bool overlap(const JsonValue& a, const JsonValue& b, const JsonValue& root, int depth) {
  if (depth > 8) return true;  // too deep to tell (a recursive schema): may overlap
  const Shape x = shape_of(a, root, 0), y = shape_of(b, root, 0);
  if (x.values && y.values) return !disjoint_values(*x.values, *y.values);
  if (x.values &&
      std::none_of(x.values->begin(), x.values->end(), [&](const Value& v) { return value_has_type(v, y); }))
    return false;
  if (y.values &&
      std::none_of(y.values->begin(), y.values->end(), [&](const Value& v) { return value_has_type(v, x); }))
    return false;
  if (!x.any_type && !y.any_type) {
    bool meet = false;
    for (const std::string& s : x.types)
      for (const std::string& t : y.types) meet |= types_meet(s, t);
    if (!meet) return false;
  }
  for (const auto& [name, values] : x.tags)
    if (const auto it = y.tags.find(name); it != y.tags.end() && disjoint_values(values, it->second)) return false;
  return !objects_disjoint(x, y, root, depth);
}

}  // namespace

bool may_overlap(const JsonValue& a, const JsonValue& b, const JsonValue& root) { return overlap(a, b, root, 0); }

namespace {

// The names of a branch that says nothing but `required` (and type object, annotations).
std::optional<std::set<std::string>> required_only(const JsonValue& branch) {
  if (branch.type != Type::object) return std::nullopt;
  std::optional<std::set<std::string>> names;
  for (const auto& [key, value] : branch.members) {
    if (key == "required" && value.type == Type::array) {
      names.emplace();
      for (const JsonValue& n : value.items) {
        if (n.type != Type::string) return std::nullopt;
        names->insert(n.text);
      }
    } else if (key == "type") {
      if (value.type != Type::string || value.text != "object") return std::nullopt;
    } else if (key != "description" && key != "title" && key != "$comment" && key != "markdownDescription" &&
               key != "errorMessage" && key.rfind("x-", 0) != 0) {
      return std::nullopt;
    }
  }
  return names;
}

}  // namespace

std::optional<JsonValue> exclusive_required(const JsonValue& one_of) {
  if (one_of.type != Type::array || one_of.items.size() < 2) return std::nullopt;
  std::vector<std::set<std::string>> sets;
  for (const JsonValue& branch : one_of.items) {
    auto names = required_only(branch);
    if (!names) return std::nullopt;
    sets.push_back(std::move(*names));
  }
  JsonValue out;
  out.type = Type::array;
  for (std::size_t i = 0; i < sets.size(); ++i) {
    std::set<std::string> absent;
    bool subsumed = false;
    for (std::size_t j = 0; j < sets.size() && !subsumed; ++j) {
      if (j == i) continue;
      std::set<std::string> extra;
      std::set_difference(sets[j].begin(), sets[j].end(), sets[i].begin(), sets[i].end(),
                          std::inserter(extra, extra.end()));
      subsumed = extra.empty();  // every object branch i accepts, branch j accepts too
      absent.insert(extra.begin(), extra.end());
    }
    if (subsumed) {
      out.items.push_back(json_bool(false));
      continue;
    }
    JsonValue b, type, required, properties;
    b.type = properties.type = Type::object;
    type.type = Type::string;
    type.text = "object";
    required.type = Type::array;
    for (const std::string& n : sets[i]) {
      JsonValue name;
      name.type = Type::string;
      name.text = n;
      required.items.push_back(std::move(name));
    }
    for (const std::string& n : absent) properties.members.push_back({n, json_bool(false)});
    b.members.push_back({"type", std::move(type)});
    b.members.push_back({"required", std::move(required)});
    b.members.push_back({"properties", std::move(properties)});
    out.items.push_back(std::move(b));
  }
  return out;
}

}  // namespace ember::grammar
