// Runs this test binary again as a child process with only some tests and extra environment
// variables: for what only a fresh process shows (what it reads from a disk cache, what it
// leaves there at exit).
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace vkg::test {

// The child's exit status, or -1 if it could not be started or did not exit normally. Its output
// goes to `log` (a file) when one is named, else to this process's. With `timeout_s`, a child
// still running after that many seconds is killed (-1): a hang fails the test, not the suite.
inline int run_child(const std::string& gtest_filter, const std::vector<std::string>& extra_env,
                     const std::string& log = {}, int timeout_s = 0) {
  // An inherited variable that extra_env also names is left out: getenv returns the first match,
  // so a child given "DEBUG=3" would otherwise still read the parent's DEBUG=1.
  const auto named_in_extra = [&extra_env](std::string_view var) {
    const std::string_view name = var.substr(0, var.find('='));
    for (const std::string& x : extra_env)
      if (std::string_view(x).substr(0, x.find('=')) == name) return true;
    return false;
  };
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    // A sharded run (GTEST_TOTAL_SHARDS) would hand the child's one test to another shard.
    const std::string_view var(*e);
    if (var.starts_with("GTEST_SHARD_INDEX=") || var.starts_with("GTEST_TOTAL_SHARDS=")) continue;
    if (named_in_extra(var)) continue;
    env_strings.emplace_back(var);
  }
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=" + gtest_filter;
  char* argv[] = {exe.data(), filter.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!log.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  for (int waited_ms = 0; timeout_s > 0; waited_ms += 10) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (done < 0) return -1;
    if (waited_ms >= timeout_s * 1000) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(10000);
  }
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace vkg::test
