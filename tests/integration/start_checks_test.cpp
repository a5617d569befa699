// What a node opens on its host, checked before it starts (config/node_files.h): its spool
// directory and its sinks' files. `hoprelay validate --node N` (on its host, ahead) and
// hoprelayd at start refuse the same, with FILE:LINE:COL and what to do, and exit 78
// (EX_CONFIG), which the unit's RestartPreventExitStatus does not restart: a restart cures none
// of these. The tests run as root in CI, for whom every directory is writable: the paths are
// made unusable by a regular file where a directory must be, which stops root too.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "harness.h"

namespace hoprelay::test {
namespace {

class StartChecks : public ::testing::Test {
 protected:
  // A two-node chain a -> b; `a_keys` are more keys of node a.
  std::string topology(const std::string& a_keys) {
    write_file(dir_ / "t.toml",
               "[pipeline]\nname = \"v\"\ntransport = \"tcp\"\n[nodes.a]\nlisten = \"127.0.0.1:" +
                   std::to_string(free_port()) + "\"\ndownstream = [\"b\"]\n" + a_keys +
                   "[nodes.b]\nlisten = \"127.0.0.1:" + std::to_string(free_port()) + "\"\n");
    return (dir_ / "t.toml").string();
  }
  RunResult validate_a() {
    return run({HOPRELAY_BIN, "validate", (dir_ / "t.toml").string(), "--node", "a"});
  }
  std::pair<int, std::string> start_a(const std::string& log) {
    Process proc({HOPRELAYD_BIN, "--topology", (dir_ / "t.toml").string(), "--node", "a"},
                 dir_ / log);
    const int code = proc.wait(10s);
    return {code, proc.output()};
  }
  // Both refuse node a with `what` at `where` (LINE:COL of t.toml).
  void expect_refused(const std::string& where, const std::string& what) {
    RunResult v = validate_a();
    EXPECT_EQ(v.code, 78) << v.output;
    const std::string at = (dir_ / "t.toml").string() + ":" + where + ": error: ";
    EXPECT_NE(v.output.find(at + what), std::string::npos) << v.output;
    auto [code, log] = start_a("a.log");
    EXPECT_EQ(code, 78) << log;
    EXPECT_NE(log.find(what), std::string::npos) << log;
  }
  TempDir dir_;
};

TEST_F(StartChecks, ASpoolDirThatCannotBeCreatedRefusesTheNodeAhead) {
  write_file(dir_ / "plain", "a file, not a directory\n");
  const std::string spool = (dir_ / "plain" / "spool").string();
  topology("spool_dir = \"" + spool + "\"\n");
  expect_refused("7:13", "nodes.a.spool_dir " + spool + " cannot be created: " +
                             (dir_ / "plain").string() + " is not a directory");
  // The whole file, without --node, does not look at any host's directories.
  RunResult all = run({HOPRELAY_BIN, "validate", (dir_ / "t.toml").string()});
  EXPECT_EQ(all.code, 0) << all.output;
  // Where it can be: the node starts.
  topology("spool_dir = \"" + (dir_ / "spool").string() + "\"\n");
  RunResult ok = validate_a();
  EXPECT_EQ(ok.code, 0) << ok.output;
}

TEST_F(StartChecks, ASinkWhoseFileCannotBeWrittenRefusesTheNodeAhead) {
  write_file(dir_ / "plain", "a file, not a directory\n");
  const std::string under_file = (dir_ / "plain" / "copies" / "copy.rec").string();
  topology("stage = { plugin = \"file-sink\", path = \"" + under_file + "\" }\n");
  expect_refused("7:9", "nodes.a.stage (file-sink) path " + under_file + ": its directory " +
                            (dir_ / "plain" / "copies").string() + " cannot be created: " +
                            (dir_ / "plain").string() + " is not a directory");
  fs::create_directories(dir_ / "report.json");
  const std::string report = (dir_ / "report.json").string();
  topology("stage = { plugin = \"verify-sink\", report = \"" + report + "\" }\n");
  expect_refused("7:9", "nodes.a.stage (verify-sink) report " + report +
                            " is a directory: give the path of a file in it");
  // A directory not made yet (a unit's StateDirectory is made at its start) is no refusal.
  topology("stage = { plugin = \"file-sink\", path = \"" + (dir_ / "state" / "copy.rec").string() +
           "\" }\n");
  RunResult ok = validate_a();
  EXPECT_EQ(ok.code, 0) << ok.output;
}

}  // namespace
}  // namespace hoprelay::test
