#include "llama_cpp_bench.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "core/json.h"

extern char** environ;

namespace rag::cli {

Result<double> runLlamaBench(const std::filesystem::path& binary, const std::filesystem::path& gguf,
                             const LlamaBenchRun& run) {
  if ((run.prompt > 0) == (run.generate > 0)) return Status::invalidArgument("llama-bench: give a prompt or a generation length, not both");
  const std::string name = "llama-bench (" + binary.string() + ")";
  std::vector<std::string> argv = {binary.string(), "-m", gguf.string(), "-p", std::to_string(run.prompt),
                                   "-n", std::to_string(run.generate), "-t", std::to_string(run.threads),
                                   "-r", std::to_string(run.repetitions), "-o", "json"};
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::ioError(name + ": cannot make a pipe: " + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    return Status::notFound(name + " cannot be started: " + std::strerror(rc) +
                            "; pass the llama-bench binary of a llama.cpp build (cmake --build build --target llama-bench)");
  }
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Status::unavailable(name + " failed (exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                               ") on " + gguf.string() + "; run it by hand to see why");
  Result<JsonValue> doc = parseJson(text);
  const JsonValue* ts = doc && doc->isArray() && doc->size() == 1 ? doc->asArray()[0].find("avg_ts") : nullptr;
  if (!ts || !ts->isNumber()) return Status::corrupt(name + " printed no one-test JSON with avg_ts; is it llama.cpp's llama-bench?");
  return ts->asDouble();
}

}  // namespace rag::cli
