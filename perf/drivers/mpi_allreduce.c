/* MPI_Allreduce in nccl-tests' all_reduce_perf format (float sum, out-of-place), for comparing
 * coll with an MPI on the same machine. Same flags as coll-perf: -b -e -f -n -w --max-seconds.
 * Inputs are small integers, so the result is exact and every element is checked. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parseSize(const char* s) {
  char* end;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t minB = 8, maxB = 256 << 20;
  double factor = 2, maxSec = 1.0;
  int iters = 1000, warmup = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b"))
      minB = parseSize(argv[i + 1]);
    else if (!strcmp(argv[i], "-e"))
      maxB = parseSize(argv[i + 1]);
    else if (!strcmp(argv[i], "-f"))
      factor = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "-n"))
      iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-w"))
      warmup = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--max-seconds"))
      maxSec = atof(argv[i + 1]);
  }
  float* in = malloc(maxB);
  float* out = malloc(maxB);
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(version, &len);
    printf("# mpi_allreduce (%.*s), %d ranks\n", (int)strcspn(version, "\n"), version, n);
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop", "root", "time",
           "algbw", "busbw", "#wrong");
  }
  for (size_t bytes = minB; bytes <= maxB; bytes = (size_t)(bytes * factor)) {
    size_t count = bytes / sizeof(float);
    for (size_t i = 0; i < count; ++i) in[i] = (float)(((size_t)rank * 7 + i * 13) % 16) - 7;
    memset(out, 0xa5, bytes);
    MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += (float)(((size_t)r * 7 + i * 13) % 16) - 7;
      wrong += out[i] != want;
    }
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = MPI_Wtime(), one;
    MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    t = MPI_Wtime() - t;
    MPI_Allreduce(&t, &one, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int it = iters;
    if (one * it > maxSec) it = (int)fmax(1, maxSec / one);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < it; ++i) MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mine = (MPI_Wtime() - t0) / it * 1e6, sum;
    long allWrong;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&wrong, &allWrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    double us = sum / n, alg = bytes / us / 1e3;
    if (rank == 0)
      printf("  %10zu  %12zu  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f  %6ld\n", bytes, count, "float", "sum", -1, us, alg,
             alg * 2.0 * (n - 1) / n, allWrong);
    if (bytes == maxB) break;
  }
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
