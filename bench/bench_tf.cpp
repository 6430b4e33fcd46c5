// bench_tf.cpp - `make bench-tf`: TensorFlow's own rendezvous code (libtensorflow_framework.so.2 of
// the tensorflow-cpu wheel) and tfrdv, timed side by side in one process, one run.
//
// Rows (all single-threaded except section 3; keys are pre-parsed outside the timed loops):
//   1. send+recv pair on 1 key and on 1,024 keys: TF LocalRendezvous(owner=nullptr, 1 shard)
//      constructed directly, TF NewLocalRendezvous(1), tfrdv_create(NULL) (its defaults).
//   2. scaling: N sends then N receives on N distinct keys, N = 10^3..10^6, warm (the same table
//      after an untimed run) and cold (a fresh table after malloc_trim(0)); heap bytes (mallinfo2)
//      and resident bytes (/proc/self/statm) per key after the sends and after the receives; page
//      faults per key in the first cold run (getrusage) at what a fault costs on this machine, and
//      the cold rows again with tfrdv's tables created at the size N keys need (min_buckets).
//   3. two threads: a producer sends 10^6 values over K = 1 and K = 64 keys while the consumer
//      posts receives; in >= 5 separate processes (this binary re-executed with --child-two-thread),
//      each also timing a cache line's round trip between two threads before and after, and, with
//      K = 1, a bare spin lock over two preallocated arrays (a hand-off with no table or allocation).
//   4. ParseKey on the 116-byte typical key; CreateKey; CreateKey from a prebuilt prefix (TF exports
//      no prefix function: timed is what its Send/Recv kernels do in a loop frame, StrCat of the
//      prebuilt prefix, ";", frame_id, ":", iter_id).
// Values: a scalar float tensorflow::Tensor for TF (a Send copies it: one buffer reference), a
// tfrdv_value with a NULL release hook for tfrdv (section 3: a ring of values, one retain per send).
// Figures: median of ROUNDS rounds (TF and tfrdv interleaved in every round), min shown; the ratio
// is the median over the rounds of TF time / tfrdv time. The process is multi-threaded: one idle
// thread is started before anything is timed (glibc mutexes take a cheaper path while a process has
// a single thread, which would flatter a lock-based design; real runtimes always have threads).
// Never asserts timings; exits non-zero only when an implementation gives a wrong answer.
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tensorflow/core/framework/local_rendezvous.h"
#include "tensorflow/core/framework/rendezvous.h"
#include "tensorflow/core/framework/tensor.h"
#include "absl/strings/str_cat.h"

#ifndef TF_WHEEL_VERSION
#define TF_WHEEL_VERSION "(version unknown)"
#endif

using tensorflow::Rendezvous;
using tensorflow::Tensor;
typedef Rendezvous::ParsedKey TfKey;

namespace {

const int ROUNDS = 7;                  // timed rounds per row (median reported)
const int64_t GOAL_NS = 60000000;      // one timed repetition of a fast row lasts about this long
const char* const SRC_DEV = "/job:worker/replica:0/task:1/device:CPU:0";
const char* const DST_DEV = "/job:ps/replica:0/task:0/device:GPU:0";
const uint64_t KEY_INC = 0x75bcd15u;
const char* const TYPICAL_KEY =
    "/job:worker/replica:0/task:1/device:CPU:0;00000000075bcd15;/job:ps/replica:0/task:0/device:GPU:0;edge_17_weights;0:0";

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "bench_tf: %s\n", what.c_str());
    std::exit(1);
}
volatile uint64_t g_sink;

// ---- the idle thread -------------------------------------------------------------------------
void start_idle_thread() {
    // pause() sleeps until a signal; the thread never touches an object that exit() destroys
    std::thread([] {
        for (;;) pause();
    }).detach();
}
double loadavg() {
    double l = -1;
    FILE* f = std::fopen("/proc/loadavg", "r");
    if (f) {
        if (std::fscanf(f, "%lf", &l) != 1) l = -1;
        std::fclose(f);
    }
    return l;
}
int thread_count() {
    FILE* f = std::fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "Threads: %d", &n) == 1) break;
    if (f) std::fclose(f);
    return n;
}

// ---- keys ------------------------------------------------------------------------------------
// n keys; key 0 is the typical key, key i > 0 differs in its edge name (edge_<100000+i>_weights).
struct KeySet {
    std::vector<std::string> text;
    std::vector<tfrdv_parsed_key> rdv; // views into text
    std::vector<TfKey> tf;
    void make(size_t n) {
        text.resize(n);
        rdv.resize(n);
        tf.resize(n);
        for (size_t i = 0; i < n; i++) {
            char edge[48], buf[256];
            size_t len = 0;
            tfrdv_status st;
            if (i == 0) std::snprintf(edge, sizeof edge, "edge_17_weights");
            else std::snprintf(edge, sizeof edge, "edge_%zu_weights", 100000 + i);
            if (tfrdv_key_create(SRC_DEV, KEY_INC, DST_DEV, edge, tfrdv_frame_iter{0, 0}, buf, sizeof buf, &len, &st) != TFRDV_OK)
                die(st.msg);
            text[i].assign(buf, len);
            if (text[i] != Rendezvous::CreateKey(SRC_DEV, KEY_INC, DST_DEV, edge, tensorflow::FrameAndIter(0, 0)))
                die("tfrdv and TensorFlow create different keys");
        }
        for (size_t i = 0; i < n; i++) {
            tfrdv_status st;
            if (tfrdv_key_parse(text[i].data(), text[i].size(), &rdv[i], &st) != TFRDV_OK) die(st.msg);
            if (!Rendezvous::ParseKey(text[i], &tf[i]).ok()) die("TF ParseKey failed");
        }
        if (n && text[0] != TYPICAL_KEY) die("key set does not start with the typical key");
    }
};

