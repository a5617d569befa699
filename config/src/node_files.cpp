// A node's own files, checked before it opens them (node_files.h).
#include "hoprelay/config/node_files.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace hoprelay::config {

namespace {

namespace fs = std::filesystem;

// "uid 999 (hoprelay)": who the check ran as, which is who the node runs as under its unit
// (run `hoprelay validate --node` as that user, as the daemon runs as the unit's User=).
std::string who() {
  const uid_t uid = ::geteuid();
  std::string text = "uid " + std::to_string(uid);
  if (const passwd* pw = ::getpwuid(uid)) text += std::string(" (") + pw->pw_name + ")";
  return text;
}

std::string owner_hint(const std::string& dir) {
  const passwd* pw = ::getpwuid(::geteuid());
  const std::string user = pw ? pw->pw_name : std::to_string(::geteuid());
  return "create it for the node's user: `install -d -o " + user + " -m 750 " + dir + "`";
}

// The nearest ancestor of `path` (or `path` itself) that exists.
fs::path existing_ancestor(fs::path path) {
  path = fs::absolute(path).lexically_normal();
  std::error_code ec;
  while (!fs::exists(path, ec) && path.has_parent_path() && path != path.parent_path()) {
    path = path.parent_path();
  }
  return path;
}

// A stage parameter's value, or "" without it.
std::string param(const StageSpec& stage, const std::string& key) {
  for (const auto& [k, v] : stage.params) {
    if (k == key) return v;
  }
  return "";
}

}  // namespace

std::string directory_refusal(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (fs::exists(path, ec)) {
    if (!fs::is_directory(path, ec)) {
      return what + " " + path + " is not a directory: give a directory, or remove the file";
    }
    if (::access(path.c_str(), W_OK | X_OK) != 0) {
      return what + " " + path + " is not writable by " + who() + " (" + std::strerror(errno) +
             "): `chown` it to the node's user, or " + owner_hint(path);
    }
    return "";
  }
  const fs::path base = existing_ancestor(path);
  if (!fs::is_directory(base, ec)) {
    return what + " " + path + " cannot be created: " + base.string() +
           " is not a directory; give another path";
  }
  if (::access(base.c_str(), W_OK | X_OK) != 0) {
    return what + " " + path + " cannot be created: " + base.string() + " is not writable by " +
           who() + " (" + std::strerror(errno) + "); " + owner_hint(path);
  }
  return "";
}

std::string writable_file_refusal(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (fs::exists(path, ec)) {
    if (fs::is_directory(path, ec)) {
      return what + " " + path + " is a directory: give the path of a file in it";
    }
    if (::access(path.c_str(), W_OK) != 0) {
      return what + " " + path + " is not writable by " + who() + " (" + std::strerror(errno) +
             "): `chown` it to the node's user";
    }
    return "";
  }
  // Its directory may not exist yet and still be there when the node starts: the unit's
  // StateDirectory (/var/lib/hoprelay, the default for relative paths) is made by systemd at
  // the unit's start, after `hoprelay validate` in configuration management ran. So only a
  // directory that could not be made is refused here; a stage that finds none says so itself
  // (and the node exits 78 as well).
  const fs::path dir = fs::absolute(path).lexically_normal().parent_path();
  return directory_refusal(dir.string(), what + " " + path + ": its directory");
}

std::vector<Diagnostic> node_file_refusals(const Topology& topology, const NodeSpec& node) {
  std::vector<Diagnostic> out;
  auto add = [&](SourcePos pos, std::string why) {
    if (!why.empty()) out.push_back({topology.path, pos, std::move(why), false});
  };
  const std::string at = "nodes." + node.name;
  if (!node.spool_dir.empty()) {
    add(node.spool_dir_pos.line ? node.spool_dir_pos : node.pos,
        directory_refusal(node.spool_dir, at + ".spool_dir"));
  }
  const StageSpec& stage = node.stage;
  if (stage.plugin == "file-sink") {
    if (std::string path = param(stage, "path"); !path.empty()) {
      add(stage.pos, writable_file_refusal(path, at + ".stage (file-sink) path"));
    }
    if (std::string dir = param(stage, "state_dir"); !dir.empty()) {
      add(stage.pos, directory_refusal(dir, at + ".stage (file-sink) state_dir"));
    }
  } else if (stage.plugin == "verify-sink") {
    if (std::string report = param(stage, "report"); !report.empty()) {
      add(stage.pos, writable_file_refusal(report, at + ".stage (verify-sink) report"));
    }
  }
  return out;
}

}  // namespace hoprelay::config
