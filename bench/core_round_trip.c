/* Cross-core round trip: two threads pinned to CPUs A and B (default 0 and 1) pass a cache line
 * back and forth; prints the median of 9 samples of one round trip, in ns. On the 2-vCPU VMs this
 * project measures on it is bimodal, ~50 ns or ~360 ns as the host places the vCPUs, and it moves
 * between the two within minutes; every 2-thread latency follows it (face_landmark at 2 threads:
 * 0.55 or 0.94 ms, the same build). bench_real.py and zoo_models.py print it before and after
 * their runs (bench/machine.py builds and runs it); standalone: cc -O2 -pthread core_round_trip.c */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kRounds = 20000, kSamples = 9 };
static _Alignas(64) atomic_long flag;

static cpu_set_t cpus(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return set;
}

static void* echo(void* unused) {
  (void)unused;
  for (long i = 0; i < (long)kRounds * kSamples; ++i) {
    while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 1) {
    }
    atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
  }
  return NULL;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  int a = argc > 1 ? atoi(argv[1]) : 0, b = argc > 2 ? atoi(argv[2]) : 1;
  /* The echo thread is created on its CPU, or not at all (the caller would wait for it forever). */
  cpu_set_t set_a = cpus(a), set_b = cpus(b);
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  if (pthread_setaffinity_np(pthread_self(), sizeof set_a, &set_a) ||
      pthread_attr_setaffinity_np(&attr, sizeof set_b, &set_b) || pthread_create(&t, &attr, echo, NULL)) {
    fprintf(stderr, "cannot run on CPUs %d and %d\n", a, b);
    return 1;
  }
  double samples[kSamples];
  long i = 0;
  for (int s = 0; s < kSamples; ++s) {
    double start = now();
    for (long r = 0; r < kRounds; ++r, ++i) {
      atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
      while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2) {
      }
    }
    samples[s] = (now() - start) / kRounds;
  }
  pthread_join(t, NULL);
  qsort(samples, kSamples, sizeof *samples, cmp);
  printf("%.0f\n", samples[kSamples / 2]);
  return 0;
}
