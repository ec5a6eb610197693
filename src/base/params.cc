#include "base/params.h"

namespace coll::params {

const param::String kDebug(
    "COLL_DEBUG", "WARN",
    "Log level: NONE, VERSION (the version line only), WARN, INFO (also prints the version line) or TRACE. "
    "Messages below the level are never formatted. An error a call returns is logged at INFO "
    "(collGetLastError has its sentence), so that tools print it once.");
const param::String kDebugSubsys("COLL_DEBUG_SUBSYS", "ALL",
                                 "Comma-separated subsystems to log (INIT,BOOTSTRAP,NET,ENV,COLL,TOPO,ALL); a "
                                 "leading ^ logs all but those.");
const param::String kDebugFile("COLL_DEBUG_FILE", "",
                               "Write log lines to this file instead of stderr; %h is replaced by the host name and "
                               "%p by the pid.");

const param::String kSocketIfname(
    "COLL_SOCKET_IFNAME", "",
    "Interfaces for bootstrap and TCP traffic. 'eth,ib' = names starting with eth or "
    "ib; '^docker,lo' = all but those prefixes; '=eth0' = exactly eth0 ('^=' to "
    "exclude exact names). Unset: when several physical interfaces are up (or COLL_TOPO_FILE "
    "is set), the one closest to the NUMA node the rank is bound to; otherwise the first "
    "up non-loopback, non-docker one, else loopback.");
const param::String kSocketFamily("COLL_SOCKET_FAMILY", "",
                                  "Address family of the chosen interface: AF_INET or AF_INET6. Unset: IPv4 if the "
                                  "interface has one, else IPv6.");
const param::Int kBootstrapTimeoutMs("COLL_BOOTSTRAP_TIMEOUT_MS", 60000,
                                     "Deadline in ms for every bootstrap wait (rendezvous, bootstrap send/recv, "
                                     "split, finalize). A rank that has not arrived by then is named in the error.");
const param::Int kHandshakeTimeoutMs("COLL_HANDSHAKE_TIMEOUT_MS", 3000,
                                     "How long an incoming bootstrap or TCP data connection may take to present this "
                                     "job's secret before it is closed: a connection that sends nothing holds a "
                                     "file descriptor no longer than this.");
const param::Int kBootstrapInboxBytes("COLL_BOOTSTRAP_INBOX_BYTES", 64 << 20,
                                      "Most bytes of bootstrap messages a rank holds that nobody has asked for yet, "
                                      "from all peers together. A message beyond it fails the rank's next bootstrap "
                                      "wait with an error naming the sender.");
const param::Int kBootstrapInboxPeerBytes("COLL_BOOTSTRAP_INBOX_PEER_BYTES", 16 << 20,
                                          "The same bound for the messages of one peer.");
const param::String kBootstrapSecret("COLL_BOOTSTRAP_SECRET", "",
                                     "64-bit secret (hex) for collCommInitFromEnv rendezvous; coll-run sets a random "
                                     "one. Unset: derived from the launcher's job id, master address and port.");
const param::String kHostId("COLL_HOSTID", "",
                            "Overrides the host identity (default: host name + boot id). Ranks with equal ids are "
                            "treated as one host, e.g. to give network namespaces distinct identities.");
const param::String kTopoFile("COLL_TOPO_FILE", "",
                              "Read this host's topology from this file instead of detecting it: coll's JSON "
                              "(coll-topo --dump writes one) or NCCL's XML topology (NCCL_TOPO_FILE's format).");
const param::String kTopoDumpFile("COLL_TOPO_DUMP_FILE", "",
                                  "Write the topology of rank 0's host to this file at communicator init: NCCL's XML "
                                  "when the name ends in .xml, coll's JSON otherwise.");
const param::Bool kCudaDisable("COLL_CUDA_DISABLE", false,
                               "Do not load the CUDA runtime: every communicator is host-only.");

const param::Bool kP2PDisable("COLL_P2P_DISABLE", false,
                              "Device buffers: do not connect ranks of one process through device memory (p2p); "
                              "they use host-staged shared memory (or TCP) instead.");

const param::Bool kNcclTwins(
    "COLL_NCCL_TWINS", false,
    "1: a parameter COLL_X that is not set takes NCCL_X's value; 0: never. Unset: libnccl.so.2 (the NCCL "
    "drop-in) turns twins on as it loads (collParamNcclTwins), so that NCCL's variables keep working there; libcoll "
    "alone ignores NCCL_* (a job may use NCCL and coll side by side).");
const param::Bool kShmDisable("COLL_SHM_DISABLE", false,
                              "Do not use shared memory between ranks on one host: they use TCP instead.");
const param::Int kBuffSize("COLL_BUFFSIZE", 4 << 20,
                           "Bytes of FIFO per connection and direction (COLL_NSLOTS slots of COLL_BUFFSIZE / "
                           "COLL_NSLOTS bytes). Must be equal on all ranks.");
const param::Int kP2PBuffSize("COLL_P2P_BUFFSIZE", 1 << 20,
                              "Bytes of FIFO per connection and direction of tagged messages (collIsend/collIrecv: "
                              "every pair of ranks is connected at collCommTaggedInit). Must be equal on all ranks.");
const param::Int kP2PUnexpectedBytes("COLL_P2P_UNEXPECTED_BYTES", 256 << 20,
                                     "Bytes of tagged messages a communicator holds for receives not yet posted; past "
                                     "it, its tagged receives fail naming the sender.");
const param::Int kShmDirectMin("COLL_SHM_DIRECT_MIN", 64 << 10,
                               "Pieces of at least this many bytes between ranks on one host are read by the receiver "
                               "straight from the sender's buffer (process_vm_readv: one copy instead of two), and "
                               "over ucx sent straight from it (no copy into the slots); 0 copies every piece "
                               "through the slots.");
const param::String kP2PLevel(
    "COLL_P2P_LEVEL", "PXB",
    "Device buffers: the farthest path between two GPUs of one host (LOC, NVL, PIX, PXB, PHB, "
    "SYS, as nvidia-smi topo -m names them; NCCL_P2P_LEVEL's meaning) over which ranks "
    "connect device memory to device memory (p2p, CUDA IPC between processes); farther "
    "GPUs stage through host shared memory. Two ranks on one GPU always use p2p.");
const param::Int kDeviceLLMax("COLL_DEVICE_LL_MAX", 64 << 10,
                              "Device buffers: operations of up to this many bytes (count x type size) use the LL "
                              "protocol (data and flag in one store, no counter to read) where every pair of ranks is "
                              "connected in place (p2p or host-staged shm; never over TCP); larger ones use Simple. 0 "
                              "turns LL off, as COLL_PROTO=^LL does.");
const param::Int kDeviceNChannels("COLL_DEVICE_NCHANNELS", 8,
                                  "Device buffers: the most channels (CTAs, each with connections of its own) one "
                                  "operation is split across, 1 to 32. Not yet fitted on a GPU. Must be equal on all "
                                  "ranks.");
const param::Int kDeviceChannelMinBytes("COLL_DEVICE_CHANNEL_MIN_BYTES", 256 << 10,
                                        "Device buffers: an operation gets one channel per this many bytes of its "
                                        "largest buffer, up to COLL_DEVICE_NCHANNELS. Must be equal on all ranks.");
const param::Int kDeviceThreads(
    "COLL_DEVICE_THREADS", 512,
    "Device buffers: threads per CTA of the interpreter kernel, 64 to 512, a multiple of 32. "
    "Not yet fitted on a GPU.");
const param::Int kDeviceEmulationThreads(
    "COLL_DEVICE_EMULATION_THREADS", 8,
    "Emulated device and COLL_EXECUTOR=device-host: CPU threads that play one CTA "
    "of the interpreter (with real barriers), 1 to 64. Unset: 8, or the cores this process may run on "
    "where fewer.");
const param::Int kNSlots("COLL_NSLOTS", 8, "Slots per connection FIFO, 2 to 64.");
const param::String kNet("COLL_NET", "",
                         "The network between hosts (or between processes with COLL_SHM_DISABLE=1): 'tcp' (coll's "
                         "sockets), 'ucx' (coll's UCX provider: IB, RoCE, and TCP with UCX_TLS=tcp), or the name an "
                         "NCCL net plugin gives itself (COLL_NET_PLUGIN), case-insensitive, like NCCL_NET; NCCL's "
                         "names work too: 'Socket' is tcp, 'IB' a loaded plugin named IB... or else ucx on this "
                         "host's RDMA devices. Unset: the "
                         "plugin when one is loaded, else ucx when an RDMA device is present and UCX is built in, else "
                         "tcp. Every rank must choose the same network.");
const param::String kNetPlugin("COLL_NET_PLUGIN", "",
                               "An NCCL network plugin to load, like NCCL_NET_PLUGIN: a name X means libnccl-net-X.so, "
                               "or a path; 'none' loads none. Unset: libnccl-net.so if the loader finds it (quietly "
                               "skipped when absent). A plugin named here that cannot be loaded fails init.");
const param::Int kNSocks("COLL_NSOCKS", 1, "TCP sockets per connection and direction, 1 to 16.");
const param::Int kCommBlocking("COLL_COMM_BLOCKING", 1,
                               "0: communicators are non-blocking unless their config says otherwise (NCCL's "
                               "NCCL_COMM_BLOCKING): init, split, shrink, finalize and calls without a stream "
                               "return collInProgress and complete through collCommGetAsyncError. 1: blocking.");
const param::Int kTimeoutMs("COLL_TIMEOUT_MS", 300000,
                            "An operation fails with collTimeout when nothing moved for this many ms while waiting "
                            "for a peer.");

const param::Int kSpinUs("COLL_SPIN_US", -2,
                         "A rank waiting for a peer on host memory spins and yields this many us, then sleeps in "
                         "naps of 5 to 50 us until the peer moves, leaving the core to the computation it "
                         "overlaps. -1 never sleeps. -2 (default): 200 when this host's ranks are no more than "
                         "the cores the process may use (0 while the machine has more runnable threads than "
                         "cores and the process has other runnable threads: its computation), else -1 "
                         "(ranks then take turns by yielding).");

const param::Int kProxySpinUs("COLL_PROXY_SPIN_US", 200,
                              "The network proxy (the one thread per process that calls the network providers) "
                              "keeps spinning this many us after the last wait that needed it, then sleeps until "
                              "the next one (a wake-up costs a few us); it also spins while sends are on their "
                              "way.");

const param::String kNetProxy("COLL_NET_PROXY", "auto",
                              "Who runs the network proxy's rounds (the calls into the network provider that move "
                              "the slots): 'thread' (the process's proxy thread, always), 'waiters' (a thread "
                              "waiting for the network runs the round itself, one at a time; the proxy thread "
                              "keeps setup and close), 'auto' (default): 'waiters' once a communicator has more "
                              "threads than cores on its host (each rank's own and its proxy), else 'thread'.");

const param::String kExecutor(
    "COLL_EXECUTOR", "cpu",
    "How host-memory operations run: 'cpu' (the CPU executor), or 'device-host' (the device executor's "
    "interpreter, the code CUDA kernels run, compiled for the CPU: one thread per channel and a proxy loop in "
    "the caller; Simple protocol only, slower; a test of the device code where there is no GPU). Must be equal "
    "on all ranks.");

const param::String kAlgo(
    "COLL_ALGO", "",
    "Algorithms the tuner may choose, NCCL's syntax: 'ring,tree' (only these), '^ring' (all "
    "but these), or per collective 'allreduce:tree,rhd;broadcast:chain'. Algorithms: ring, "
    "chain, tree, rhd, rd, exchange, pairwise, hier (case-insensitive), and window: the one-copy path over "
    "symmetric windows (alone it forces the path where the buffers allow; '^window' turns it off). A list for every "
    "collective applies where "
    "it can, like NCCL_ALGO: a collective with none of the listed algorithms keeps its own (an "
    "INFO line says so); NCCL-only names (NVLS, CollNet, PAT) are skipped. Must be equal on "
    "all ranks.");
const param::String kProto("COLL_PROTO", "",
                           "Protocols for host memory, NCCL's syntax ('LL,Simple', '^Direct'): LL carries pieces "
                           "of up to 56 bytes in the flag's cache line (NCCL's LL128 is taken as LL), Simple copies "
                           "through the slots and stays on for what the others cannot carry ('LL' means LL where a "
                           "piece fits, Simple beyond), Direct lets the receiver read large pieces from the "
                           "sender's buffer.");

const param::String kRingOrder("COLL_RING_ORDER", "topo",
                               "Order of the ranks along rings, chains and trees: 'topo' host by host (each host "
                               "entered and left once), then package, NUMA node and GPU inside a host; 'rank' "
                               "rank order. Must be equal on all ranks.");

const param::String kTunerModel(
    "COLL_TUNER_MODEL", "",
    "Overrides the tuner's cost-model constants, e.g. 'alpha=0.3,beta=9,gamma=8,switch=1,"
    "contention=1.2,ring=0.8,tree=2.5,rhd_bw=1.6' (an algorithm's name sets its step weight, "
    "<name>_bw its bandwidth weight); "
    "perf/tune_allreduce.py fits them. Must be equal on all ranks.");
const param::String kCheckCalls(
    "COLL_CHECK_CALLS", "",
    "How ranks that call different collectives are caught (collInvalidUsage naming both calls): unset or "
    "'inband' (the default), a 16-byte fingerprint (kind, op, type, count, root, group position, number) rides with "
    "the first piece each operation sends to each peer and is compared before any byte is used; '1' or 'full' "
    "adds one small all-gather of the fingerprints before every collective (also catches ranks that receive "
    "nothing from the peer that differs); '0' or 'off' checks nothing. Must be equal on all ranks.");
const param::Int kFlightRecorderEntries("COLL_FLIGHT_RECORDER_ENTRIES", 256,
                                        "Operations each rank remembers per communicator (sequence number, kind, "
                                        "count, type, op, root or peer, start and end), for the flight recorder's "
                                        "file. 0: none.");
const param::String kFlightRecorderDir("COLL_FLIGHT_RECORDER_DIR", "",
                                       "Directory where each rank writes its flight recorder "
                                       "(coll-flight-<comm>-rank<r>.json, mode 0600) when an operation fails or the "
                                       "communicator is aborted; coll-flight reads the files of all ranks and says "
                                       "where they diverged. Unset: no file.");

const param::Int kRank("COLL_RANK", -1, "Launcher contract: global rank of this process (set by coll-run).");
const param::Int kWorldSize("COLL_WORLD_SIZE", -1, "Launcher contract: number of ranks in the job.");
const param::Int kLocalRank("COLL_LOCAL_RANK", -1, "Launcher contract: rank of this process on its host.");
const param::Int kLocalSize("COLL_LOCAL_SIZE", -1, "Launcher contract: number of ranks on this host.");
const param::String kMasterAddr("COLL_MASTER_ADDR", "",
                                "Launcher contract: address (or host name) where rank 0 hosts the rendezvous root.");
const param::Int kMasterPort("COLL_MASTER_PORT", -1, "Launcher contract: TCP port of the rendezvous root.");

const param::Int kDeviceEmulationSms(
    "COLL_DEVICE_EMULATION_SMS", 132,
    "Testing only, with COLL_DEVICE_EMULATION: the multiprocessors each emulated device reports, one CTA of the "
    "interpreter each (an H100 SXM's 132 by default), so that tests can run the co-residency limits of a "
    "small GPU.");
const param::Int kDeviceEmulation(
    "COLL_DEVICE_EMULATION", 0,
    "Testing only: N > 0 emulates N CUDA devices on the CPU (device memory is host memory, a stream is a "
    "thread, a kernel's CTAs are threads running the device interpreter's host build), so that the device "
    "data path runs where there is no GPU. Says nothing about a GPU's behaviour.");

const param::String kFaultInject(
    "COLL_FAULT_INJECT", "",
    "Testing only: make this process fail at a named point (init-after-hello: killed "
    "right after it reached the root; init-before-hello: killed before it; corrupt: collectives flip one "
    "output element). <point>:<rank> limits it to one rank.");

}  // namespace coll::params
