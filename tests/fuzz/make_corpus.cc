// Writes the fuzzers' seed corpus (tests/fuzz/corpus/<target>/) from the real encoders, so that
// the seeds stay valid inputs when a format changes: bin/fuzz_make_corpus tests/fuzz/corpus.
// Regression inputs (crashes the fuzzers found, named regress-*) are written here too, with the
// reason for each. Not written here: fuzz_topo_file's copies of tests/topo/*.json and its
// regress-*.json, which are hand-written text.
#include <arpa/inet.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bootstrap/bootstrap_wire.h"
#include "bootstrap/status_wire.h"
#include "bootstrap/unique_id.h"
#include "topo/topo_file.h"

namespace {

using namespace coll;
using namespace coll::bootstrap;

constexpr uint64_t kSecret = 0x5eed5eed12345678ull;  // as in fuzz_bootstrap_wire.cc
std::string gDir;

void write(const std::string& target, const std::string& name, const std::vector<char>& bytes) {
  std::string path = gDir + "/" + target + "/" + name;
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) std::fprintf(stderr, "cannot write %s\n", path.c_str()), std::exit(1);
}

template <typename T>
void append(std::vector<char>* out, const T& v) {
  const char* p = reinterpret_cast<const char*>(&v);
  out->insert(out->end(), p, p + sizeof(T));
}

net::Address address(const char* ip, uint16_t port) { return *net::Address::resolve(ip, port); }

RankInfo rankInfo(int rank, int nranks, const char* ip) {
  RankInfo info{};
  info.rank = rank;
  info.nranks = nranks;
  info.pid = 1000 + rank;
  info.cudaDev = -1;
  info.hostHash = 0xabcdef;
  info.listen = net::PackedAddress::pack(address(ip, static_cast<uint16_t>(40000 + rank)));
  std::snprintf(info.hostName, sizeof(info.hostName), "node-%d", rank / 2);
  std::snprintf(info.hostId, sizeof(info.hostId), "node-%d|ns", rank / 2);
  info.package = 0;
  info.numa = -1;
  info.cores = 2;
  info.onlineCpus = 2;
  return info;
}

