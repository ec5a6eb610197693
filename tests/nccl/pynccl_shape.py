#!/usr/bin/env python3
"""A program shaped like vLLM's PyNccl: NCCL's C API through ctypes, each function bound by hand,
run on coll's libnccl.so.2 with two ranks as threads on host memory. It calls what NCCL 2.30 added
and what PyNccl, nccl-tests and PyTorch need at init: ncclMemAlloc buffers, registered (nccl-tests'
-R 1) and as windows (-R 2), every collective on them checked exactly,
suspend/resume and memory statistics, the parameter API, communicator properties and teams, and
the device-API and one-sided calls, which must refuse with ncclInvalidUsage and a sentence.

    python3 pynccl_shape.py path/to/libnccl.so.2
"""
import ctypes as C
import os
import sys
import threading

os.environ["NCCL_BUFFSIZE"] = "1048576"  # read through coll's twin COLL_BUFFSIZE (no setenv by coll)
os.environ.pop("COLL_BUFFSIZE", None)
lib = C.CDLL(sys.argv[1])
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAILED:", what, flush=True)


class UniqueId(C.Structure):
    _fields_ = [("internal", C.c_char * 128)]


class Team(C.Structure):
    _fields_ = [("nRanks", C.c_int), ("rank", C.c_int), ("stride", C.c_int)]


class Properties(C.Structure):
    _fields_ = [("size", C.c_size_t), ("magic", C.c_uint), ("version", C.c_uint), ("rank", C.c_int),
                ("nRanks", C.c_int), ("cudaDev", C.c_int), ("nvmlDev", C.c_int), ("deviceApiSupport", C.c_bool),
                ("multimemSupport", C.c_bool), ("ginType", C.c_int), ("nLsaTeams", C.c_int),
                ("hostRmaSupport", C.c_bool), ("railedGinType", C.c_int)]


# The bindings, as PyNccl writes them: argument and result types by hand.
lib.ncclGetErrorString.restype = C.c_char_p
lib.ncclGetLastError.restype = C.c_char_p
lib.ncclGetLastError.argtypes = [C.c_void_p]
lib.ncclCommInitRank.argtypes = [C.POINTER(C.c_void_p), C.c_int, UniqueId, C.c_int]
lib.ncclAllReduce.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t, C.c_int, C.c_int, C.c_void_p, C.c_void_p]
lib.ncclCommRegister.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t, C.POINTER(C.c_void_p)]
lib.ncclCommDeregister.argtypes = [C.c_void_p, C.c_void_p]
lib.ncclCommWindowRegister.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t, C.POINTER(C.c_void_p), C.c_int]
lib.ncclCommWindowDeregister.argtypes = [C.c_void_p, C.c_void_p]
lib.ncclWinGetUserPtr.argtypes = [C.c_void_p, C.c_void_p, C.POINTER(C.c_void_p)]
lib.ncclMemAlloc.argtypes = [C.POINTER(C.c_void_p), C.c_size_t]
lib.ncclMemFree.argtypes = [C.c_void_p]
lib.ncclCommSuspend.argtypes = [C.c_void_p, C.c_int]
lib.ncclCommResume.argtypes = [C.c_void_p]
lib.ncclCommMemStats.argtypes = [C.c_void_p, C.c_int, C.POINTER(C.c_uint64)]
lib.ncclCommQueryProperties.argtypes = [C.c_void_p, C.POINTER(Properties)]
lib.ncclTeamWorld.argtypes = [C.c_void_p]
lib.ncclTeamWorld.restype = Team
lib.ncclTeamLsa.argtypes = [C.c_void_p]
lib.ncclTeamLsa.restype = Team
lib.ncclTeamRankToWorld.argtypes = [C.c_void_p, Team, C.c_int]
lib.ncclPutSignal.argtypes = [C.c_void_p, C.c_size_t, C.c_int, C.c_int, C.c_void_p, C.c_size_t, C.c_int, C.c_int,
                              C.c_uint, C.c_void_p, C.c_void_p]
