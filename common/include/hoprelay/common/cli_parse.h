// Command-line parsing shared by hoprelayd and hoprelay: CLI11, with the unknown option named.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstddef>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hoprelay::cli {

namespace detail {

// Edits (insert, delete, replace) from a to b: short option names only, so the table is small.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The first `-x` or `--xyz` of argv that no option of `command` or of the commands above it
// takes (`-tFILE` is `-t`; a value that starts with '-' other than a number, `--x=-y`).
inline std::optional<std::string> unknown_option(const std::vector<const CLI::App*>& commands,
                                                 int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] >= '0' && arg[1] <= '9')) continue;
    const std::string name{arg[1] == '-' ? arg.substr(0, arg.find('=')) : arg.substr(0, 2)};
    if (std::none_of(commands.begin(), commands.end(),
                     [&](const CLI::App* c) { return c->get_option_no_throw(name) != nullptr; })) {
      return name;
    }
  }
  return std::nullopt;
}

// The name nearest to `typed` among `names` (a prefix of it, or at most 2 edits away).
inline std::optional<std::string> nearest(const std::vector<std::string>& names,
                                          std::string_view typed) {
  std::optional<std::string> best;
  std::size_t best_distance = 3;
  for (const std::string& name : names) {
    const std::size_t d = name.starts_with(typed) ? 1 : edit_distance(typed, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best;
}

// The known long option nearest to `typed`.
inline std::optional<std::string> nearest_option(const std::vector<const CLI::App*>& commands,
                                                 std::string_view typed) {
  if (!typed.starts_with("--")) return std::nullopt;
  std::vector<std::string> names;
  for (const CLI::App* c : commands) {
    for (const CLI::Option* opt : c->get_options()) {
      if (opt->get_group().empty()) continue;  // hidden: not for people to type
      for (const std::string& name : opt->get_lnames()) names.push_back("--" + name);
    }
  }
  return nearest(names, typed);
}

// The first word of argv when `app` has subcommands and none was chosen (`hoprelay sned`).
inline std::optional<std::string> unknown_command(const CLI::App& app, int argc, char** argv) {
  if (!app.get_subcommands().empty() || argc < 2 || argv[1][0] == '-') return std::nullopt;
  return std::string{argv[1]};
}

inline std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

}  // namespace detail

// app.parse(argc, argv), printing CLI11's messages (or help) as CLI11_PARSE does; nullopt to
// go on, or the exit status to return. Why not CLI11_PARSE alone: CLI11 checks required
// options before it looks at the ones it does not know, so `--nod c` said "--node is
// required", and a misspelt option only "The following argument was not expected". Here an
// unknown option is named first, with the known one nearest to it.
inline std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    const bool unknown_may_explain = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr ||
                                     dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
    if (!unknown_may_explain) return app.exit(e);
    const std::string_view program = argv[0];
    std::string where{program.substr(program.rfind('/') + 1)};  // npos + 1: all of it
    const std::vector<std::string> names = detail::command_names(app);
    if (!names.empty()) {
      // A command that is none of the subcommands: its options would be unknown here.
      if (auto command = detail::unknown_command(app, argc, argv)) {
        std::cerr << where << ": unknown command " << *command;
        if (auto near = detail::nearest(names, *command))
          std::cerr << ": did you mean " << *near << "?";
        std::cerr << " (" << where << " --help lists the commands)\n";
        return static_cast<int>(CLI::ExitCodes::ExtrasError);
      }
    }
    std::vector<const CLI::App*> commands{&app};  // the command and its chosen subcommands
    while (!commands.back()->get_subcommands().empty()) {
      commands.push_back(commands.back()->get_subcommands().front());
    }
    const auto name = detail::unknown_option(commands, argc, argv);
    if (!name || (!names.empty() && commands.size() == 1)) return app.exit(e);
    for (std::size_t i = 1; i < commands.size(); ++i) where += " " + commands[i]->get_name();
    std::cerr << where << ": unknown option " << *name;
    if (auto near = detail::nearest_option(commands, *name)) {
      std::cerr << ": did you mean " << *near << "?";
    }
    std::cerr << " (" << where << " --help lists the options)\n";
    return static_cast<int>(CLI::ExitCodes::ExtrasError);
  }
}

}  // namespace hoprelay::cli