std::vector<char> frame(uint64_t tag, int srcRank, const std::vector<char>& payload) {
  std::vector<char> out;
  append(&out, makeHeader(kSecret, tag, payload.size(), srcRank));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::vector<char> helloBytes(const Hello& h) {
  std::vector<char> p;
  append(&p, h);
  return frame(kTagHello, h.info.rank, p);
}

void bootstrapWire() {
  const char* t = "fuzz_bootstrap_wire";
  Hello h{};
  h.nranks = 2;
  h.libVersion = COLL_VERSION_CODE;
  h.info = rankInfo(1, 2, "127.0.0.1");
  write(t, "hello-rank1-of-2", helloBytes(h));
  h.info = rankInfo(0, 4, "::1");
  h.nranks = 4;
  write(t, "hello-ipv6", helloBytes(h));
  std::vector<RankInfo> table{rankInfo(0, 3, "127.0.0.1"), rankInfo(1, 3, "127.0.0.1"), rankInfo(2, 3, "::1")};
  // The reply's srcRank field carries the nranks the fuzzer expects (fuzz_bootstrap_wire.cc).
  write(t, "answer-success-3", frame(kTagReply, 3, encodeRootAnswer(collSuccess, "", table)));
  write(t, "answer-failure",
        frame(kTagReply, 3, encodeRootAnswer(collInvalidUsage, "rank 1 arrived twice: pid 1 and pid 2", {})));
  std::string why = "rank 2 failed: connection refused";
  write(t, "abort-notice", frame(kTagAbortNotice, 2, std::vector<char>(why.begin(), why.end())));
  write(t, "user-tag", frame(7, 1, std::vector<char>(8, 'x')));

  // Regressions. Issue 21 item 2: nranks = INT_MAX made the root allocate its table and die.
  h.info = rankInfo(0, 2, "127.0.0.1");
  h.nranks = 0x7fffffff;
  write(t, "regress-hello-nranks-intmax", helloBytes(h));
  // A host name without its terminating NUL: the root printed it as a C string, past the array.
  h.nranks = 2;
  std::memset(h.info.hostName, 'a', sizeof(h.info.hostName));
  std::memset(h.info.hostId, 'b', sizeof(h.info.hostId));
  std::memset(h.info.busId, 'c', sizeof(h.info.busId));
  write(t, "regress-hello-unterminated", helloBytes(h));
  // A result code outside collResult_t became the enum (undefined behaviour) and the rank's error.
  std::vector<char> bad = encodeRootAnswer(collInvalidUsage, "x", {});
  int32_t code = 99;
  std::memcpy(bad.data(), &code, 4);
  write(t, "regress-answer-bad-code", frame(kTagReply, 3, bad));
  // A table entry claiming another rank, and one with an unterminated host name.
  table[1].rank = 0;
  write(t, "regress-answer-wrong-rank", frame(kTagReply, 3, encodeRootAnswer(collSuccess, "", table)));
  table[1].rank = 1;
  std::memset(table[2].hostName, 'z', sizeof(table[2].hostName));
  write(t, "regress-answer-unterminated", frame(kTagReply, 3, encodeRootAnswer(collSuccess, "", table)));

  // Status answers (coll-top); srcRank carries the job's nranks for the host answer.
  JobStatus st{};
  st.rank = 1;
  st.nranks = 3;
  st.wait.waitingFor = 2;
  std::snprintf(st.host, sizeof(st.host), "host-a");
  std::snprintf(st.detail, sizeof(st.detail), "shm to 2 peers");
  std::snprintf(st.wait.opName, sizeof(st.wait.opName), "collAllReduce");
  std::vector<char> self;
  append(&self, st);
  write(t, "status-self", frame(kTagStatusAnswer, 3, self));
  std::vector<char> tableAnswer;
  for (const RankInfo& info : table) append(&tableAnswer, TableEntry{info.listen, 42});
  write(t, "status-table", frame(kTagStatusAnswer, 3, tableAnswer));
  std::vector<char> host;
  append(&host, HostEntry{0, kAnswered, st});
  append(&host, HostEntry{1, kNotAnswering, JobStatus{}});
  write(t, "status-host", frame(kTagStatusAnswer, 3, host));
  // A leader naming one rank twice (coll-top would count it twice).
  append(&host, HostEntry{1, kMissing, JobStatus{}});
  write(t, "regress-status-host-twice", frame(kTagStatusAnswer, 3, host));
}

void uniqueId() {
  const char* t = "fuzz_unique_id";
  IdContents c;
  c.secret = kSecret;
  c.root = address("127.0.0.1", 29500);
  collUniqueId id;
  encodeUniqueId(c, &id);
  write(t, "ipv4", std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
  c.root = address("::1", 29501);
  encodeUniqueId(c, &id);
  write(t, "ipv6", std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
}

void topoFile() {
  topo::System s;
  s.host = "node-a";
  s.hostId = "node-a";
  s.packages = 1;
  s.numa.push_back(topo::NumaNode{0, 0, 8, 1ull << 34});
  topo::Gpu g;
  g.name = "GPU";
  g.pci.busId = "0000:18:00.0";
  g.pci.chain = {"hb0", "hb0/sw1"};
  g.nvlinks.push_back(topo::Gpu::Link{"0000:19:00.0", 4});
  s.gpus.push_back(g);
  topo::Nic n;
  n.name = "mlx5_0";
  n.netdev = "ib0";
  n.kind = "ib";
  n.speedGBs = 25;
  n.port = 1;
  s.nics.push_back(n);
  std::string text = topo::systemToJson(s);
  write("fuzz_topo_file", "small-system.json", std::vector<char>(text.begin(), text.end()));
}

void env() {
  auto text = [](const std::string& s) { return std::vector<char>(s.begin(), s.end()); };
  const char* t = "fuzz_env";
  write(t, "coll-run",
        text("COLL_RANK=1\nCOLL_WORLD_SIZE=4\nCOLL_LOCAL_RANK=1\nCOLL_MASTER_ADDR=127.0.0.1\nCOLL_MASTER_PORT=29500\n"
             "COLL_BOOTSTRAP_SECRET=5eed\n"));
  write(t, "torchrun",
        text("RANK=0\nWORLD_SIZE=2\nLOCAL_RANK=0\nMASTER_ADDR=node-a\nMASTER_PORT=29400\n"
             "TORCHELASTIC_RUN_ID=abc\n"));
  write(t, "openmpi",
        text("OMPI_COMM_WORLD_RANK=3\nOMPI_COMM_WORLD_SIZE=8\nOMPI_COMM_WORLD_LOCAL_RANK=1\n"
             "MASTER_ADDR=10.0.0.1\nMASTER_PORT=1234\nOMPI_MCA_ess_base_jobid=77\n"));
  write(t, "slurm",
        text("SLURM_PROCID=5\nSLURM_NTASKS=16\nSLURM_LOCALID=1\nSLURM_JOB_ID=4242\n"
             "COLL_MASTER_ADDR=node-0\nCOLL_MASTER_PORT=5000\n"));
  write(t, "pmi-single", text("PMI_RANK=0\nPMI_SIZE=1\nPMI_JOBID=9\n"));
  write(t, "algo-proto",
        text("COLL_ALGO=allreduce:tree,ring;broadcast:^tree;reduce:chain\nCOLL_PROTO=^Direct\n"
             "NCCL_ALGO=Ring,NVLS\nNCCL_PROTO=LL128,Simple\n"));
  write(t, "params",
        text("COLL_NCHANNELS=-4\nCOLL_SHM_DISABLE=yes\nCOLL_IB_DISABLE=Off\nCOLL_BUFFSIZE=4194304\n"
             "COLL_SOCKET_IFNAME=^docker,lo\nCOLL_DEBUG=TRACE\nCOLL_DEBUG_SUBSYS=^NET,INIT\n"));
  write(t, "ifname-exact", text("COLL_SOCKET_IFNAME==eth0\nCOLL_DEBUG=VERSION\n"));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: %s tests/fuzz/corpus\n", argv[0]), 2;
  gDir = argv[1];
  bootstrapWire();
  uniqueId();
  topoFile();
  env();
  return 0;
}