// ---- measurement -----------------------------------------------------------------------------
// A body runs `iters` operations and returns the nanoseconds it measured.
struct Job {
    std::function<int64_t(long)> fn;
    long iters = 0;
    double ns[ROUNDS] = {};
};
double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n & 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double med(const Job& j) { return median(std::vector<double>(j.ns, j.ns + ROUNDS)); }
double mn(const Job& j) { return *std::min_element(j.ns, j.ns + ROUNDS); }
double ratio(const Job& tf, const Job& rdv) {
    std::vector<double> v;
    for (int r = 0; r < ROUNDS; r++) v.push_back(tf.ns[r] / rdv.ns[r]);
    return median(v);
}
void calibrate(Job& j) {
    long n = 256;
    int64_t t;
    for (;;) {
        t = j.fn(n);
        if (t >= GOAL_NS / 4 || n > (1L << 36)) break;
        n *= t < GOAL_NS / 64 ? 8 : 2;
    }
    j.iters = static_cast<long>(static_cast<double>(n) * GOAL_NS / static_cast<double>(std::max<int64_t>(t, 1))) + 1;
}
// Calibrates every job, then ROUNDS rounds, each running every job once (interleaved).
void measure(std::vector<Job*> jobs) {
    for (Job* j : jobs) calibrate(*j);
    for (int r = 0; r < ROUNDS; r++)
        for (Job* j : jobs) j->ns[r] = static_cast<double>(j->fn(j->iters)) / static_cast<double>(j->iters);
}

// ---- table -----------------------------------------------------------------------------------
int g_met = 0, g_missed = 0;
void header() {
    std::printf("%-46s %-22s %-22s %-8s %-8s %s\n", "benchmark", "TensorFlow med (min)", "tfrdv med (min)", "TF/tfrdv",
                "target", "met");
    std::printf("%-46s %-22s %-22s %-8s %-8s %s\n", "---------", "--------------------", "---------------", "--------",
                "------", "---");
}
std::string fmt_ns(double med_ns, double min_ns) {
    char b[64];
    std::snprintf(b, sizeof b, "%.1f (%.1f) ns", med_ns, min_ns);
    return b;
}
void row(const std::string& name, const std::string& tf, const std::string& rdv, double r, double target) {
    char rs[32], ts[32];
    std::snprintf(rs, sizeof rs, "%.2fx", r);
    if (target > 0) std::snprintf(ts, sizeof ts, ">=%.1fx", target);
    else std::snprintf(ts, sizeof ts, "-");
    const char* met = target > 0 ? (r >= target ? "yes" : "NO") : "info";
    if (target > 0) (r >= target ? g_met : g_missed)++;
    std::printf("%-46s %-22s %-22s %-8s %-8s %s\n", name.c_str(), tf.c_str(), rdv.c_str(), rs, ts, met);
    std::fflush(stdout);
}
void time_row(const std::string& name, const Job& tf, const Job& rdv, double target) {
    row(name, fmt_ns(med(tf), mn(tf)), fmt_ns(med(rdv), mn(rdv)), ratio(tf, rdv), target);
}

// ---- TensorFlow side -------------------------------------------------------------------------
// One interface over LocalRendezvous (direct) and the refcounted NewLocalRendezvous wrapper.
struct TfTable {
    std::unique_ptr<tensorflow::LocalRendezvous> local;
    Rendezvous* wrapped = nullptr;
    static TfTable direct() {
        TfTable t;
        t.local.reset(new tensorflow::LocalRendezvous(nullptr, 1));
        return t;
    }
    static TfTable made() {
        TfTable t;
        t.wrapped = tensorflow::NewLocalRendezvous(1);
        return t;
    }
    TfTable() = default;
    TfTable(TfTable&& o) noexcept : local(std::move(o.local)), wrapped(o.wrapped) { o.wrapped = nullptr; }
    ~TfTable() {
        if (wrapped) wrapped->Unref();
    }
    absl::Status send(const TfKey& k, const Rendezvous::Args& a, const Tensor& v) {
        return local ? local->Send(k, a, v, false) : wrapped->Send(k, a, v, false);
    }
    void recv(const TfKey& k, const Rendezvous::Args& a, Rendezvous::DoneCallback done) {
        if (local) local->RecvAsync(k, a, std::move(done));
        else wrapped->RecvAsync(k, a, std::move(done));
    }
};

struct Counter {
    long got = 0, errors = 0;
};
Rendezvous::DoneCallback tf_counting(Counter* c) {
    return [c](const absl::Status& s, const Rendezvous::Args&, const Rendezvous::Args&, const Tensor& t, bool) {
        if (!s.ok() || t.NumElements() != 1) c->errors++;
        c->got++;
    };
}
void rdv_count_done(void* user, const tfrdv_status* st, const tfrdv_args*, const tfrdv_args*, tfrdv_value* v, int) {
    Counter* c = static_cast<Counter*>(user);
    if (st->code != TFRDV_OK || !v) c->errors++;
    c->got++;
    tfrdv_value_release(v);
}
void check(const Counter& c, long want, const char* what) {
    if (c.got != want || c.errors) die(std::string(what) + ": wrong number of receives or a failed receive");
}

