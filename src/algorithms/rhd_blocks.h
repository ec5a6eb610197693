// Block arithmetic shared by the recursive halving-doubling algorithms.
#pragma once

#include <cstddef>

#include "algorithms/fold.h"

namespace coll::algorithms {

/// count elements cut into nblocks nearly equal blocks (the first count % nblocks get one more).
struct Blocks {
  size_t count, nblocks;
  size_t offset(size_t b) const {
    size_t q = count / nblocks, rem = count % nblocks;
    return q * b + (b < rem ? b : rem);
  }
};

/// Elements [offset, offset + count) of the blocks of old ranks covered by new ranks [a, b).
struct Span {
  size_t offset, count;
};
inline Span spanOf(const Fold& f, int a, int b, size_t blockElems) {
  size_t lo = static_cast<size_t>(f.oldLo(a)) * blockElems, hi = static_cast<size_t>(f.oldLo(b)) * blockElems;
  return Span{lo, hi - lo};
}

}  // namespace coll::algorithms
