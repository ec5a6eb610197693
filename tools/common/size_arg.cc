#include "size_arg.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace colltools {

bool parseSizeValue(const char* text, double* out) {
  if (text == nullptr) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || errno != 0 || !std::isfinite(v) || v < 0) return false;
  while (std::isspace(static_cast<unsigned char>(*end))) ++end;
  double mult = 1;
  switch (*end) {
    case 'K':
    case 'k':
      mult = 1024.0;
      break;
    case 'M':
    case 'm':
      mult = 1024.0 * 1024;
      break;
    case 'G':
    case 'g':
      mult = 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  if (mult > 1) ++end;
  while (std::isspace(static_cast<unsigned char>(*end))) ++end;
  if (*end != '\0') return false;
  *out = v * mult;
  return true;
}

bool parseSize(const char* text, size_t* out) {
  double v = 0;
  // 2^64 itself is not representable as size_t; anything at or above it is refused.
  if (!parseSizeValue(text, &v) || v >= 18446744073709551616.0) return false;
  *out = static_cast<size_t>(v);
  return true;
}

}  // namespace colltools
