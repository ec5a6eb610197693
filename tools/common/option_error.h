// The one-line error for what getopt_long refuses, naming the option as it was written, for the
// tools that parse their command line with it (opterr = 0 and a ':' leading the optstring, after
// any '+', so that a missing value returns ':' and an unknown option '?'). Header-only and
// without coll dependencies: a tool includes it by its relative path.
#pragma once

#include <getopt.h>

#include <cstring>
#include <string>

namespace colltools {

/// For a `c` of '?' or ':' just returned by getopt_long over argv with longOptions: "unknown option
/// --x", "ambiguous option --x (...)", "--x needs a value" or "--x takes no value".
inline std::string optionError(int c, char* const* argv, const struct option* longOptions) {
  // getopt_long has stepped past an unknown or ambiguous long option, a long option with a value it
  // does not take and an option whose value is missing (the last argument); an unknown short
  // option is named by optopt.
  std::string arg = optind > 0 ? argv[optind - 1] : "";
  bool isLong = arg.size() > 2 && arg.compare(0, 2, "--") == 0;
  std::string written = arg.substr(0, arg.find('='));
  if (c == ':') return (isLong ? written : std::string("-") + char(optopt)) + " needs a value";
  if (optopt == 0 && isLong) {
    std::string matches;  // an abbreviation of several long options is ambiguous
    for (const struct option* o = longOptions; o->name; ++o)
      if (std::strncmp(o->name, written.c_str() + 2, written.size() - 2) == 0)
        matches += (matches.empty() ? "--" : ", --") + std::string(o->name);
    if (matches.find(',') != std::string::npos) return "ambiguous option " + written + " (" + matches + ")";
    return "unknown option " + written;
  }
  if (isLong && arg.find('=') != std::string::npos) {
    for (const struct option* o = longOptions; o->name; ++o)
      if (o->val == optopt && o->has_arg == no_argument &&
          std::strncmp(o->name, written.c_str() + 2, written.size() - 2) == 0)
        return "--" + std::string(o->name) + " takes no value";
  }
  if (optopt > 0 && optopt < 256) return std::string("unknown option -") + char(optopt);
  return "unknown option " + written;
}

}  // namespace colltools
