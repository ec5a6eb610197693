// coll-train's command line: which parallel strategy (or combination) to train with, and the
// model and batch sizes.
#pragma once

#include <string>

namespace colltrain {

struct Options {
  int dp = 0;  // 0: whatever the other sizes leave of the world
  int tp = 1, cp = 1, pp = 1;
  bool pipeline = false;  // --pp given (even 1): train the pipeline's MLP
  bool sp = false;
  int zero = -1;  // -1: plain data parallel (fp32, SGD, bucketed all-reduces); 0-3: ZeRO stage with Adam
  std::string schedule = "1f1b";
  int micro = 4;
  int steps = 10;
  int batch = 8;  // whole sequences (rows for the MLP) per step, over every data-parallel rank
  int seq = 64;
  int dModel = 128, heads = 8, ffn = 512, layers = 4, classes = 32;
  double bucketMb = 25;
  bool overlap = true;
  float lr = 0.05f;
  bool help = false;
};

/// Parses argv into *o; returns "" or a sentence saying what is wrong.
std::string parse(int argc, char** argv, Options* o);

/// The usage text.
const char* usage();

}  // namespace colltrain
