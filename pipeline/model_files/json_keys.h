// nlohmann::json keeps only the last of duplicate object keys. Passed as the parse callback, this records
// the first duplicate (at any depth) so the caller can reject the document once parsing is done.
#pragma once
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rtvd {

struct DuplicateKeyFinder {
  std::vector<std::set<std::string>> open_objects;
  std::string top_level_key;  // the top-level entry being parsed
  bool found = false;
  std::string duplicate;      // the first repeated key
  std::string duplicate_in;   // its top-level entry, or empty when the repeated key is top-level itself

  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      open_objects.emplace_back();
    } else if (event == E::object_end) {
      open_objects.pop_back();
    } else if (event == E::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      const bool fresh = open_objects.back().insert(key).second;
      if (open_objects.size() == 1) top_level_key = key;
      if (!fresh && !found) {
        found = true;
        duplicate = key;
        if (open_objects.size() > 1) duplicate_in = top_level_key;
      }
    }
    return true;
  }
};

}  // namespace rtvd