// min_buckets 0: tfrdv's defaults
tfrdv_rendezvous* rdv_create(int min_buckets = 0) {
    tfrdv_rendezvous* r = nullptr;
    tfrdv_status st;
    tfrdv_config c = tfrdv_config_init();
    c.min_buckets = min_buckets;
    if (tfrdv_create(&c, &r, &st) != TFRDV_OK) die(st.msg);
    return r;
}

// =============================================================================================
// 1. single-thread pair
// =============================================================================================
void bench_pairs(KeySet& ks) {
    std::printf("1. single thread: send then recv_async on the same key, keys round-robin (ns per pair); TF tables\n"
                "   have 1 shard (NewLocalRendezvous's default), tfrdv_create(NULL) its defaults\n");
    Tensor tval(1.0f);
    Rendezvous::Args args;
    float data = 1.0f;
    int64_t dims[1] = {1};
    tfrdv_value rval;
    std::memset(&rval, 0, sizeof rval);
    rval.dtype = 1;
    rval.rank = 0;
    rval.dims = dims;
    rval.data = &data;
    rval.size = sizeof data;
    for (int nkeys : {1, 1024}) {
        unsigned mask = static_cast<unsigned>(nkeys) - 1;
        TfTable direct = TfTable::direct(), made = TfTable::made();
        tfrdv_rendezvous* r = rdv_create();
        auto tf_loop = [&](TfTable* t) {
            return [&, t](long iters) {
                Counter c;
                int64_t t0 = now_ns();
                for (long i = 0; i < iters; i++) {
                    const TfKey& k = ks.tf[static_cast<unsigned>(i) & mask];
                    if (!t->send(k, args, tval).ok()) die("TF send failed");
                    t->recv(k, args, tf_counting(&c));
                }
                int64_t el = now_ns() - t0;
                check(c, iters, "TF pair");
                return el;
            };
        };
        Job jd, jm, jr;
        jd.fn = tf_loop(&direct);
        jm.fn = tf_loop(&made);
        jr.fn = [&](long iters) {
            Counter c;
            int64_t t0 = now_ns();
            for (long i = 0; i < iters; i++) {
                const tfrdv_parsed_key* k = &ks.rdv[static_cast<unsigned>(i) & mask];
                if (tfrdv_send(r, k, nullptr, &rval, 0, nullptr) != TFRDV_OK) die("tfrdv_send failed");
                if (tfrdv_recv_async(r, k, nullptr, rdv_count_done, &c, 0) != TFRDV_OK) die("tfrdv_recv_async refused");
            }
            int64_t el = now_ns() - t0;
            check(c, iters, "tfrdv pair");
            return el;
        };
        measure({&jd, &jm, &jr});
        std::string n = nkeys == 1 ? "1 key" : "1,024 keys";
        time_row("pair, " + n + ": TF LocalRendezvous (direct)", jd, jr, 3.0);
        time_row("pair, " + n + ": TF NewLocalRendezvous(1)", jm, jr, 3.0);
        tfrdv_destroy(r);
    }
}

// =============================================================================================
// 2. scaling
// =============================================================================================
struct Mem {
    int64_t heap, rss, faults; // faults: minor page faults of the process so far
};
Mem mem_now() {
    struct mallinfo2 mi = mallinfo2();
    long pages = 0, resident = 0;
    FILE* f = std::fopen("/proc/self/statm", "r");
    if (!f || std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    if (f) std::fclose(f);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return Mem{static_cast<int64_t>(mi.uordblks + mi.hblkhd), static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE),
               static_cast<int64_t>(ru.ru_minflt)};
}
// what one minor page fault costs here: touch every page of fresh anonymous memory (best of 3)
double fault_ns() {
    const size_t bytes = size_t(64) << 20, page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    double best = 1e30;
    for (int k = 0; k < 3; k++) {
        void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) die("mmap");
        volatile char* p = static_cast<volatile char*>(m);
        int64_t t0 = now_ns();
        for (size_t i = 0; i < bytes; i += page) p[i] = 1;
        best = std::min(best, static_cast<double>(now_ns() - t0) / static_cast<double>(bytes / page));
        munmap(m, bytes);
    }
    return best;
}
struct ScaleRun {
    double send_ns, recv_ns;   // per key
    Mem before, sent, received; // around the run
};
// N sends then N receives on keys 0..N-1
ScaleRun tf_scale(TfTable& t, KeySet& ks, size_t n, const Tensor& v) {
    Rendezvous::Args args;
    Counter c;
    ScaleRun s;
    s.before = mem_now();
    int64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++)
        if (!t.send(ks.tf[i], args, v).ok()) die("TF send failed");
    int64_t t1 = now_ns();
    s.sent = mem_now();
    int64_t t2 = now_ns();
    for (size_t i = 0; i < n; i++) t.recv(ks.tf[i], args, tf_counting(&c));
    int64_t t3 = now_ns();
    s.received = mem_now();
    check(c, static_cast<long>(n), "TF scaling");
    s.send_ns = static_cast<double>(t1 - t0) / static_cast<double>(n);
    s.recv_ns = static_cast<double>(t3 - t2) / static_cast<double>(n);
    return s;
}
ScaleRun rdv_scale(tfrdv_rendezvous* r, KeySet& ks, size_t n, tfrdv_value* v) {
    Counter c;
    ScaleRun s;
    s.before = mem_now();
    int64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++)
        if (tfrdv_send(r, &ks.rdv[i], nullptr, v, 0, nullptr) != TFRDV_OK) die("tfrdv_send failed");
    int64_t t1 = now_ns();
    s.sent = mem_now();
    int64_t t2 = now_ns();
    for (size_t i = 0; i < n; i++)
        if (tfrdv_recv_async(r, &ks.rdv[i], nullptr, rdv_count_done, &c, 0) != TFRDV_OK) die("tfrdv_recv_async refused");
    int64_t t3 = now_ns();
    s.received = mem_now();
    check(c, static_cast<long>(n), "tfrdv scaling");
    s.send_ns = static_cast<double>(t1 - t0) / static_cast<double>(n);
    s.recv_ns = static_cast<double>(t3 - t2) / static_cast<double>(n);
    return s;
}

