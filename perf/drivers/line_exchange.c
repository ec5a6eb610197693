/* The floor of a 2-rank 8-byte all-reduce on this machine: two threads, one per core, each
 * storing a counter into its own cache line and spinning until the other's line shows the same
 * counter, as coll's tagged FIFO does (transport/fifo.h) but with nothing else around it.
 * Prints ns per exchange. Usage: line_exchange [iterations] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
  volatile uint64_t tag;
  char pad[56];
} __attribute__((aligned(64))) Line;

static Line lines[2][64];
static long iterations = 2000000;

static double nowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static void* run(void* arg) {
  int me = (int)(long)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(me, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  double t0 = nowNs();
  for (long i = 1; i <= iterations; i++) {
    __atomic_store_n(&lines[me][i % 64].tag, (uint64_t)i, __ATOMIC_RELEASE);
    while (__atomic_load_n(&lines[1 - me][i % 64].tag, __ATOMIC_ACQUIRE) != (uint64_t)i) __builtin_ia32_pause();
  }
  if (me == 0) printf("line exchange: %.1f ns per exchange\n", (nowNs() - t0) / iterations);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) iterations = atol(argv[1]);
  pthread_t t;
  pthread_create(&t, NULL, run, (void*)1);
  run((void*)0);
  pthread_join(t, NULL);
  return 0;
}
