// The index is read as a config (config_reader.h: size-bounded, one parse, no repeated key, so no tensor is
// listed twice), its names are checked before any file is opened, and the shards are checked against it and
// against each other as they are opened.
#include "pipeline/model_files/sharded_weights.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/json_text.h"

namespace rtvd {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kIndexMark = ".safetensors.index", kJson = ".json", kSafetensors = ".safetensors";

// The beginning of the shards' names, from the index's name: STEM.safetensors.index[.VARIANT].json gives
// STEM[.VARIANT] (STEM.fp16-00001-of-00002.safetensors); nothing for another name.
std::optional<std::string> shard_prefix(std::string_view index_name) {
  const size_t mark = index_name.rfind(kIndexMark);
  if (mark == std::string_view::npos || mark == 0 || !index_name.ends_with(kJson) ||
      mark + kIndexMark.size() + kJson.size() > index_name.size())
    return std::nullopt;
  const std::string_view variant =
      index_name.substr(mark + kIndexMark.size(), index_name.size() - kJson.size() - mark - kIndexMark.size());
  if (!variant.empty() && (variant.size() < 2 || variant[0] != '.')) return std::nullopt;
  return cat(index_name.substr(0, mark), variant);
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::ranges::all_of(s, [](char c) { return c >= '0' && c <= '9'; });
}

// PREFIX-00001-of-00002.safetensors: a shard of the index whose names begin with prefix.
bool is_shard_name(std::string_view name, std::string_view prefix) {
  if (name.size() < prefix.size() + kSafetensors.size() || !name.starts_with(prefix) || !name.ends_with(kSafetensors))
    return false;
  const std::string_view number = name.substr(prefix.size(), name.size() - prefix.size() - kSafetensors.size());
  const size_t of = number.find("-of-");
  return number.starts_with('-') && of != std::string_view::npos && all_digits(number.substr(1, of - 1)) &&
         all_digits(number.substr(of + 4));
}

// A file of the index's own folder: no directory part (neither "../x" nor "/x"), printable ASCII (safe in a
// message as it is), a .safetensors name.
bool is_plain_shard_name(std::string_view name) {
  return name.size() > kSafetensors.size() && name.ends_with(kSafetensors) &&
         std::ranges::all_of(name, [](char c) { return c >= 0x20 && c < 0x7f && c != '/' && c != '\\'; });
}

// The index's weight_map: tensor name -> shard file name.
std::map<std::string, std::string> read_weight_map(const std::string& index_path) {
  const json root = parse_config_object(read_config_file(index_path), index_path);
  const ConfigReader r(root, index_path);
  constexpr std::array<std::string_view, 1> kRead = {"weight_map"};
  constexpr std::array<std::string_view, 1> kIgnored = {"metadata"};  // total_size and the like: nothing rtvd uses
  r.reject_unknown_keys(kRead, kIgnored);
  if (r.has("metadata") && !root["metadata"].is_object()) r.fail_key("metadata", "an object", describe_json(root["metadata"]));
  const char* expected = "an object of tensor names and their shards' file names";
  const json& map = r.required("weight_map", expected);
  if (!map.is_object() || map.empty()) r.fail_key("weight_map", expected, describe_json(map));
  std::map<std::string, std::string> weight_map;
  for (const auto& [tensor, file] : map.items()) {
    if (!file.is_string() || !is_plain_shard_name(file.get_ref<const std::string&>()))
      fail(index_path, ": key 'weight_map': tensor ", quote(tensor), ": expected the name of a .safetensors file "
           "in this folder, got ", file.is_string() ? quote(file.get_ref<const std::string&>()) : describe_json(file));
    weight_map.emplace(tensor, file.get<std::string>());
  }
  return weight_map;
}

}  // namespace

std::string shard_index_name(const std::string& stem, const std::string& variant) {
  return cat(stem, kIndexMark, variant.empty() ? "" : "." + variant, kJson);
}

bool is_shard_index(const std::string& path) { return shard_prefix(fs::path(path).filename().string()).has_value(); }

TensorSet open_sharded_weights(const std::string& index_path) {
  const fs::path index(index_path);
  const std::string index_name = index.filename().string();
  const fs::path folder = index.has_parent_path() ? index.parent_path() : fs::path(".");
  const std::optional<std::string> prefix = shard_prefix(index_name);
  if (!prefix) fail(index_path, ": expected a shard index, named STEM.safetensors.index.json");
  const std::map<std::string, std::string> weight_map = read_weight_map(index_path);

  // The shards the index lists (sorted by name: in their order) are those of the folder.
  std::set<std::string> listed;
  for (const auto& [tensor, file] : weight_map) listed.insert(file);
  for (const std::string& file : listed) {
    std::error_code ignored;  // a file that is there but cannot be read is SafeTensorsFile::open's to name
    if (fs::status(folder / file, ignored).type() == fs::file_type::not_found)
      fail((folder / file).string(), ": missing (a shard that the index ", index_name, " lists)");
  }
  std::set<std::string> unlisted;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
    if (const std::string name = it->path().filename().string(); is_shard_name(name, *prefix) && !listed.contains(name))
      unlisted.insert(name);
  if (ec) fail(folder.string(), ": cannot list the folder: ", ec.message());
  if (!unlisted.empty())
    fail((folder / *unlisted.begin()).string(), ": a shard that the index ", index_name, " does not list");

  TensorSet set(index_path);
  std::map<std::string, std::string, std::less<>> shard_of;  // each tensor's shard, as found
  for (const std::string& file : listed) {
    const std::string path = (folder / file).string();
    SafeTensorsFile shard = SafeTensorsFile::open(path);
    for (const TensorView& t : shard.tensors()) {
      const std::string name = quote(t.name);
      if (const auto it = shard_of.find(t.name); it != shard_of.end())
        fail(path, ": tensor ", name, " is also in ", it->second, " (expected each tensor in one shard)");
      const auto mapped = weight_map.find(t.name);
      if (mapped == weight_map.end()) fail(path, ": tensor ", name, " is not in the weight_map of ", index_name);
      if (mapped->second != file) fail(path, ": tensor ", name, ": the index ", index_name, " maps it to ", mapped->second);
      shard_of.emplace(t.name, file);
    }
    set.add_all(TensorSet(std::move(shard)));
  }
  for (const auto& [tensor, file] : weight_map)
    if (!shard_of.contains(tensor))
      fail(index_path, ": tensor ", quote(tensor), " is mapped to ", file, ", which does not hold it");
  return set;
}

}  // namespace rtvd