void bench_scaling(KeySet& ks) {
    std::printf("\n2. scaling: N sends, then N receives, N distinct pre-parsed keys (ns per key = send + receive)\n"
                "   warm: the same table again after an untimed run; cold: a fresh table after malloc_trim(0)\n");
    Tensor tval(1.0f);
    float data = 1.0f;
    tfrdv_value rval;
    std::memset(&rval, 0, sizeof rval);
    rval.dtype = 1;
    rval.data = &data;
    rval.size = sizeof data;
    struct MemRow {
        size_t n;
        ScaleRun tf, rdv;  // the first cold run of each
        double tf_cold, rdv_cold; // medians, ns/key
        double sized_cold, sized_ratio; // tfrdv with min_buckets for N keys: median ns/key, TF / it
    };
    std::vector<MemRow> mems;
    for (size_t n : {size_t(1000), size_t(10000), size_t(100000), size_t(1000000)}) {
        // several runs per timed repetition at small N, so a repetition is not a few microseconds
        int reps = n >= 100000 ? 1 : static_cast<int>(100000 / n);
        Job tw, rw, tc, rc;
        // warm
        {
            TfTable t = TfTable::direct();
            tfrdv_rendezvous* r = rdv_create();
            tf_scale(t, ks, n, tval);
            rdv_scale(r, ks, n, &rval);
            for (int round = 0; round < ROUNDS; round++) {
                double a = 0, b = 0;
                for (int k = 0; k < reps; k++) {
                    ScaleRun s = tf_scale(t, ks, n, tval);
                    a += s.send_ns + s.recv_ns;
                }
                for (int k = 0; k < reps; k++) {
                    ScaleRun s = rdv_scale(r, ks, n, &rval);
                    b += s.send_ns + s.recv_ns;
                }
                tw.ns[round] = a / reps;
                rw.ns[round] = b / reps;
            }
            tfrdv_destroy(r);
        }
        // cold
        MemRow m{n, {}, {}, 0, 0, 0, 0};
        // a table created at the size N keys need (4 shards, at most 3/4 full): no growth, no shrink
        int sized = 1;
        while (static_cast<size_t>(sized) * 3 < n) sized <<= 1;
        Job sc;
        // reps cold tfrdv runs, ns/key on average; the first one's figures into *first when given
        auto rdv_cold = [&](int min_buckets, ScaleRun* first) {
            double b = 0;
            for (int k = 0; k < reps; k++) {
                malloc_trim(0);
                tfrdv_rendezvous* r = rdv_create(min_buckets);
                ScaleRun s = rdv_scale(r, ks, n, &rval);
                b += s.send_ns + s.recv_ns;
                if (first && k == 0) *first = s;
                tfrdv_destroy(r);
            }
            return b / reps;
        };
        for (int round = 0; round < ROUNDS; round++) {
            double a = 0;
            for (int k = 0; k < reps; k++) {
                malloc_trim(0);
                TfTable t = TfTable::direct();
                ScaleRun s = tf_scale(t, ks, n, tval);
                a += s.send_ns + s.recv_ns;
                if (round == 0 && k == 0) m.tf = s;
            }
            tc.ns[round] = a / reps;
            rc.ns[round] = rdv_cold(0, round == 0 ? &m.rdv : nullptr);
            sc.ns[round] = rdv_cold(sized, nullptr);
        }
        m.tf_cold = med(tc);
        m.rdv_cold = med(rc);
        m.sized_cold = med(sc);
        m.sized_ratio = ratio(tc, sc);
        mems.push_back(m);
        char name[64];
        std::snprintf(name, sizeof name, "scaling N=%zu, warm", n);
        time_row(name, tw, rw, 2.0);
        std::snprintf(name, sizeof name, "scaling N=%zu, cold", n);
        time_row(name, tc, rc, 2.0);
    }
    std::printf("   memory per key, first cold run (heap = mallinfo2 in-use bytes incl. mmapped; rss = /proc/self/statm):\n");
    std::printf("   %-9s %-34s %-34s %s\n", "N", "TF heap B/key sent -> received", "tfrdv heap B/key sent -> received",
                "rss B/key sent -> received (TF | tfrdv)");
    for (const MemRow& m : mems) {
        double n = static_cast<double>(m.n);
        auto per = [&](const ScaleRun& s, int64_t Mem::*f, bool after_recv) {
            return static_cast<double>((after_recv ? s.received.*f : s.sent.*f) - s.before.*f) / n;
        };
        char a[64], b[64], c[96];
        std::snprintf(a, sizeof a, "%.1f -> %.1f", per(m.tf, &Mem::heap, false), per(m.tf, &Mem::heap, true));
        std::snprintf(b, sizeof b, "%.1f -> %.1f", per(m.rdv, &Mem::heap, false), per(m.rdv, &Mem::heap, true));
        std::snprintf(c, sizeof c, "%.1f -> %.1f | %.1f -> %.1f", per(m.tf, &Mem::rss, false), per(m.tf, &Mem::rss, true),
                      per(m.rdv, &Mem::rss, false), per(m.rdv, &Mem::rss, true));
        std::printf("   %-9zu %-34s %-34s %s\n", m.n, a, b, c);
    }
    // Where cold time goes: a cold run touches its memory for the first time (the heap was trimmed),
    // and every fresh page costs a fault that the warm run does not pay.
    double fns = fault_ns();
    std::printf("   page faults, first cold run (getrusage minor faults during sends + receives, per key), at %.0f ns per fault\n"
                "   (this machine, touching fresh anonymous pages), and the cold ratio with that time taken out of both:\n",
                fns);
    for (const MemRow& m : mems) {
        double n = static_cast<double>(m.n);
        double ft = static_cast<double>(m.tf.received.faults - m.tf.before.faults) / n;
        double fr = static_cast<double>(m.rdv.received.faults - m.rdv.before.faults) / n;
        std::printf("   %-9zu TF %.3f/key = %.0f of %.0f ns   tfrdv %.3f/key = %.0f of %.0f ns   without faults %.2fx\n", m.n,
                    ft, ft * fns, m.tf_cold, fr, fr * fns, m.rdv_cold, (m.tf_cold - ft * fns) / (m.rdv_cold - fr * fns));
    }
    std::printf("   cold, tfrdv created with min_buckets for N keys (its tables never grow or shrink; a runtime that knows\n"
                "   its burst sets this): no target, shows what the default table's growth costs\n");
    for (const MemRow& m : mems)
        std::printf("   %-9zu %.1f ns/key, %.2fx TF (default tables: %.1f ns/key)\n", m.n, m.sized_cold, m.sized_ratio, m.rdv_cold);
    for (const MemRow& m : mems) {
        double n = static_cast<double>(m.n);
        double tf_sent = static_cast<double>(m.tf.sent.heap - m.tf.before.heap) / n;
        double rd_sent = static_cast<double>(m.rdv.sent.heap - m.rdv.before.heap) / n;
        double rd_left = static_cast<double>(m.rdv.received.heap - m.rdv.before.heap) / n;
        char name[80], tfv[32], rdv[32];
        std::snprintf(name, sizeof name, "heap B/key pending, N=%zu", m.n);
        std::snprintf(tfv, sizeof tfv, "%.1f B", tf_sent);
        std::snprintf(rdv, sizeof rdv, "%.1f B", rd_sent);
        bool ok = rd_sent <= tf_sent;
        (ok ? g_met : g_missed)++;
        std::printf("%-46s %-22s %-22s %-8s %-8s %s\n", name, tfv, rdv, "-", "<=TF", ok ? "yes" : "NO");
        std::snprintf(name, sizeof name, "heap B/key left after receives, N=%zu", m.n);
        std::snprintf(tfv, sizeof tfv, "%.1f B",
                      static_cast<double>(m.tf.received.heap - m.tf.before.heap) / n);
        std::snprintf(rdv, sizeof rdv, "%.1f B", rd_left);
        ok = rd_left <= 0.1 * rd_sent;
        (ok ? g_met : g_missed)++;
        std::printf("%-46s %-22s %-22s %-8s %-8s %s\n", name, tfv, rdv, "-", "~0", ok ? "yes" : "NO");
    }
    std::printf("   targets: pending bytes/key <= TensorFlow's; \"~0\" = at most 10%% of the pending figure left after the receives\n");
}

