/* MPI's one-sided ping-pong, the counterpart of put_pingpong.c: rank 0 writes its bytes and a
 * flag into rank 1's window with MPI_Put and completes them with MPI_Win_flush (passive target,
 * MPI_Win_lock_all), rank 1 polls the flag in its own window (MPI_Win_sync) and answers the same
 * way. The flag is the iteration number, put after the data in the same flushed epoch order
 * (two puts, then one flush: MPI orders neither, so the data goes in a first flushed put).
 * One-way time is half the round trip. Prints "openmpi-put <bytes> B: <us> us one-way".
 *   mpirun -np 2 mpi_put_pingpong [bytes] [iterations] [warmup] */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : 8;
  long iters = argc > 2 ? atol(argv[2]) : 20000, warmup = argc > 3 ? atol(argv[3]) : 1000;
  if (n != 2) {
    fprintf(stderr, "mpi_put_pingpong: 2 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int peer = 1 - rank;
  /* Window: [flag: int64][data: bytes] */
  char* base;
  MPI_Win win;
  MPI_Win_allocate((MPI_Aint)(8 + bytes), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  memset(base, 0, 8 + bytes);
  char* src = malloc(bytes ? bytes : 1);
  memset(src, rank + 1, bytes ? bytes : 1);
  volatile int64_t* flag = (volatile int64_t*)base;
  MPI_Win_lock_all(0, win);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = 0;
  for (long i = -warmup; i < iters; ++i) {
    int64_t stamp = i + warmup + 1;
    if (i == 0) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
    }
    if (rank == 1)
      while (*flag != stamp) MPI_Win_sync(win);
    if (bytes) {
      MPI_Put(src, (int)bytes, MPI_BYTE, peer, 8, (int)bytes, MPI_BYTE, win);
      MPI_Win_flush(peer, win);
    }
    MPI_Put(&stamp, 8, MPI_BYTE, peer, 0, 8, MPI_BYTE, win);
    MPI_Win_flush(peer, win);
    if (rank == 0)
      while (*flag != stamp) MPI_Win_sync(win);
  }
  double us = (MPI_Wtime() - t0) * 1e6 / iters / 2;
  if (bytes && base[8] != (char)(peer + 1)) fprintf(stderr, "mpi_put_pingpong: wrong data\n");
  if (rank == 0) printf("openmpi-put %zu B: %.3f us one-way\n", bytes, us);
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  free(src);
  MPI_Finalize();
  return 0;
}
