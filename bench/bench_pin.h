/* bench_pin.h - CPU placement for the socket benches (Linux, _GNU_SOURCE): start_cpus is the
   affinity the process started with (fill it with sched_getaffinity in main); pin_process(cpu)
   puts every thread of this process on that CPU, or back on start_cpus when cpu < 0. */
#ifndef TFRDV_BENCH_PIN_H
#define TFRDV_BENCH_PIN_H
#include <dirent.h>
#include <sched.h>
#include <stdlib.h>

static cpu_set_t start_cpus;
static int pin_process(int cpu) {
    DIR* d = opendir("/proc/self/task");
    struct dirent* e;
    cpu_set_t set;
    int ok = d != 0;
    if (cpu < 0) set = start_cpus;
    else {
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
    }
    while (d && (e = readdir(d)) != 0) {
        int tid = atoi(e->d_name);
        if (tid > 0 && sched_setaffinity(tid, sizeof set, &set) != 0) ok = 0;
    }
    if (d) closedir(d);
    return ok;
}
#endif