// =============================================================================================
// 3. two threads (run in child processes)
// =============================================================================================
const long PC_ITEMS = 1000000;
const int PC_RING = 1024;

struct PcSync {
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
    std::atomic<long> done{0}, errors{0};
    long n;               // items
    pthread_barrier_t bar; // producer and consumer start together
    explicit PcSync(long items) : n(items) { pthread_barrier_init(&bar, nullptr, 2); }
    // ns per item since t0 once the last receive completed; joins the producer; dies on a failed receive
    double finish(int64_t t0, std::thread& producer, const char* what) {
        {
            std::unique_lock<std::mutex> l(mu);
            cv.wait(l, [&] { return finished; });
        }
        int64_t el = now_ns() - t0;
        producer.join();
        pthread_barrier_destroy(&bar);
        if (errors) die(std::string(what) + ": a receive failed");
        return static_cast<double>(el) / static_cast<double>(n);
    }
    void arrive() {
        if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
            std::lock_guard<std::mutex> l(mu);
            finished = true;
            cv.notify_one();
        }
    }
};

// Returns ns per item (from both threads passing the barrier to the last receive completing).
double tf_two_thread(KeySet& ks, int nkeys, long n) {
    TfTable t = TfTable::direct();
    std::vector<Tensor> vals(PC_RING, Tensor(1.0f));
    PcSync s(n);
    Rendezvous::Args args;
    std::thread producer([&] {
        pthread_barrier_wait(&s.bar);
        int k = 0;
        for (long i = 0; i < n; i++) {
            if (!t.send(ks.tf[k], args, vals[i & (PC_RING - 1)]).ok()) die("TF send failed");
            if (++k == nkeys) k = 0;
        }
    });
    pthread_barrier_wait(&s.bar);
    int64_t t0 = now_ns();
    int k = 0;
    for (long i = 0; i < n; i++) {
        PcSync* sp = &s;
        t.recv(ks.tf[k], args, [sp](const absl::Status& st, const Rendezvous::Args&, const Rendezvous::Args&, const Tensor& v, bool) {
            if (!st.ok() || v.NumElements() != 1) sp->errors++;
            sp->arrive();
        });
        if (++k == nkeys) k = 0;
    }
    return s.finish(t0, producer, "TF two threads");
}
// the ring of values a producer sends (tfrdv_value, a scalar float, no release hook)
std::vector<tfrdv_value> pc_values() {
    static float data = 1.0f;
    std::vector<tfrdv_value> vals(PC_RING);
    for (auto& v : vals) {
        std::memset(&v, 0, sizeof v);
        v.dtype = 1;
        v.data = &data;
        v.size = sizeof data;
    }
    return vals;
}
void rdv_pc_done(void* user, const tfrdv_status* st, const tfrdv_args*, const tfrdv_args*, tfrdv_value* v, int) {
    PcSync* s = static_cast<PcSync*>(user);
    if (st->code != TFRDV_OK || !v) s->errors++;
    tfrdv_value_release(v);
    s->arrive();
}
double rdv_two_thread(KeySet& ks, int nkeys, long n) {
    tfrdv_rendezvous* r = rdv_create();
    std::vector<tfrdv_value> vals = pc_values();
    PcSync s(n);
    std::thread producer([&] {
        pthread_barrier_wait(&s.bar);
        int k = 0;
        for (long i = 0; i < n; i++) {
            tfrdv_value* v = &vals[i & (PC_RING - 1)];
            tfrdv_value_retain(v);
            if (tfrdv_send(r, &ks.rdv[k], nullptr, v, 0, nullptr) != TFRDV_OK) die("tfrdv_send failed");
            if (++k == nkeys) k = 0;
        }
    });
    pthread_barrier_wait(&s.bar);
    int64_t t0 = now_ns();
    int k = 0;
    for (long i = 0; i < n; i++) {
        if (tfrdv_recv_async(r, &ks.rdv[k], nullptr, rdv_pc_done, &s, 0) != TFRDV_OK) die("tfrdv_recv_async refused");
        if (++k == nkeys) k = 0;
    }
    double ns = s.finish(t0, producer, "tfrdv two threads");
    tfrdv_destroy(r);
    return ns;
}