lib.ncclWaitSignal.argtypes = [C.c_int, C.c_void_p, C.c_void_p, C.c_void_p]
lib.ncclDevCommCreate.argtypes = [C.c_void_p, C.c_void_p, C.c_void_p]
lib.ncclCommGrow.argtypes = [C.c_void_p, C.c_int, C.c_void_p, C.c_int, C.POINTER(C.c_void_p), C.c_void_p]
lib.ncclCommFinalize.argtypes = [C.c_void_p]
lib.ncclCommDestroy.argtypes = [C.c_void_p]
lib.ncclCommCount.argtypes = [C.c_void_p, C.POINTER(C.c_int)]
lib.ncclParamBind.argtypes = [C.POINTER(C.c_void_p), C.c_char_p]
lib.ncclParamGetI64.argtypes = [C.c_void_p, C.POINTER(C.c_int64)]
lib.ncclParamGetI8.argtypes = [C.c_void_p, C.POINTER(C.c_int8)]
lib.ncclParamGetStr.argtypes = [C.c_void_p, C.POINTER(C.c_char_p)]
lib.ncclParamGetParameter.argtypes = [C.c_char_p, C.POINTER(C.c_char_p), C.POINTER(C.c_int)]
lib.ncclParamGetAllParameterKeys.argtypes = [C.POINTER(C.POINTER(C.c_char_p)), C.POINTER(C.c_int)]

SUCCESS, INVALID_ARGUMENT, INVALID_USAGE = 0, 4, 5
FLOAT32, FLOAT8E4M3, SUM = 7, 10, 0
N = 1031  # odd: no size that splits evenly


def last():
    return lib.ncclGetLastError(None).decode()


# NCCL's last error is the process's: the two rank threads take turns for a call whose sentence
# is checked, or one would read the other's.
say = threading.Lock()


def refused(call, want, words, what):
    with say:
        got = call()
        text = last()
    expect(got == want, f"{what}: result {got}, want {want}")
    expect(words in text, f"{what}: last error {text!r} lacks {words!r}")


for name in ("ncclBroadcast", "ncclReduce"):
    getattr(lib, name).argtypes = [C.c_void_p, C.c_void_p, C.c_size_t, C.c_int] + \
        ([C.c_int] if name == "ncclReduce" else []) + [C.c_int, C.c_void_p, C.c_void_p]
lib.ncclAllGather.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t, C.c_int, C.c_void_p, C.c_void_p]
lib.ncclReduceScatter.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t, C.c_int, C.c_int, C.c_void_p, C.c_void_p]
lib.ncclAlltoAll.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t, C.c_int, C.c_void_p, C.c_void_p]
lib.ncclSend.argtypes = [C.c_void_p, C.c_size_t, C.c_int, C.c_int, C.c_void_p, C.c_void_p]
lib.ncclRecv.argtypes = [C.c_void_p, C.c_size_t, C.c_int, C.c_int, C.c_void_p, C.c_void_p]


def every_collective(comm, rank, nranks, send, recv, s, d):
    """nccl-tests' collectives on registered ncclMemAlloc buffers, outputs poisoned, exact checks
    (small integers in float32 sum exactly). s holds rank * 1000 + i."""
    per = N // nranks  # elements per rank for the sized-by-rank collectives

    def run(what, call, want):
        for i in range(N):
            d[i] = -1.0
        r = call()
        expect(r == SUCCESS, f"rank {rank}: {what}: {r} {last()}")
        got = [d[i] for i in range(len(want))]
        expect(got == want, f"rank {rank}: {what} differs at {next((i for i in range(len(want)) if got[i] != want[i]), -1)}")

    val = lambda q, i: float(q * 1000 + i)
    run("broadcast from 1", lambda: lib.ncclBroadcast(send, recv, N, FLOAT32, 1, comm, None), [val(1, i) for i in range(N)])
    if rank == 0:
        run("reduce to 0", lambda: lib.ncclReduce(send, recv, N, FLOAT32, SUM, 0, comm, None),
            [sum(val(q, i) for q in range(nranks)) for i in range(N)])
    else:
        expect(lib.ncclReduce(send, recv, N, FLOAT32, SUM, 0, comm, None) == SUCCESS, "reduce (not root)")
    run("all-gather", lambda: lib.ncclAllGather(send, recv, per, FLOAT32, comm, None),
        [val(q, i) for q in range(nranks) for i in range(per)])
    run("reduce-scatter", lambda: lib.ncclReduceScatter(send, recv, per, FLOAT32, SUM, comm, None),
        [sum(val(q, rank * per + i) for q in range(nranks)) for i in range(per)])
    run("all-to-all", lambda: lib.ncclAlltoAll(send, recv, per, FLOAT32, comm, None),
        [val(q, rank * per + i) for q in range(nranks) for i in range(per)])
    peer = (rank + 1) % nranks

    def sendrecv():
        lib.ncclGroupStart()
        a = lib.ncclSend(send, N, FLOAT32, peer, comm, None)
        b = lib.ncclRecv(recv, N, FLOAT32, (rank - 1) % nranks, comm, None)
        c = lib.ncclGroupEnd()
        return a or b or c
    run("send/recv ring", sendrecv, [val((rank - 1) % nranks, i) for i in range(N)])


