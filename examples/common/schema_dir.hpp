// A folder of JSON Schema documents as an ember::SchemaResolver (EngineOptions::schema_resolver):
// what ember-server --schema-dir and ember-schema-compile --schema-dir give the schema compiler
// for remote $refs. ember itself never fetches a document; this reads only the folder.
//
// A URI is looked up, in this order, as
//   * the folder's copy of its URL: https://HOST/PATH is DIR/HOST/PATH (or PATH.json);
//   * the `$id` (draft-04: `id`, without fragment) of a *.json file under DIR, when exactly one
//     file claims it (some schemas carry a copy of a meta-schema's id);
//   * for a relative URI (a schema without `$id`) or a SchemaStore URL
//     (https://json.schemastore.org/NAME.json and its older host), a file named by its last
//     path segment, with or without ".json", anywhere under DIR (the first in path order).
#pragma once

#include <ember/ember.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace ember_examples {

inline std::optional<std::string> read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Throws std::filesystem::filesystem_error when `dir` cannot be read.
inline ember::SchemaResolver schema_dir_resolver(const std::filesystem::path& dir) {
  struct Index {
    std::filesystem::path dir;
    std::map<std::string, std::filesystem::path> by_id, by_name;
    std::map<std::string, int> id_claims;
  };
  auto index = std::make_shared<Index>();
  index->dir = dir;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const std::filesystem::path& file : files) {
    index->by_name.emplace(file.filename().string(), file);
    const nlohmann::json doc = nlohmann::json::parse(read_text_file(file).value_or(""), nullptr, false);
    if (!doc.is_object()) continue;
    for (const char* key : {"$id", "id"}) {
      const auto id = doc.find(key);
      if (id == doc.end() || !id->is_string()) continue;
      const std::string uri = id->get<std::string>().substr(0, id->get<std::string>().find('#'));
      if (!uri.empty() && ++index->id_claims[uri] == 1) index->by_id.emplace(uri, file);
      break;
    }
  }
  return [index](const std::string& uri) -> std::optional<std::string> {
    const std::size_t scheme = uri.find("://");
    if (scheme != std::string::npos) {
      const std::string rest = uri.substr(scheme + 3);
      if (rest.find("..") == std::string::npos)
        for (const std::string& file : {rest, rest + ".json"})
          if (std::filesystem::is_regular_file(index->dir / file)) return read_text_file(index->dir / file);
    }
    if (const auto it = index->by_id.find(uri); it != index->by_id.end() && index->id_claims[uri] == 1)
      return read_text_file(it->second);
    const bool schemastore = uri.rfind("https://json.schemastore.org/", 0) == 0 ||
                             uri.rfind("https://schemastore.azurewebsites.net/", 0) == 0;
    if (scheme != std::string::npos && !schemastore) return std::nullopt;
    const std::string name = uri.substr(uri.find_last_of('/') + 1);
    for (const std::string& file : {name, name + ".json"})
      if (const auto it = index->by_name.find(file); !name.empty() && it != index->by_name.end())
        return read_text_file(it->second);
    return std::nullopt;
  };
}

}  // namespace ember_examples