// The least a lock-based hand-off on one key costs here: one spin lock over two preallocated arrays
// (buffered values, waiting receivers), no table, no key, no allocation; the same values, callback and
// completion as rdv_two_thread with K = 1. Not a rendezvous (one key, nothing to match): it shows how far
// a design that does not share a table between keys could go, against tfrdv's sharded table.
double ring_two_thread(long n) {
    struct Waiter {
        tfrdv_done_fn done;
        void* user;
    };
    std::atomic<int> word{0};
    auto lock = [&] {
        for (long spins = 0;;) {
            if (word.load(std::memory_order_relaxed) == 0 && word.exchange(1, std::memory_order_acquire) == 0) return;
            if (++spins > 4096) std::this_thread::yield(); // both threads on one CPU: let the other run
#if defined(__x86_64__) || defined(__i386__)
            else __builtin_ia32_pause();
#endif
        }
    };
    auto unlock = [&] { word.store(0, std::memory_order_release); };
    std::vector<tfrdv_value*> items(static_cast<size_t>(n));
    std::vector<Waiter> waiting(static_cast<size_t>(n));
    size_t ih = 0, it = 0, wh = 0, wt = 0; // under the lock; each side indexes at most n times
    std::vector<tfrdv_value> vals = pc_values();
    static const tfrdv_status ok = {};
    static const tfrdv_args none = {};
    PcSync s(n);
    std::thread producer([&] {
        pthread_barrier_wait(&s.bar);
        for (long i = 0; i < n; i++) {
            tfrdv_value* v = &vals[i & (PC_RING - 1)];
            tfrdv_value_retain(v);
            lock();
            if (wh != wt) {
                Waiter w = waiting[wh++];
                unlock();
                w.done(w.user, &ok, &none, &none, v, 0);
            } else {
                items[it++] = v;
                unlock();
            }
        }
    });
    pthread_barrier_wait(&s.bar);
    int64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        lock();
        if (ih != it) {
            tfrdv_value* v = items[ih++];
            unlock();
            rdv_pc_done(&s, &ok, &none, &none, v, 0);
        } else {
            waiting[wt++] = Waiter{rdv_pc_done, &s};
            unlock();
        }
    }
    return s.finish(t0, producer, "one-lock ring");
}

// One cache line handed back and forth between two threads, ns per round trip: the least a hand-off
// between producer and consumer costs (their lock, channel and items move the same way). The host
// places the two vCPUs; this figure moves with that placement, and the two-thread rows move with it.
double line_round_trip() {
    const long trips = 50000;
    std::atomic<long> flag{0};
    auto wait_for = [&](long v) {
        for (long spins = 0; flag.load(std::memory_order_acquire) != v;)
            if (++spins > 4096) std::this_thread::yield(); // both threads on one CPU: let the other run
    };
    std::thread other([&] {
        for (long i = 0; i < trips; i++) {
            wait_for(2 * i + 1);
            flag.store(2 * i + 2, std::memory_order_release);
        }
    });
    int64_t t0 = now_ns();
    for (long i = 0; i < trips; i++) {
        flag.store(2 * i + 1, std::memory_order_release);
        wait_for(2 * i + 2);
    }
    int64_t el = now_ns() - t0;
    other.join();
    return static_cast<double>(el) / static_cast<double>(trips);
}