def rank_main(rank, nranks, uid, out):
    comm = C.c_void_p()
    r = lib.ncclCommInitRank(C.byref(comm), nranks, uid, rank)
    expect(r == SUCCESS, f"rank {rank}: init {r} {last()}")
    if r != SUCCESS:
        return
    nbytes = N * 4
    # ncclMemAlloc buffers, registered, as nccl-tests allocates and -R 1 registers them.
    send, recv = C.c_void_p(), C.c_void_p()
    expect(lib.ncclMemAlloc(C.byref(send), nbytes) == SUCCESS, "ncclMemAlloc send")
    expect(lib.ncclMemAlloc(C.byref(recv), nbytes) == SUCCESS, "ncclMemAlloc recv")
    s = (C.c_float * N).from_address(send.value)
    d = (C.c_float * N).from_address(recv.value)
    for i in range(N):
        s[i] = float(rank * 1000 + i)
        d[i] = -1.0  # poisoned
    h1, h2 = C.c_void_p(), C.c_void_p()
    expect(lib.ncclCommRegister(comm, send, nbytes, C.byref(h1)) == SUCCESS, "register send")
    expect(lib.ncclCommRegister(comm, recv, nbytes, C.byref(h2)) == SUCCESS, "register recv")
    expect(lib.ncclAllReduce(send, recv, N, FLOAT32, SUM, comm, None) == SUCCESS, f"all-reduce {last()}")
    want = [float(sum(q * 1000 + i for q in range(nranks))) for i in range(N)]
    expect(list(d) == want, f"rank {rank}: all-reduce on registered ncclMemAlloc buffers differs")
    # A window over the receive buffer (collective), used in place.
    win, ptr = C.c_void_p(), C.c_void_p()
    expect(lib.ncclCommWindowRegister(comm, recv, nbytes, C.byref(win), 1) == SUCCESS, f"window {last()}")
    expect(lib.ncclWinGetUserPtr(comm, win, C.byref(ptr)) == SUCCESS and ptr.value == recv.value, "win user ptr")
    expect(lib.ncclAllReduce(recv, recv, N, FLOAT32, SUM, comm, None) == SUCCESS, "in-place all-reduce on a window")
    expect(list(d) == [nranks * w for w in want], f"rank {rank}: all-reduce on a window differs")
    # One-sided (NCCL 2.29): each rank puts one float into the next rank's window at its own slot,
    # with a signal, and waits for the previous rank's. First a barrier: no rank may put into a
    # window whose owner still reads the all-reduce above.
    token = (C.c_float * 1)(1.0)
    expect(lib.ncclAllReduce(token, token, 1, FLOAT32, SUM, comm, None) == SUCCESS, "barrier")
    mine = (C.c_float * 1)(rank + 0.5)
    nxt, prv = (rank + 1) % nranks, (rank - 1) % nranks
    expect(lib.ncclPutSignal(mine, 1, FLOAT32, nxt, win, 4 * rank, 0, 0, 0, comm, None) == SUCCESS,
           f"ncclPutSignal {last()}")
    desc = (C.c_int * 4)(1, prv, 0, 0)  # ncclWaitSignalDesc_t {opCnt, peer, sigIdx, ctx}
    expect(lib.ncclWaitSignal(1, desc, comm, None) == SUCCESS, f"ncclWaitSignal {last()}")
    expect(d[prv] == prv + 0.5, f"rank {rank}: the put from rank {prv} holds {d[prv]}")
    refused(lambda: lib.ncclPutSignal(mine, 1, FLOAT32, nxt, win, nbytes, 0, 0, 0, comm, None), INVALID_ARGUMENT,
            "pass the end", "ncclPutSignal past the window")
    expect(lib.ncclCommWindowDeregister(comm, win) == SUCCESS, "window deregister")
    every_collective(comm, rank, nranks, send, recv, s, d)
    # Suspend: no data calls until resumed; the statistics say so.
    v = C.c_uint64(7)
    expect(lib.ncclCommSuspend(comm, 1) == SUCCESS, f"suspend {last()}")
    expect(lib.ncclCommMemStats(comm, 1, C.byref(v)) == SUCCESS and v.value == 1, "suspended stat 1")
    refused(lambda: lib.ncclAllReduce(send, recv, N, FLOAT32, SUM, comm, None), INVALID_USAGE, "suspended", "all-reduce while suspended")
    expect(lib.ncclCommResume(comm) == SUCCESS, "resume")
    expect(lib.ncclCommMemStats(comm, 1, C.byref(v)) == SUCCESS and v.value == 0, "suspended stat 0")
    expect(lib.ncclCommMemStats(comm, 3, C.byref(v)) == SUCCESS and v.value == 0, "no device memory on a host comm")
    refused(lambda: lib.ncclCommMemStats(comm, 9, C.byref(v)), INVALID_ARGUMENT, "ncclCommMemStat_t", "stat 9")
    expect(lib.ncclAllReduce(send, recv, N, FLOAT32, SUM, comm, None) == SUCCESS, "all-reduce after resume")
    expect(list(d) == want, f"rank {rank}: all-reduce after resume differs")
    # float8 e4m3 (vLLM's float8 collectives): 1.0 is 0x38, 2.0 0x40, 3.0 0x44, 4.0 0x48.
    e4m3 = {1: 0x38, 2: 0x40, 3: 0x44, 4: 0x48}
    b_s, b_d = (C.c_uint8 * N).from_address(send.value), (C.c_uint8 * N).from_address(recv.value)
    for i in range(N):
        b_s[i], b_d[i] = e4m3[1], 0xff
    expect(lib.ncclAllReduce(send, recv, N, FLOAT8E4M3, SUM, comm, None) == SUCCESS, f"float8 all-reduce {last()}")
    expect(all(b_d[i] == e4m3[nranks] for i in range(N)), f"rank {rank}: float8 all-reduce differs")
    for i in range(8):
        b_s[i] = e4m3[rank + 1]
    expect(lib.ncclAllGather(send, recv, 8, FLOAT8E4M3, comm, None) == SUCCESS, f"float8 all-gather {last()}")
    expect([b_d[i] for i in range(8 * nranks)] == [e4m3[q + 1] for q in range(nranks) for _ in range(8)],
           f"rank {rank}: float8 all-gather differs")
    # Properties and teams.
    p = Properties(C.sizeof(Properties), 0xCAFEBEEF, 23007)
    expect(lib.ncclCommQueryProperties(comm, C.byref(p)) == SUCCESS, f"properties {last()}")
    expect((p.rank, p.nRanks, p.deviceApiSupport, p.size) == (rank, nranks, False, C.sizeof(Properties)),
           f"properties {p.rank} {p.nRanks} {p.deviceApiSupport}")
    world = lib.ncclTeamWorld(comm)
    expect((world.nRanks, world.rank, world.stride) == (nranks, rank, 1), "ncclTeamWorld")
    lsa = lib.ncclTeamLsa(comm)
    expect((lsa.nRanks, lsa.rank) == (1, 0), "ncclTeamLsa: the rank alone")
    expect(lib.ncclTeamRankToWorld(comm, world, nranks - 1) == nranks - 1, "ncclTeamRankToWorld")
    # What coll does not do: refused, with the reason.
    refused(lambda: lib.ncclDevCommCreate(comm, None, None), INVALID_USAGE, "device API", "ncclDevCommCreate")
    newcomm = C.c_void_p(1)
    refused(lambda: lib.ncclCommGrow(comm, nranks + 1, None, -1, C.byref(newcomm), None), INVALID_USAGE, "growing",
            "ncclCommGrow")
    expect(newcomm.value is None, "ncclCommGrow left a communicator")
    expect(lib.ncclCommDeregister(comm, h1) == SUCCESS and lib.ncclCommDeregister(comm, h2) == SUCCESS, "deregister")
    expect(lib.ncclMemFree(send) == SUCCESS and lib.ncclMemFree(recv) == SUCCESS, "ncclMemFree")
    expect(lib.ncclCommFinalize(comm) == SUCCESS, f"finalize {last()}")
    expect(lib.ncclCommDestroy(comm) == SUCCESS, "destroy")
    out[rank] = True


