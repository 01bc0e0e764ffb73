// parse_json, the one parser of the JSON rtvd does not write: it builds the value nlohmann's own parser
// builds, finds a repeated key at every depth, counts values up to exactly kMaxJsonValues, and refuses
// anything but white space after the value.
#include "pipeline/model_files/json_text.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

using nlohmann::json;
using test::error_of;

// A random value of every JSON type, nested at most `depth` levels deeper.
json random_value(test::Rng& rng, int depth) {
  const int kind = rng.integer(0, depth > 0 ? 8 : 6);
  switch (kind) {
    case 0: return nullptr;
    case 1: return rng.integer(0, 1) == 1;
    case 2: return rng.integer(-1'000'000, 1'000'000);
    case 3: return uint64_t(rng.integer(0, (1 << 30) - 1)) << 34;  // past int64_t's range half the time
    case 4: return double(rng.uniform(-1e6f, 1e6f));
    case 5: {
      constexpr const char* kPieces[] = {"a", "\"", "\\", "\n", "\x01", "\xc3\xa9", "\xf0\x9d\x84\x9e"};
      std::string text;
      for (int i = rng.integer(0, 3); i > 0; --i) text += kPieces[rng.integer(0, 6)];
      return text;
    }
    case 6: return cat("k", rng.integer(0, 9));
    case 7: {
      json a = json::array();
      for (int i = rng.integer(0, 4); i > 0; --i) a.push_back(random_value(rng, depth - 1));
      return a;
    }
    default: {
      json o = json::object();
      for (int i = rng.integer(0, 4); i > 0; --i) o[cat("k", rng.integer(0, 9))] = random_value(rng, depth - 1);
      return o;
    }
  }
}

TEST(JsonText, BuildsTheValueNlohmannBuilds) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (int i = 0; i < 300; ++i) {
    const std::string text = random_value(rng, 6).dump(rng.integer(0, 1) ? 2 : -1);
    SCOPED_TRACE(text);
    EXPECT_EQ(parse_json(text, "t.json"), json::parse(text));
  }
}

// `depth` objects, each inside the one before under a random key: each holds `repeated` once, and beside the
// next level an object that holds it too; the innermost holds it twice, or (no_repeat) once beside another key.
std::string nested_objects(test::Rng& rng, int depth, const std::string& repeated, bool no_repeat,
                           std::string& top_level_key) {
  std::string inner = cat("{\"", repeated, "\":1,\"", no_repeat ? "other" : repeated, "\":2}");
  for (int level = depth - 1; level > 0; --level) {
    top_level_key = cat("level", level, "_", rng.integer(0, 1000));
    inner = cat("{\"", repeated, "\":0,\"x\":{\"", repeated, "\":3},\"", top_level_key, "\":", inner, ",\"after\":4}");
  }
  return inner;
}

TEST(JsonText, RepeatedKeysAreFoundAtEveryDepth) {
  test::Rng rng;
  SCOPED_TRACE(test::seed_trace(rng));
  for (int depth = 1; depth <= kMaxJsonDepth; ++depth) {
    SCOPED_TRACE(cat("depth ", depth));
    const std::string key = cat("key", rng.integer(0, 1'000'000));
    std::string top_level_key;
    const std::string text = nested_objects(rng, depth, key, false, top_level_key);
    DuplicateKeyFinder found;
    parse_json(text, "t.json", &found);
    EXPECT_TRUE(found.found);
    EXPECT_EQ(found.duplicate, key);
    EXPECT_EQ(found.duplicate_in, depth == 1 ? "" : top_level_key);

    // The same key in different objects, at every level, is no repeat.
    const std::string distinct = nested_objects(rng, depth, key, true, top_level_key);
    DuplicateKeyFinder none;
    EXPECT_EQ(parse_json(distinct, "t.json", &none), json::parse(distinct));
    EXPECT_FALSE(none.found) << none.duplicate;
  }
}

// As many values as allowed (an array and its numbers), and one more. (An object of objects, the shape that
// nlohmann's callback parser took quadratic time on, is counted alike: safetensors_test's million tensors.)
TEST(JsonText, ValuesAreCountedUpToTheBound) {
  const auto array_of = [](size_t values) {
    std::string text = "[0";
    for (size_t i = 2; i < values; ++i) text += ",0";
    return text + "]";
  };
  EXPECT_EQ(parse_json(array_of(kMaxJsonValues), "t.json").size(), kMaxJsonValues - 1);
  EXPECT_EQ(error_of([&] { parse_json(array_of(kMaxJsonValues + 1), "t.json"); }),
            cat("t.json: more than ", kMaxJsonValues, " JSON values, expected at most ", kMaxJsonValues,
                " (a model file's JSON holds up to about 200000)"));
}

// nlohmann takes a NUL byte for the end of its input, so it read "{}\0{...}" as "{}".
TEST(JsonText, NothingButWhiteSpaceAfterTheValue) {
  using namespace std::string_literals;
  for (const std::string& text : {"{}"s, " {\"a\":[1]} \t\r\n"s, "[]\n"s})
    EXPECT_NO_THROW(parse_json(text, "t.json")) << text;
  EXPECT_EQ(error_of([] { parse_json("{}\0{\"garbage\":1}"s, "t.json"); }), "t.json: not valid JSON: a NUL byte at byte 2");
  EXPECT_EQ(error_of([] { parse_json("{\"a\":1}  \0"s, "t.json"); }), "t.json: not valid JSON: a NUL byte at byte 9");
  EXPECT_EQ(error_of([] { parse_json("\0"s, "t.json"); }), "t.json: not valid JSON: a NUL byte at byte 0");
  for (const std::string& text : {"{} x"s, "{}{}"s, "[1] 2"s, "{\"a\":1}}"s}) {
    const std::string message = error_of([&] { parse_json(text, "t.json"); });
    EXPECT_EQ(message.rfind("t.json: not valid JSON: ", 0), 0u) << text << ": " << message;
  }
}

}  // namespace
}  // namespace rtvd