// Child: 3 interleaved rounds per K; prints "K tf rdv ratio tf_min rdv_min" lines (medians over the
// rounds), after K=1 "RING median min" (the one-lock reference), and "RT before after" (round trips).
int child_two_thread() {
    alarm(600); // a lost wake-up or deadlock kills the child (the parent then fails) instead of hanging CI
    KeySet ks;
    ks.make(64);
    double rt_before = line_round_trip();
    for (int nkeys : {1, 64}) {
        std::vector<double> a, b, q;
        tf_two_thread(ks, nkeys, PC_ITEMS / 10); // warm-up
        rdv_two_thread(ks, nkeys, PC_ITEMS / 10);
        std::vector<double> ring;
        for (int r = 0; r < 3; r++) {
            double x = tf_two_thread(ks, nkeys, PC_ITEMS);
            double y = rdv_two_thread(ks, nkeys, PC_ITEMS);
            a.push_back(x);
            b.push_back(y);
            q.push_back(x / y);
            if (nkeys == 1) ring.push_back(ring_two_thread(PC_ITEMS));
        }
        std::printf("K %d %.2f %.2f %.4f %.2f %.2f\n", nkeys, median(a), median(b), median(q),
                    *std::min_element(a.begin(), a.end()), *std::min_element(b.begin(), b.end()));
        if (nkeys == 1) std::printf("RING %.2f %.2f\n", median(ring), *std::min_element(ring.begin(), ring.end()));
    }
    std::printf("RT %.1f %.1f\n", rt_before, line_round_trip());
    std::fflush(stdout);
    return 0;
}

void bench_two_threads(const char* self, int processes) {
    std::printf("\n3. two threads: a producer sends %ld values over K keys while the consumer posts receives (ns per item)\n"
                "   each line is a separate process (this binary re-executed); per process: median of 3 rounds, TF and\n"
                "   tfrdv interleaved; TF = LocalRendezvous (direct, 1 shard); values: a ring of %d values; each process\n"
                "   also times a cache line handed back and forth between two threads (the floor of any hand-off) and,\n"
                "   beside K=1, one spin lock over two preallocated arrays (a hand-off without table, key or allocation)\n",
                PC_ITEMS, PC_RING);
    for (int p = 1; p <= processes; p++) {
        int fd[2];
        if (pipe(fd) != 0) die("pipe");
        std::fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fd[1], 1);
            close(fd[0]);
            close(fd[1]);
            execl(self, self, "--child-two-thread", static_cast<char*>(nullptr));
            _exit(127);
        }
        close(fd[1]);
        std::string out;
        char b[512];
        ssize_t r;
        while ((r = read(fd[0], b, sizeof b)) > 0) out.append(b, static_cast<size_t>(r));
        close(fd[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("two-thread child process failed");
        size_t pos = 0;
        while (pos < out.size()) {
            size_t eol = out.find('\n', pos);
            std::string line = out.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
            pos = eol == std::string::npos ? out.size() : eol + 1;
            int k;
            double tf, rd, q, tfmin, rdmin, rt0, rt1;
            if (std::sscanf(line.c_str(), "RT %lf %lf", &rt0, &rt1) == 2) {
                std::printf("   process %d: a cache line's round trip between two threads: %.0f ns before, %.0f ns after\n", p,
                            rt0, rt1);
                continue;
            }
            if (std::sscanf(line.c_str(), "RING %lf %lf", &rd, &rdmin) == 2) {
                std::printf("   process %d: K=1 through one spin lock over two arrays (no table, key or allocation): %s\n", p,
                            fmt_ns(rd, rdmin).c_str());
                continue;
            }
            if (std::sscanf(line.c_str(), "K %d %lf %lf %lf %lf %lf", &k, &tf, &rd, &q, &tfmin, &rdmin) != 6) continue;
            char name[64];
            std::snprintf(name, sizeof name, "two threads, K=%d, process %d", k, p);
            row(name, fmt_ns(tf, tfmin), fmt_ns(rd, rdmin), q, 2.0);
        }
    }
}

