// Splitting a collective across channels (algorithms/channels.h): slices cover each block exactly
// once, and every algorithm allowed to split, re-addressed slice by slice, still computes the
// collective. The symbolic verifier runs each rank's channels one after another (their messages
// stay in order per connection, as on channels' own connections); a channel's buffers start at
// its slice, which here means shifting its input and output offsets by the slice's start.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "algorithms/catalog.h"
#include "algorithms/channels.h"
#include "algorithms/symbolic.h"

using namespace coll::algorithms;

namespace {

const Collective kCollectives[] = {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                                   Collective::kBroadcast, Collective::kReduce,        Collective::kAllToAll};

// Rank r's steps of every channel, in channel order, addressed into the whole buffers.
Schedule channelsOf(Algorithm a, Collective c, int n, int r, size_t count, int root, int channels, size_t align,
                    std::string* error) {
  Schedule all;
  for (int ch = 0; ch < channels; ++ch) {
    Slice sl = channelSlice(count, ch, channels, align);
    if (sl.count == 0) continue;
    ScheduleArgs args{c, n, r, sl.count, root, 3};
    Schedule s = buildSchedule(a, args);
    if (!spreadOverBlocks(&s, c, sl.count, count)) {
      *error = "rank " + std::to_string(r) + " channel " + std::to_string(ch) + ": a step leaves its block";
      return {};
    }
    for (Step& st : s) {
      if (st.src != Buf::kScratch) st.srcOff += sl.lo;
      if (st.dst != Buf::kScratch) st.dstOff += sl.lo;
      all.push_back(st);
    }
  }
  return all;
}

}  // namespace

TEST_CASE("channel slices cover a block once, aligned, and channelsFor stays in bounds", "[schedules][channels]") {
  for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(64), size_t(1000), size_t(4097)})
    for (int n : {1, 2, 3, 8, 32})
      for (size_t align : {size_t(1), size_t(32), size_t(64)}) {
        size_t next = 0;
        for (int c = 0; c < n; ++c) {
          Slice s = channelSlice(count, c, n, align);
          INFO("count " << count << " n " << n << " align " << align << " channel " << c);
          if (s.count == 0) continue;
          CHECK(s.lo == next);
          CHECK(s.lo % align == 0);
          next = s.lo + s.count;
        }
        CHECK(next == count);
      }
  CHECK(channelsFor(0, 8, 1024) == 1);
  CHECK(channelsFor(1023, 8, 1024) == 1);
  CHECK(channelsFor(3 * 1024, 8, 1024) == 3);
  CHECK(channelsFor(size_t(1) << 30, 8, 1024) == 8);
  CHECK(channelsFor(size_t(1) << 30, 1000, 1) == kMaxChannels);
  CHECK(channelsFor(5, 0, 1) == 1);
}

TEST_CASE("which algorithms split: one-block collectives always, blocked ones when block-local",
          "[schedules][channels]") {
  CHECK(slicesAcrossChannels(Algorithm::kRhd, Collective::kAllReduce));
  CHECK(slicesAcrossChannels(Algorithm::kRing, Collective::kAllGather));
  CHECK(slicesAcrossChannels(Algorithm::kPairwise, Collective::kAllToAll));
  CHECK_FALSE(slicesAcrossChannels(Algorithm::kRhd, Collective::kAllGather));
  CHECK_FALSE(slicesAcrossChannels(Algorithm::kRhd, Collective::kReduceScatter));
  // Recursive halving sends several blocks in one step: re-addressing it must refuse.
  Schedule s = buildSchedule(Algorithm::kRhd, ScheduleArgs{Collective::kReduceScatter, 4, 0, 8, 0, 3});
  CHECK_FALSE(spreadOverBlocks(&s, Collective::kReduceScatter, 8, 16));
}

TEST_CASE("every algorithm that splits, on 2 to 5 channels, 1 to 9 ranks, computes its collective",
          "[schedules][channels]") {
  size_t runs = 0;
  for (Collective c : kCollectives)
    for (Algorithm a : algorithmsFor(c)) {
      if (!slicesAcrossChannels(a, c)) continue;
      for (int n = 1; n <= 9; ++n)
        for (size_t count : {size_t(1), size_t(5), size_t(67), size_t(300)})
          for (int channels : {2, 3, 5})
            for (bool inPlace : {false, true}) {
              int root = n > 1 ? 1 : 0;
              std::string error;
              SymbolicCall call{c, n, count, root, inPlace};
              SymbolicReport rep =
                  runSymbolic(call, [&](int r) { return channelsOf(a, c, n, r, count, root, channels, 16, &error); });
              ++runs;
              INFO(algorithmName(a) << " " << collectiveName(c) << " n=" << n << " count=" << count
                                    << " channels=" << channels << (inPlace ? " in-place" : ""));
              REQUIRE(error == "");
              REQUIRE(rep.error == "");
              REQUIRE(rep.ok);
            }
    }
  CHECK(runs > 1000);
}
