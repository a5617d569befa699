// What one node opens on its own host when it starts, checked before it does: its spool
// directory and its built-in stage's files (file-sink's `path` and `state_dir`, verify-sink's
// `report`). `hoprelay validate --node N` runs these checks as N's host has it (ahead of a
// change, as the node's user), and hoprelayd runs them at start, where a refusal exits 78
// (EX_CONFIG, which its unit does not restart on: restarting cures none of them). Each names where
// the path is written (FILE:LINE:COL) and what to do. TLS files are transport::check_tls_files.
//
// Nothing is created or changed: a path that does not exist yet is checked by its nearest
// existing ancestor, which must be a directory this process may write into. A relative stage
// path is taken from the current directory, as the stage opens it (under systemd, the unit's
// StateDirectory).
#pragma once

#include <string>
#include <vector>

#include "hoprelay/config/topology.h"

namespace hoprelay::config {

std::vector<Diagnostic> node_file_refusals(const Topology& topology, const NodeSpec& node);

// Why this process could not make `path` a directory it writes into (it is one it cannot
// write, is not a directory, or its nearest existing ancestor is not writable), or "" when it
// could. `what` names it in the message ("nodes.b.spool_dir").
std::string directory_refusal(const std::string& path, const std::string& what);
// The same for a file to be opened for writing: it exists and is writable, or its directory
// is (or could be made) one this process writes into.
std::string writable_file_refusal(const std::string& path, const std::string& what);

}  // namespace hoprelay::config
