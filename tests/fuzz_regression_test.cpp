// Every input a fuzzer found to crash, hang or exhaust memory (tests/data/fuzz/<parser>/, docs/fuzzing.md),
// through the fuzzer's own entry point (tests/fuzz/fuzz_targets.h): each must parse, or fail with an
// rtvd::Error. Each input runs in a child process under the fuzzers' limits, so that a crash fails its own
// case and the other inputs still run:
// - memory: 512 MiB more address space than the child starts with (the fuzzers stop at a 256 MiB allocation;
//   no input of fuzzing size needs more), except under ASan, whose shadow memory such a limit would break;
// - time: 60 s of CPU (the fuzzers call 10 s a hang);
// - stack: the entry point runs on a thread with a 1 MiB stack, an eighth of the main thread's, so that a
//   recursion whose depth the input sets overflows on inputs of fuzzing size (64 KiB) in a release build as
//   it does under ASan's larger frames, instead of only on larger inputs.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "support/test_util.h"
#include "tests/fuzz/fuzz_targets.h"

#if defined(__SANITIZE_ADDRESS__)
#define RTVD_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RTVD_TEST_ASAN 1
#endif
#endif
#ifndef RTVD_TEST_ASAN
#define RTVD_TEST_ASAN 0
#endif

namespace rtvd {
namespace {

namespace fs = std::filesystem;

using Entry = void (*)(std::span<const uint8_t>);

// How the child ends: its exit status, or a crash by signal.
enum Outcome { kParsed = 0, kRejected = 1, kOtherException = 2 };

struct Job {
  Entry entry;
  std::span<const uint8_t> bytes;
  int outcome = kOtherException;
};

void* run_entry(void* arg) {
  auto* job = static_cast<Job*>(arg);
  try {
    job->entry(job->bytes);
    job->outcome = kParsed;
  } catch (const Error&) {
    job->outcome = kRejected;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uncaught exception, not an rtvd::Error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "uncaught exception of unknown type\n");
  }
  return nullptr;
}

size_t address_space_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  statm >> pages;
  return pages * size_t(sysconf(_SC_PAGESIZE));
}

[[noreturn]] void child(Entry entry, std::span<const uint8_t> bytes) {
  if (!RTVD_TEST_ASAN) {
    const rlimit memory{address_space_bytes() + (size_t(512) << 20), RLIM_INFINITY};
    setrlimit(RLIMIT_AS, &memory);
  }
  const rlimit cpu{60, 61};
  setrlimit(RLIMIT_CPU, &cpu);
  Job job{entry, bytes};
  pthread_attr_t attr;
  pthread_t thread;
  if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, size_t(1) << 20) != 0 ||
      pthread_create(&thread, &attr, run_entry, &job) != 0 || pthread_join(thread, nullptr) != 0) {
    std::fprintf(stderr, "cannot start the parsing thread\n");
    _exit(kOtherException);
  }
  std::fflush(stderr);
  _exit(job.outcome);
}

// "" when the input parsed or was rejected with an rtvd::Error, else what happened instead.
std::string replay(Entry entry, const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return std::string("fork failed: ") + std::strerror(errno);
  if (pid == 0) child(entry, bytes);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return std::string("waitpid failed: ") + std::strerror(errno);
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  if (WEXITSTATUS(status) == kParsed || WEXITSTATUS(status) == kRejected) return "";
  return WEXITSTATUS(status) == kOtherException ? "an exception other than rtvd::Error"
                                                 : "exit status " + std::to_string(WEXITSTATUS(status));
}

void replay_all(const std::string& parser, Entry entry) {
  const fs::path dir = test::test_data("fuzz/" + parser);
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no regression inputs in " << dir;
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    EXPECT_EQ(replay(entry, file), "") << "replay: tools/fuzz.sh run " << parser << "_fuzzer " << file.string();
  }
}

TEST(FuzzRegression, Safetensors) { replay_all("safetensors", fuzz::safetensors); }
TEST(FuzzRegression, ModelConfig) { replay_all("model_config", fuzz::model_config); }
TEST(FuzzRegression, Png) { replay_all("png", fuzz::png); }
TEST(FuzzRegression, ClipTokenizer) { replay_all("clip_tokenizer", fuzz::clip_tokenizer); }
TEST(FuzzRegression, Lora) { replay_all("lora", fuzz::lora); }
TEST(FuzzRegression, SingleFile) { replay_all("single_file", fuzz::single_file); }
TEST(FuzzRegression, ControlNetSingleFile) { replay_all("single_file", fuzz::controlnet_single_file); }

}  // namespace
}  // namespace rtvd
