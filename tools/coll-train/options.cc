#include "options.h"

#include <cstdlib>
#include <cstring>

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
         "  --pp N              pipeline parallel (an MLP of --layers layers in N stages; with --dp only)\n"
         "  --schedule gpipe|1f1b   pipeline schedule (default 1f1b)\n"
         "  --micro M           micro-batches per step for --pp (default 4)\n"
         "  --bucket-mb X       data-parallel bucket size (default 25)\n"
         "  --no-overlap        data parallel: all-reduce after backward instead of during it\n"
         "model and data:\n"
         "  --layers L --dmodel D --heads H --ffn F --classes C --seq T --batch B --lr X\n"
         "                      (defaults 4, 128, 8, 512, 32, 64, 8, 0.05)\n";
}

std::string parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    auto intArg = [&](int* dst) -> std::string {
      const char* v = value();
      if (!v) return a + " needs a value";
      char* end = nullptr;
      long x = std::strtol(v, &end, 10);
      if (*end != '\0' || x < 0 || x > 1 << 24) return a + ": '" + v + "' is not a count";
      *dst = static_cast<int>(x);
      return "";
    };
    std::string err;
    if (a == "-h" || a == "--help") {
      o->help = true;
    } else if (a == "--dp") {
      err = intArg(&o->dp);
    } else if (a == "--tp") {
      err = intArg(&o->tp);
    } else if (a == "--cp") {
      err = intArg(&o->cp);
    } else if (a == "--pp") {
      err = intArg(&o->pp);
    } else if (a == "--sp") {
      o->sp = true;
    } else if (a == "--zero") {
      err = intArg(&o->zero);
      if (err.empty() && o->zero > 3) err = "--zero takes a stage, 0 to 3";
    } else if (a == "--schedule") {
      const char* v = value();
      if (!v || (std::strcmp(v, "gpipe") != 0 && std::strcmp(v, "1f1b") != 0))
        err = "--schedule takes gpipe or 1f1b";
      else
        o->schedule = v;
    } else if (a == "--micro") {
      err = intArg(&o->micro);
    } else if (a == "--steps") {
      err = intArg(&o->steps);
    } else if (a == "--batch") {
      err = intArg(&o->batch);
    } else if (a == "--seq") {
      err = intArg(&o->seq);
    } else if (a == "--dmodel") {
      err = intArg(&o->dModel);
    } else if (a == "--heads") {
      err = intArg(&o->heads);
    } else if (a == "--ffn") {
      err = intArg(&o->ffn);
    } else if (a == "--layers") {
      err = intArg(&o->layers);
    } else if (a == "--classes") {
      err = intArg(&o->classes);
    } else if (a == "--bucket-mb" || a == "--lr") {
      const char* v = value();
      char* end = nullptr;
      double x = v ? std::strtod(v, &end) : 0;
      if (!v || *end != '\0' || !(x > 0)) {
        err = a + " needs a positive number";
      } else if (a == "--lr") {
        o->lr = static_cast<float>(x);
      } else {
        o->bucketMb = x;
      }
    } else if (a == "--no-overlap") {
      o->overlap = false;
    } else {
      err = "unknown option '" + a + "' (see --help)";
    }
    if (!err.empty()) return err;
  }
  if (o->tp < 1 || o->cp < 1 || o->pp < 1 || o->micro < 1 || o->steps < 1 || o->batch < 1)
    return "--tp, --cp, --pp, --micro, --steps and --batch are at least 1";
  if (o->sp && o->tp == 1) return "--sp splits the sequence over the tensor-parallel ranks: give --tp 2 or more";
  if (o->pp > 1 && (o->tp > 1 || o->cp > 1 || o->zero >= 0))
    return "--pp trains the MLP (no attention to split), with plain data parallel: combine it with --dp only";
  return "";
}

}  // namespace colltrain
