#include "options.h"

#include <getopt.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "../common/option_error.h"

namespace colltrain {

const char* usage() {
  return "usage: coll-run -n N coll-train [strategy] [model] [--steps S]\n"
         "\n"
         "Trains a small model on synthetic data with the client layer's parallel strategies and prints, per\n"
         "step: the loss, the step time, the time blocked on communication, the bytes this rank sent by\n"
         "collective kind, and the peak bytes of parameters, gradients and optimizer state it held.\n"
         "\n"
         "strategy (the sizes' product is the number of ranks; --dp defaults to what the others leave):\n"
         "  --dp N              data parallel: bucketed all-reduces overlapping backward (fp32, SGD)\n"
         "  --zero 0|1|2|3      ZeRO stage over the data-parallel ranks instead (bf16 working copy, Adam);\n"
         "                      3 is FSDP (units = transformer blocks)\n"
         "  --tp N              tensor parallel (Megatron: heads and the MLP split over N ranks)\n"
         "  --sp                sequence parallel on top of --tp\n"
         "  --cp N              context parallel (ring attention over the sequence)\n"
         "  --pp N              pipeline parallel (an MLP of --layers layers in N stages; with --dp only);\n"
         "                      --pp 1 trains the same MLP in one stage, the reference for --pp N\n"
         "  --schedule gpipe|1f1b   pipeline schedule (default 1f1b)\n"
         "  --micro M           micro-batches per step for --pp (default 4)\n"
         "  --bucket-mb X       data-parallel bucket size (default 25)\n"
         "  --no-overlap        data parallel: all-reduce after backward instead of during it\n"
         "model and data:\n"
         "  --layers L --dmodel D --heads H --ffn F --classes C --seq T --batch B --lr X\n"
         "                      (defaults 4, 128, 8, 512, 32, 64, 8, 0.05)\n"
         "  --steps S           training steps (default 10)\n"
         "  -h, --help          this text\n";
}

namespace {

// Long options only (and -h); their codes are above any character.
enum : int {
  kDp = 256,
  kTp,
  kCp,
  kPp,
  kSp,
  kZero,
  kSchedule,
  kMicro,
  kSteps,
  kBatch,
  kSeq,
  kDModel,
  kHeads,
  kFfn,
  kLayers,
  kClasses,
  kBucketMb,
  kLr,
  kNoOverlap,
};

const struct option kLongOptions[] = {
    {"dp", required_argument, nullptr, kDp},
    {"tp", required_argument, nullptr, kTp},
    {"cp", required_argument, nullptr, kCp},
    {"pp", required_argument, nullptr, kPp},
    {"sp", no_argument, nullptr, kSp},
    {"zero", required_argument, nullptr, kZero},
    {"schedule", required_argument, nullptr, kSchedule},
    {"micro", required_argument, nullptr, kMicro},
    {"steps", required_argument, nullptr, kSteps},
    {"batch", required_argument, nullptr, kBatch},
    {"seq", required_argument, nullptr, kSeq},
    {"dmodel", required_argument, nullptr, kDModel},
    {"heads", required_argument, nullptr, kHeads},
    {"ffn", required_argument, nullptr, kFfn},
    {"layers", required_argument, nullptr, kLayers},
    {"classes", required_argument, nullptr, kClasses},
    {"bucket-mb", required_argument, nullptr, kBucketMb},
    {"lr", required_argument, nullptr, kLr},
    {"no-overlap", no_argument, nullptr, kNoOverlap},
    {"help", no_argument, nullptr, 'h'},
    {nullptr, 0, nullptr, 0},
};
// ':' first: a missing value is ':' rather than '?'.
const char kShortOptions[] = ":h";

std::string intArg(const std::string& name, const char* v, int* dst) {
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < 0 || x > 1 << 24) return name + ": '" + v + "' is not a count";
  *dst = static_cast<int>(x);
  return "";
}

}  // namespace

std::string parse(int argc, char** argv, Options* o) {
  std::vector<char*> args(argv, argv + argc);  // getopt_long permutes: leave the caller's argv alone
  args.push_back(nullptr);
  optind = 0;  // start over (glibc), and print no errors of getopt's own: ours name the option
  opterr = 0;
  for (;;) {
    int longIndex = -1;
    int c = getopt_long(argc, args.data(), kShortOptions, kLongOptions, &longIndex);
    if (c == -1) break;
    if (c == 'h') {
      o->help = true;
      return "";
    }
    if (c == '?' || c == ':') {
      std::string why = colltools::optionError(c, args.data(), kLongOptions);
      const std::string unknown = "unknown option ";
      if (why.compare(0, unknown.size(), unknown) == 0)
        why = unknown + "'" + why.substr(unknown.size()) + "' (see --help)";
      return why;
    }
    const std::string name = longIndex >= 0 ? std::string("--") + kLongOptions[longIndex].name : "-h";
    const char* v = optarg;
    std::string err;
    switch (c) {
      case kDp:
        err = intArg(name, v, &o->dp);
        break;
      case kTp:
        err = intArg(name, v, &o->tp);
        break;
      case kCp:
        err = intArg(name, v, &o->cp);
        break;
      case kPp:
        err = intArg(name, v, &o->pp);
        o->pipeline = true;
        break;
      case kSp:
        o->sp = true;
        break;
      case kZero:
        err = intArg(name, v, &o->zero);
        if (err.empty() && o->zero > 3) err = "--zero takes a stage, 0 to 3";
        break;
      case kSchedule:
        if (std::strcmp(v, "gpipe") != 0 && std::strcmp(v, "1f1b") != 0)
          err = "--schedule takes gpipe or 1f1b";
        else
          o->schedule = v;
        break;
      case kMicro:
        err = intArg(name, v, &o->micro);
        break;
      case kSteps:
        err = intArg(name, v, &o->steps);
        break;
      case kBatch:
        err = intArg(name, v, &o->batch);
        break;
      case kSeq:
        err = intArg(name, v, &o->seq);
        break;
      case kDModel:
        err = intArg(name, v, &o->dModel);
        break;
      case kHeads:
        err = intArg(name, v, &o->heads);
        break;
      case kFfn:
        err = intArg(name, v, &o->ffn);
        break;
      case kLayers:
        err = intArg(name, v, &o->layers);
        break;
      case kClasses:
        err = intArg(name, v, &o->classes);
        break;
      case kBucketMb:
      case kLr: {
        char* end = nullptr;
        double x = std::strtod(v, &end);
        if (end == v || *end != '\0' || !(x > 0))
          err = name + " needs a positive number";
        else if (c == kLr)
          o->lr = static_cast<float>(x);
        else
          o->bucketMb = x;
        break;
      }
      case kNoOverlap:
        o->overlap = false;
        break;
      default:
        err = "unknown option '" + name + "' (see --help)";
    }
    if (!err.empty()) return err;
  }
  if (optind < argc) return std::string("unexpected argument '") + args[optind] + "' (coll-train takes options only)";
  if (o->tp < 1 || o->cp < 1 || o->pp < 1 || o->micro < 1 || o->steps < 1 || o->batch < 1)
    return "--tp, --cp, --pp, --micro, --steps and --batch are at least 1";
  if (o->sp && o->tp == 1) return "--sp splits the sequence over the tensor-parallel ranks: give --tp 2 or more";
  if (o->pipeline && (o->tp > 1 || o->cp > 1 || o->zero >= 0))
    return "--pp trains the MLP (no attention to split), with plain data parallel: combine it with --dp only";
  return "";
}

}  // namespace colltrain