def main():
    version = C.c_int()
    expect(lib.ncclGetVersion(C.byref(version)) == SUCCESS and version.value == 23007, f"version {version.value}")
    expect(lib.ncclGetErrorString(6) == b"remote process exited or there was a network error", "NCCL's strings")
    # One last error per process: a failure on this thread is read on another.
    count = C.c_int()
    expect(lib.ncclCommCount(None, C.byref(count)) == INVALID_ARGUMENT, "ncclCommCount(NULL)")
    seen = []
    t = threading.Thread(target=lambda: seen.append(last()))
    t.start()
    t.join()
    expect("NULL" in seen[0], f"the last error read on another thread: {seen[0]!r}")
    # Parameters: coll's, read through NCCL's names and twins.
    h = C.c_void_p()
    expect(lib.ncclParamBind(C.byref(h), b"NCCL_BUFFSIZE") == SUCCESS, f"bind {last()}")
    i64, i8, text = C.c_int64(), C.c_int8(), C.c_char_p()
    expect(lib.ncclParamGetI64(h, C.byref(i64)) == SUCCESS and i64.value == 1048576, f"BUFFSIZE {i64.value}")
    refused(lambda: lib.ncclParamGetI8(h, C.byref(i8)), INVALID_ARGUMENT, "8 bits", "1048576 as int8")
    expect(lib.ncclParamGetStr(h, C.byref(text)) == SUCCESS and text.value == b"1048576", "as a string")
    refused(lambda: lib.ncclParamBind(C.byref(h), b"NCCL_NO_SUCH_THING"), INVALID_ARGUMENT, "no parameter", "unknown key")
    val, n = C.c_char_p(), C.c_int()
    expect(lib.ncclParamGetParameter(b"TIMEOUT_MS", C.byref(val), C.byref(n)) == SUCCESS and val.value.isdigit(),
           "ncclParamGetParameter")
    keys, nkeys = C.POINTER(C.c_char_p)(), C.c_int()
    expect(lib.ncclParamGetAllParameterKeys(C.byref(keys), C.byref(nkeys)) == SUCCESS, "all keys")
    names = [keys[i] for i in range(nkeys.value)]
    expect(b"COLL_TIMEOUT_MS" in names and b"COLL_BUFFSIZE" in names, f"keys {names[:5]}...")
    # Two ranks as threads.
    uid = UniqueId()
    expect(lib.ncclGetUniqueId(C.byref(uid)) == SUCCESS, "unique id")
    done = {}
    threads = [threading.Thread(target=rank_main, args=(r, 2, uid, done)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expect(len(done) == 2, "both ranks finished")
    if failures:
        print(f"pynccl_shape: {len(failures)} failures")
        return 1
    print("pynccl_shape: all checks passed")
    return 0


sys.exit(main())