// =============================================================================================
// 4. keys
// =============================================================================================
void bench_keys() {
    std::printf("\n4. keys (ns per call; the 116-byte typical key)\n");
    const std::string key = TYPICAL_KEY;
    const char* volatile kp = key.c_str();
    const size_t klen = key.size();
    const std::string src = SRC_DEV, dst = DST_DEV, edge = "edge_17_weights";
    Job tp, rp, tc, rc, tx, rx;
    tp.fn = [&](long iters) {
        TfKey pk;
        int64_t t0 = now_ns();
        for (long i = 0; i < iters; i++)
            if (!Rendezvous::ParseKey(absl::string_view(kp, klen), &pk).ok()) die("TF ParseKey failed");
        int64_t el = now_ns() - t0;
        g_sink = pk.src_incarnation;
        return el;
    };
    rp.fn = [&](long iters) {
        tfrdv_parsed_key pk;
        int64_t t0 = now_ns();
        for (long i = 0; i < iters; i++)
            if (tfrdv_key_parse(kp, klen, &pk, nullptr) != TFRDV_OK) die("tfrdv_key_parse failed");
        int64_t el = now_ns() - t0;
        g_sink = pk.src_incarnation;
        return el;
    };
    tc.fn = [&](long iters) {
        uint64_t acc = 0;
        int64_t t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            std::string k = Rendezvous::CreateKey(src, KEY_INC, dst, edge, tensorflow::FrameAndIter(0, static_cast<int64_t>(i & 7)));
            acc += k.size();
        }
        int64_t el = now_ns() - t0;
        g_sink = acc;
        return el;
    };
    rc.fn = [&](long iters) {
        char buf[256];
        size_t len = 0;
        uint64_t acc = 0;
        const char* volatile s = src.c_str();
        const char* volatile d = dst.c_str();
        const char* volatile e = edge.c_str();
        int64_t t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            if (tfrdv_key_create(s, KEY_INC, d, e, tfrdv_frame_iter{0, i & 7}, buf, sizeof buf, &len, nullptr) != TFRDV_OK)
                die("tfrdv_key_create failed");
            acc += len + static_cast<unsigned char>(buf[len - 1]);
        }
        int64_t el = now_ns() - t0;
        g_sink = acc;
        return el;
    };
    // prefix built once; per call: the frame part appended (TF: StrCat, as its Send kernel in a loop)
    const std::string prefix = src + ";" + "00000000075bcd15" + ";" + dst + ";" + edge;
    char rprefix[256];
    size_t rplen = 0;
    if (tfrdv_key_prefix(SRC_DEV, KEY_INC, DST_DEV, edge.c_str(), rprefix, sizeof rprefix, &rplen, nullptr) != TFRDV_OK ||
        prefix != std::string(rprefix, rplen))
        die("tfrdv_key_prefix differs from TensorFlow's prefix");
    tx.fn = [&](long iters) {
        uint64_t acc = 0;
        int64_t t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            std::string k = absl::StrCat(prefix, ";", static_cast<uint64_t>(1), ":", static_cast<int64_t>(i));
            acc += k.size();
        }
        int64_t el = now_ns() - t0;
        g_sink = acc;
        return el;
    };
    rx.fn = [&](long iters) {
        char buf[256];
        size_t len = 0;
        uint64_t acc = 0;
        int64_t t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            if (tfrdv_key_with_frame(rprefix, rplen, tfrdv_frame_iter{1, i}, buf, sizeof buf, &len, nullptr) != TFRDV_OK)
                die("tfrdv_key_with_frame failed");
            acc += len + static_cast<unsigned char>(buf[len - 1]);
        }
        int64_t el = now_ns() - t0;
        g_sink = acc;
        return el;
    };
    {   // both sides must produce the same prefixed key
        char buf[256];
        size_t len = 0;
        tfrdv_key_with_frame(rprefix, rplen, tfrdv_frame_iter{1, 42}, buf, sizeof buf, &len, nullptr);
        if (std::string(buf, len) != absl::StrCat(prefix, ";", static_cast<uint64_t>(1), ":", static_cast<int64_t>(42)))
            die("prefixed keys differ");
    }
    measure({&tp, &rp, &tc, &rc, &tx, &rx});
    time_row("ParseKey (typical key)", tp, rp, 3.0);
    time_row("CreateKey", tc, rc, 1.5);
    time_row("CreateKey from a prebuilt prefix", tx, rx, 1.5);
    std::printf("   CreateKey: TF Rendezvous::CreateKey returns a std::string; tfrdv_key_create writes a caller buffer and\n"
                "   validates both device names. Prefix row: TF exports no GetRendezvousKeyPrefix/GetRendezvousKey, so timed\n"
                "   is what its Send/Recv kernels do in a loop frame, StrCat(prefix, \";\", frame_id, \":\", iter_id), against\n"
                "   tfrdv_key_prefix once + tfrdv_key_with_frame per call.\n");
}

} // namespace

int main(int argc, char** argv) {
    start_idle_thread();
    if (argc > 1 && std::strcmp(argv[1], "--child-two-thread") == 0) return child_two_thread();
    int processes = 5;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (std::strcmp(argv[i], "--processes") == 0 && i + 1 < argc) processes = std::max(1, std::atoi(argv[++i]));
        else if (std::strcmp(argv[i], "--quick") == 0) quick = true;
        else {
            std::fprintf(stderr, "usage: %s [--processes N] [--quick]\n", argv[0]);
            return 2;
        }
    }
    int64_t t0 = now_ns();
    std::printf("tfrdv %s vs TensorFlow %s (libtensorflow_framework.so.2), same process, same run\n", TFRDV_VERSION_STRING,
                TF_WHEEL_VERSION);
    std::printf("multi-threaded process: one idle thread started before timing (%d threads now); glibc mutexes take a\n"
                "cheaper path in a single-threaded process, which real runtimes never are\n",
                thread_count());
    std::printf("ratio = TF time / tfrdv time (> 1: tfrdv faster), median over %d interleaved rounds; min in parentheses\n",
                ROUNDS);
#if defined(__VERSION__)
    std::printf("compiler: g++ %s (-O2 -DNDEBUG); load average at start %.2f (other processes share the CPUs)\n",
                __VERSION__, loadavg());
#endif
    KeySet ks;
    ks.make(quick ? 10000 : 1000000);
    std::printf("\n");
    header();
    bench_pairs(ks);
    if (!quick) bench_scaling(ks);
    bench_two_threads("/proc/self/exe", processes);
    bench_keys();
    std::printf("\ntargets met: %d, missed: %d; total bench time %.1f s, load average at end %.2f\n", g_met, g_missed,
                static_cast<double>(now_ns() - t0) / 1e9, loadavg());
    return 0;
}
