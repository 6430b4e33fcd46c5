// oracle.cpp - differential test of tfrdv's key and device-name functions against TensorFlow's own
// implementation (libtensorflow_framework.so.2 from the tensorflow-cpu wheel; see tests/tf/tf.mk).
//
// Compared, input by input:
//   Rendezvous::CreateKey          tfrdv_key_create, tfrdv_key_prefix + tfrdv_key_with_frame
//   Rendezvous::ParseKey           tfrdv_key_parse (accept/reject and every field)
//   DeviceNameUtils::ParseFullName tfrdv_device_parse (accept/reject and every field)
//   ParsedNameToString             tfrdv_device_format
//   SplitDeviceName                tfrdv_device_split
//   IsSameAddressSpace (string)    tfrdv_device_same_address_space
//   IsSameAddressSpace (parsed)    tfrdv_device_name_same_address_space
//   LocalName(fullname)            tfrdv_device_local_name
//   ParseLocalName                 tfrdv_device_parse_local
// Inputs: every string and integer literal of tests/*.{c,h,cpp} and the quoted seeds of
// tests/*.sh (c_literals.h), 340,000 generated cases from a fixed printed seed (valid keys and names
// plus near-valid mutations, gen.h; --scale multiplies), and the libFuzzer corpus of tests/fuzz.sh
// (build/fuzz/corpus) when it exists.
//
// Each case is counted once per category: "agree" (every compared function answers the same), D1 or
// D2 (its only differences are proven deliberate, below) or UNDECLARED. Undeclared differences are
// grouped by function and result shape with example inputs.
//
// Created keys: TensorFlow's CreateKey never fails; tfrdv_key_create refuses parts that would make
// a key TensorFlow's own ParseKey rejects. So tfrdv must create exactly when TensorFlow's created key
// parses back (with TF's ParseKey) to the same src, dst and edge, and then byte for byte the same.
//
// Deliberate differences (README.md, "Where tfrdv differs from TensorFlow (on purpose)") are named
// and proven case by case; everything else that differs fails the run:
//   D1 "device numbers above INT_MAX are truncated | rejected": the case counts as D1 only when
//      tfrdv rejected it, it contains a device number above INT_MAX, and replacing each such number
//      by one <= INT_MAX (its value mod 2^31) makes the two implementations agree on every compared
//      function. Differences that survive the replacement are reported (on the replaced input).
//   D2 "CHECK-fails on misuse | misuse gets a status": LocalName(fullname) on a name TensorFlow's
//      ParseFullName rejects CHECK-fails (aborts the process); TF's LocalName is then not called in
//      process and tfrdv must refuse with INVALID_ARGUMENT. The abort is demonstrated in a forked
//      child for a sample of such names.
// Each row is honoured only if README.md still lists it.
//
// Usage: oracle [--seed N] [--scale F] [--vectors DIR|FILE] [--readme FILE] [--corpus DIR] [--show N] [--full]
//               [--require-corpus]   (a missing fuzz corpus fails instead of being skipped)
//        oracle --key KEY | --device NAME | --local NAME   (compares one input and prints it)
//        (env TFRDV_ORACLE_SEED, TFRDV_ORACLE_SCALE, TFRDV_FUZZ_CORPUS). Last line: "N passed, N
//        failed" over the categories; exit status 1 on any undeclared disagreement.
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"

#include <fcntl.h>
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tensorflow/core/framework/rendezvous.h"
#include "xla/tsl/util/device_name_utils.h"

#include "c_literals.h"
#include "gen.h"

#ifndef TF_WHEEL_VERSION
#define TF_WHEEL_VERSION "(version unknown)"
#endif

using tensorflow::Rendezvous;
using tsl::DeviceNameUtils;
typedef DeviceNameUtils::ParsedName PN;

// ---- printing ------------------------------------------------------------------------------
// C-style quoting of any bytes (the comparisons use it too, so it never shortens anything).
static std::string esc(const std::string& s) {
    std::string o = "\"";
    for (char ch : s) {
        unsigned char c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            o += '\\';
            o += static_cast<char>(c);
        } else if (c >= 32 && c < 127) {
            o += static_cast<char>(c);
        } else {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            o += b;
        }
    }
    return o + "\"";
}
// For the report only: long texts keep their head and tail (--full prints them whole).
static size_t g_clip = 600;
static std::string clip(const std::string& t) {
    if (t.size() <= g_clip) return t;
    return t.substr(0, g_clip / 2) + " ...[" + std::to_string(t.size()) + " characters in all]... " +
           t.substr(t.size() - g_clip / 4);
}
static std::string sv(tfrdv_str s) { return std::string(s.ptr ? s.ptr : "", s.len); }
static std::string sv(absl::string_view s) { return std::string(s.data(), s.size()); }

// ---- what one comparison produces --------------------------------------------------------
struct Diff {
    std::string fn, tf, rdv;
};
struct Result {
    std::vector<Diff> diffs;
    bool rdv_rejected = false;  // tfrdv refused the input in the primary function
    bool local_check = false;   // TF's LocalName would CHECK-fail (D2 candidate)
    std::string local_name;     // the name concerned
};
static void cmp(Result& r, const std::string& fn, const std::string& tf, const std::string& rdv) {
    if (tf != rdv) r.diffs.push_back(Diff{fn, tf, rdv});
}

enum Kind { K_KEY, K_DEVICE, K_LOCAL, K_PAIR, K_CREATE };
struct Input {
    Kind kind;
    std::string a, b, c; // key | device | local | pair (a, b) | create (src a, dst b, edge c)
    uint64_t inc = 0, frame = 0;
    int64_t iter = 0;
    Input() : kind(K_KEY) {}
    Input(Kind k, std::string x, std::string y = std::string(), std::string z = std::string())
        : kind(k), a(std::move(x)), b(std::move(y)), c(std::move(z)) {}
};
static std::string describe(const Input& in) {
    char num[96];
    switch (in.kind) {
    case K_KEY: return "ParseKey(" + esc(in.a) + ")";
    case K_DEVICE: return "device name " + esc(in.a);
    case K_LOCAL: return "ParseLocalName(" + esc(in.a) + ")";
    case K_PAIR: return "IsSameAddressSpace(" + esc(in.a) + ", " + esc(in.b) + ")";
    default:
        std::snprintf(num, sizeof num, "0x%llx", static_cast<unsigned long long>(in.inc));
        std::string s = "CreateKey(" + esc(in.a) + ", " + num + ", " + esc(in.b) + ", " + esc(in.c);
        std::snprintf(num, sizeof num, ", {%llu, %lld})", static_cast<unsigned long long>(in.frame),
                      static_cast<long long>(in.iter));
        return s + num;
    }
}

// ---- field formatting --------------------------------------------------------------------
static void cmp_names(Result& r, const std::string& fn, const PN& t, const tfrdv_device_name& d) {
    auto flag = [](bool b) { return std::string(b ? "set" : "unset"); };
    cmp(r, fn + ".has_job", flag(t.has_job), flag(d.has_job));
    if (t.has_job && d.has_job) cmp(r, fn + ".job", esc(t.job), esc(sv(d.job)));
    cmp(r, fn + ".has_replica", flag(t.has_replica), flag(d.has_replica));
    if (t.has_replica && d.has_replica) cmp(r, fn + ".replica", std::to_string(t.replica), std::to_string(d.replica));
    cmp(r, fn + ".has_task", flag(t.has_task), flag(d.has_task));
    if (t.has_task && d.has_task) cmp(r, fn + ".task", std::to_string(t.task), std::to_string(d.task));
    cmp(r, fn + ".has_type", flag(t.has_type), flag(d.has_type));
    if (t.has_type && d.has_type) cmp(r, fn + ".type", esc(t.type), esc(sv(d.type)));
    cmp(r, fn + ".has_id", flag(t.has_id), flag(d.has_id));
    if (t.has_id && d.has_id) cmp(r, fn + ".id", std::to_string(t.id), std::to_string(d.id));
}

// ---- the comparisons -----------------------------------------------------------------------
static void check_device(const std::string& name, Result& r) {
    PN pn;
    tfrdv_device_name dn;
    tfrdv_status st;
    bool tf_ok = DeviceNameUtils::ParseFullName(name, &pn);
    bool rd_ok = tfrdv_device_parse(name.data(), name.size(), &dn, &st) == TFRDV_OK;
    r.rdv_rejected = !rd_ok;
    cmp(r, "ParseFullName", tf_ok ? "accepts" : "rejects", rd_ok ? "accepts" : "rejects");
    if (tf_ok && rd_ok) {
        cmp_names(r, "ParseFullName", pn, dn);
        std::string canon(tfrdv_device_format(&dn, nullptr, 0) + 1, '\0');
        canon.resize(tfrdv_device_format(&dn, &canon[0], canon.size()));
        cmp(r, "ParsedNameToString", esc(DeviceNameUtils::ParsedNameToString(pn)), esc(canon));
    }
    // SplitDeviceName
    {
        std::string task, dev;
        bool t = DeviceNameUtils::SplitDeviceName(name, &task, &dev);
        std::vector<char> tb(name.size() + 64), db(name.size() + 64);
        size_t tl = 0, dl = 0;
        tfrdv_code rc = tfrdv_device_split(name.data(), name.size(), tb.data(), tb.size(), &tl, db.data(),
                                           db.size(), &dl, &st);
        std::string tfs = t ? "true task=" + esc(task) + " device=" + esc(dev) : "false";
        std::string rds = rc == TFRDV_OK ? "true task=" + esc(std::string(tb.data(), tl)) + " device=" +
                                               esc(std::string(db.data(), dl))
                                         : std::string("false (") + tfrdv_code_str(rc) + ")";
        if (!t && rc == TFRDV_INVALID_ARGUMENT) rds = "false";
        cmp(r, "SplitDeviceName", tfs, rds);
    }
    // LocalName(fullname)
    {
        std::vector<char> b(name.size() + 64);
        tfrdv_status ls;
        ls.code = TFRDV_INTERNAL;
        size_t n = tfrdv_device_local_name(name.data(), name.size(), b.data(), b.size(), &ls);
        std::string rds = n ? esc(std::string(b.data(), n))
                            : std::string("refused (") + tfrdv_code_str(ls.code) + ")";
        if (tf_ok) {
            cmp(r, "LocalName", esc(DeviceNameUtils::LocalName(absl::string_view(name))), rds);
        } else if (n == 0 && ls.code == TFRDV_INVALID_ARGUMENT) {
            r.local_check = true; // TF: CHECK(ParseFullName(name)) aborts; tfrdv: a status
            r.local_name = name;
        } else {
            cmp(r, "LocalName", "CHECK failure (ParseFullName rejects the name)", rds);
        }
    }
    cmp(r, "IsSameAddressSpace(self)", DeviceNameUtils::IsSameAddressSpace(name, name) ? "true" : "false",
        tfrdv_device_same_address_space(name.data(), name.size(), name.data(), name.size()) ? "true" : "false");
}

static void check_local(const std::string& name, Result& r) {
    PN pn;
    tfrdv_str type{nullptr, 0};
    int id = -1;
    tfrdv_status st;
    bool tf_ok = DeviceNameUtils::ParseLocalName(name, &pn);
    bool rd_ok = tfrdv_device_parse_local(name.data(), name.size(), &type, &id, &st) == TFRDV_OK;
    r.rdv_rejected = !rd_ok;
    cmp(r, "ParseLocalName", tf_ok ? "accepts type=" + esc(pn.type) + " id=" + std::to_string(pn.id) : "rejects",
        rd_ok ? "accepts type=" + esc(sv(type)) + " id=" + std::to_string(id) : "rejects");
}

static void check_pair(const std::string& a, const std::string& b, Result& r) {
    bool t = DeviceNameUtils::IsSameAddressSpace(a, b);
    bool d = tfrdv_device_same_address_space(a.data(), a.size(), b.data(), b.size()) != 0;
    cmp(r, "IsSameAddressSpace(string)", t ? "true" : "false", d ? "true" : "false");
    PN pa, pb;
    tfrdv_device_name da, db;
    bool ta = DeviceNameUtils::ParseFullName(a, &pa), tb = DeviceNameUtils::ParseFullName(b, &pb);
    bool ra = tfrdv_device_parse(a.data(), a.size(), &da, nullptr) == TFRDV_OK;
    bool rb = tfrdv_device_parse(b.data(), b.size(), &db, nullptr) == TFRDV_OK;
    r.rdv_rejected = !ra || !rb;
    if (ta && tb && ra && rb)
        cmp(r, "IsSameAddressSpace(ParsedName)", DeviceNameUtils::IsSameAddressSpace(pa, pb) ? "true" : "false",
            tfrdv_device_name_same_address_space(&da, &db) ? "true" : "false");
    else
        cmp(r, "ParseFullName(pair)", std::string(ta ? "a ok" : "a rejected") + (tb ? ", b ok" : ", b rejected"),
            std::string(ra ? "a ok" : "a rejected") + (rb ? ", b ok" : ", b rejected"));
}

static void check_key(const std::string& key, Result& r) {
    Rendezvous::ParsedKey pk;
    tfrdv_parsed_key rk;
    tfrdv_status st;
    absl::Status s = Rendezvous::ParseKey(key, &pk);
    bool rd_ok = tfrdv_key_parse(key.data(), key.size(), &rk, &st) == TFRDV_OK;
    r.rdv_rejected = !rd_ok;
    cmp(r, "ParseKey", s.ok() ? "accepts" : "rejects", rd_ok ? "accepts" : "rejects");
    if (!s.ok() || !rd_ok) return;
    absl::string_view full = pk.FullKey();
    cmp(r, "ParseKey.FullKey", esc(sv(full)), esc(sv(rk.full)));
    cmp(r, "ParseKey.src_device", esc(sv(pk.src_device)), esc(sv(rk.src_device)));
    cmp(r, "ParseKey.dst_device", esc(sv(pk.dst_device)), esc(sv(rk.dst_device)));
    cmp(r, "ParseKey.edge_name", esc(sv(pk.edge_name)), esc(sv(rk.edge_name)));
    cmp(r, "ParseKey.src_incarnation", gen::hex16(pk.src_incarnation), gen::hex16(rk.src_incarnation));
    cmp_names(r, "ParseKey.src", pk.src, rk.src);
    cmp_names(r, "ParseKey.dst", pk.dst, rk.dst);
    // TF keeps no frame view: part 4 is what follows the edge name in FullKey, up to a ';'
    size_t off = static_cast<size_t>(pk.edge_name.data() - full.data()) + pk.edge_name.size() + 1;
    std::string frame = off <= full.size() ? sv(full.substr(off)) : std::string();
    size_t semi = frame.find(';');
    if (semi != std::string::npos) frame.resize(semi);
    cmp(r, "ParseKey.frame_iter", esc(frame), esc(sv(rk.frame_iter)));
}

static void check_create(const Input& in, Result& r) {
    std::string k = Rendezvous::CreateKey(in.a, in.inc, in.b, in.c, tensorflow::FrameAndIter(in.frame, in.iter));
    Rendezvous::ParsedKey pk;
    bool tf_valid = Rendezvous::ParseKey(k, &pk).ok() && sv(pk.src_device) == in.a && sv(pk.dst_device) == in.b &&
                    sv(pk.edge_name) == in.c && pk.src_incarnation == in.inc;
    std::vector<char> buf(k.size() + 64);
    size_t len = 0, plen = 0, len2 = 0;
    tfrdv_status st;
    tfrdv_frame_iter fi{in.frame, in.iter};
    tfrdv_code rc = tfrdv_key_create(in.a.c_str(), in.inc, in.b.c_str(), in.c.c_str(), fi, buf.data(), buf.size(), &len, &st);
    r.rdv_rejected = rc != TFRDV_OK;
    std::string tfs = tf_valid ? esc(k) : "key " + esc(k) + " that ParseKey rejects or splits differently";
    std::string rds = rc == TFRDV_OK ? esc(std::string(buf.data(), len)) : std::string("refused (") + tfrdv_code_str(rc) + ")";
    if (!tf_valid && rc == TFRDV_INVALID_ARGUMENT) rds = tfs; // both: not a valid key
    cmp(r, "CreateKey", tfs, rds);
    // GetRendezvousKeyPrefix + GetRendezvousKey (what the Send/Recv kernels build) give the same
    std::vector<char> pre(k.size() + 64), buf2(k.size() + 64);
    tfrdv_code pc = tfrdv_key_prefix(in.a.c_str(), in.inc, in.b.c_str(), in.c.c_str(), pre.data(), pre.size(), &plen, &st);
    std::string pfs = pc == TFRDV_OK && tfrdv_key_with_frame(pre.data(), plen, fi, buf2.data(), buf2.size(), &len2, &st) == TFRDV_OK
                          ? esc(std::string(buf2.data(), len2))
                          : std::string("refused (") + tfrdv_code_str(pc) + ")";
    if (!tf_valid && pc == TFRDV_INVALID_ARGUMENT) pfs = tfs;
    cmp(r, "prefix+frame", tfs, pfs);
}

static Result run(const Input& in) {
    Result r;
    switch (in.kind) {
    case K_KEY: check_key(in.a, r); break;
    case K_DEVICE: check_device(in.a, r); break;
    case K_LOCAL: check_local(in.a, r); break;
    case K_PAIR: check_pair(in.a, in.b, r); break;
    default: check_create(in, r); break;
    }
    return r;
}

// ---- D1: device numbers above INT_MAX ------------------------------------------------------
// In [b, e) of s, replaces every maximal digit run that follows ':' and exceeds INT_MAX by its value
// modulo 2^31 (a number TensorFlow keeps as is). Returns how many were replaced.
static int shrink_numbers(std::string& s, size_t b, size_t e) {
    int n = 0;
    for (size_t i = b; i < e && i < s.size(); i++) {
        if (!(s[i] >= '0' && s[i] <= '9') || i == 0 || s[i - 1] != ':') continue;
        size_t j = i;
        unsigned long long v = 0;
        bool big = false;
        while (j < e && s[j] >= '0' && s[j] <= '9') {
            v = v * 10 + static_cast<unsigned long long>(s[j] - '0');
            if (v > INT_MAX) big = true;
            v %= 2147483648ull * 10; // keeps v small; only "above INT_MAX" and the residue matter
            j++;
        }
        if (!big) {
            i = j;
            continue;
        }
        std::string rep = std::to_string(v % 2147483648ull);
        s.replace(i, j - i, rep);
        e = e - (j - i) + rep.size();
        i += rep.size();
        n++;
    }
    return n;
}
// The same input with every device number above INT_MAX replaced; false if there is none.
static bool intmax_variant(const Input& in, Input* out) {
    *out = in;
    int n = 0;
    switch (in.kind) {
    case K_KEY: { // device parts are 0 and 2
        size_t p1 = out->a.find(';');
        size_t p2 = p1 == std::string::npos ? p1 : out->a.find(';', p1 + 1);
        size_t p3 = p2 == std::string::npos ? p2 : out->a.find(';', p2 + 1);
        if (p2 != std::string::npos) n += shrink_numbers(out->a, p2 + 1, p3 == std::string::npos ? out->a.size() : p3);
        n += shrink_numbers(out->a, 0, p1 == std::string::npos ? out->a.size() : p1);
        break;
    }
    case K_PAIR:
    case K_CREATE:
        n += shrink_numbers(out->a, 0, out->a.size());
        n += shrink_numbers(out->b, 0, out->b.size());
        break;
    default: n += shrink_numbers(out->a, 0, out->a.size()); break;
    }
    return n > 0;
}

// ---- D2: TF's LocalName aborts on an unparsable name (shown in a child process) -------------
static std::vector<std::string> g_d2_examples; // a few demonstrated aborts, for the report
static bool tf_local_name_aborts(const std::string& name, std::string* returned) {
    int fd[2];
    if (pipe(fd) != 0) return false;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        alarm(30);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 2);
        std::string s = DeviceNameUtils::LocalName(absl::string_view(name));
        ssize_t w = write(fd[1], s.data(), s.size());
        (void)w;
        _exit(0);
    }
    close(fd[1]);
    char b[4096];
    ssize_t n;
    returned->clear();
    while ((n = read(fd[0], b, sizeof b)) > 0) returned->append(b, static_cast<size_t>(n));
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT; // CHECK -> LOG(FATAL) -> abort()
    if (aborted && g_d2_examples.size() < 3)
        g_d2_examples.push_back("LocalName(" + clip(esc(name)) + "): child " +
                                "killed by SIGABRT" +
                                "; tfrdv_device_local_name: 0, INVALID_ARGUMENT");
    return aborted;
}

// ---- bookkeeping -------------------------------------------------------------------------
struct Example {
    std::string input, tf, rdv;
};
struct Signature {
    size_t count = 0;
    std::vector<Example> examples;
};
struct Category {
    explicit Category(const char* n) : name(n) {}
    std::string name;
    size_t cases = 0, agree = 0, d1 = 0, d2 = 0, undeclared = 0, cut = 0; // cut: create inputs cut at a NUL
    size_t d1_partial = 0; // undeclared cases where D1 explained some of the diffs
    double seconds = 0;
    std::string note;
};

static bool g_d1_declared = false, g_d2_declared = false;
static size_t g_show = 3, g_d2_demos = 0, g_d2_demo_max = 24;
static std::map<int, size_t> g_d1_shown;                // D1 proofs printed per input kind
static std::map<std::string, Signature> g_undeclared; // "fn: TF x / tfrdv y" shape -> examples
static std::vector<std::string> g_d1_proofs;          // a few printed D1 proofs

static std::string shape(const std::string& v) {
    if (v.empty() || v[0] != '"') return v.substr(0, v.find(" ("));
    return "<text>";
}

static void tally(Category& c, const Input& in) {
    c.cases++;
    Result r = run(in);
    if (r.diffs.empty()) {
        if (!r.local_check) {
            c.agree++;
            return;
        }
        if (g_d2_declared) {
            if (g_d2_demos < g_d2_demo_max) { // demonstrate the abort on a sample
                std::string ret;
                g_d2_demos++;
                if (!tf_local_name_aborts(r.local_name, &ret))
                    r.diffs.push_back(Diff{"LocalName", "returned " + esc(ret) + " without aborting", "refused"});
            }
            if (r.diffs.empty()) {
                c.d2++;
                return;
            }
        } else {
            r.diffs.push_back(Diff{"LocalName", "CHECK failure", "refused (D2 not declared in README.md)"});
        }
    }
    // D1: the diffs that vanish once every device number above INT_MAX is made <= INT_MAX are
    // explained by it; any diff that stays (or appears) is reported as undeclared.
    std::vector<std::pair<Diff, std::string>> left; // a diff and the input it was seen on
    for (const Diff& d : r.diffs) left.push_back({d, clip(describe(in))});
    Input v;
    if (g_d1_declared && r.rdv_rejected && intmax_variant(in, &v)) {
        Result rv = run(v);
        std::set<std::string> in_variant;
        for (const Diff& d : rv.diffs) in_variant.insert(d.fn);
        size_t explained = 0;
        for (const Diff& d : r.diffs)
            if (!in_variant.count(d.fn)) explained++;
        if (explained) { // what is left is shown as the variant shows it, free of the INT_MAX difference
            left.clear();
            for (const Diff& d : rv.diffs)
                left.push_back({d, clip(describe(v)) + "\n        (" + clip(describe(in)) + " with its numbers above INT_MAX replaced)"});
        }
        if (explained && left.empty()) {
            c.d1++;
            size_t& shown = g_d1_shown[in.kind];
            if (shown++ < 2)
                g_d1_proofs.push_back(clip(describe(in)) + "\n        " + r.diffs[0].fn + ": TF " + clip(r.diffs[0].tf) +
                                      ", tfrdv " + clip(r.diffs[0].rdv) + "\n        agrees in full as " + clip(describe(v)));
            return;
        }
        if (explained) c.d1_partial++;
    }
    c.undeclared++;
    for (const auto& dl : left) {
        const Diff& d = dl.first;
        std::string key = d.fn + ": TF " + shape(d.tf) + " / tfrdv " + shape(d.rdv);
        Signature& s = g_undeclared[key];
        s.count++;
        if (s.examples.size() < g_show) s.examples.push_back(Example{dl.second, clip(d.tf), clip(d.rdv)});
    }
}

template <typename F>
static void timed(Category& c, F f) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

static bool readme_has(const std::string& readme, const char* row) { return readme.find(row) != std::string::npos; }

int main(int argc, char** argv) {
    uint64_t seed = 20261123;
    double scale = 1.0;
    bool require_corpus = false;
    std::string vectors = "tests", readme_path = "README.md", corpus = "build/fuzz/corpus";
    if (const char* e = std::getenv("TFRDV_ORACLE_SEED")) seed = std::strtoull(e, nullptr, 0);
    if (const char* e = std::getenv("TFRDV_ORACLE_SCALE")) scale = std::atof(e);
    if (const char* e = std::getenv("TFRDV_FUZZ_CORPUS")) corpus = e;
    for (int i = 1; i < argc; i++) {
        std::string o = argv[i];
        if (o == "--full") {
            g_clip = SIZE_MAX;
            continue;
        }
        if (o == "--require-corpus") {
            require_corpus = true;
            continue;
        }
        bool known = o == "--seed" || o == "--scale" || o == "--vectors" || o == "--readme" || o == "--corpus" ||
                     o == "--show" || o == "--key" || o == "--device" || o == "--local";
        if (!known || i + 1 >= argc) {
            std::fprintf(stderr, "usage: %s [--seed N] [--scale F] [--vectors DIR|FILE] [--readme FILE] [--corpus DIR]\n"
                                 "          [--show N] [--full] [--require-corpus]\n"
                                 "       %s --key KEY | --device NAME | --local NAME   (one comparison)\n", argv[0], argv[0]);
            return 2;
        }
        const char* val = argv[++i];
        if (o == "--seed") seed = std::strtoull(val, nullptr, 0);
        else if (o == "--scale") scale = std::atof(val);
        else if (o == "--vectors") vectors = val;
        else if (o == "--readme") readme_path = val;
        else if (o == "--corpus") corpus = val;
        else if (o == "--show") g_show = static_cast<size_t>(std::atoi(val));
        else { // --key / --device / --local: compare one input, print the result
            Input in(o == "--key" ? K_KEY : o == "--device" ? K_DEVICE : K_LOCAL, val);
            Result r = run(in);
            std::printf("%s: %s\n", describe(in).c_str(), r.diffs.empty() ? "agree" : "DIFFER");
            for (const Diff& d : r.diffs) std::printf("  %s\n    TF:    %s\n    tfrdv: %s\n", d.fn.c_str(), d.tf.c_str(), d.rdv.c_str());
            if (r.local_check) std::printf("  LocalName: TF would CHECK-fail (ParseFullName rejects), tfrdv refuses\n");
            return r.diffs.empty() ? 0 : 1;
        }
    }
    if (scale <= 0) scale = 1.0;
    std::printf("tfrdv vs TensorFlow %s (libtensorflow_framework.so.2): keys and device names\n", TF_WHEEL_VERSION);
    std::printf("seed %llu (override: --seed N or TFRDV_ORACLE_SEED), scale %.2f\n", static_cast<unsigned long long>(seed), scale);

    // deliberate differences, as README.md states them
    {
        std::ifstream f(readme_path);
        std::stringstream ss;
        ss << f.rdbuf();
        std::string readme = ss.str();
        g_d1_declared = readme_has(readme, "device numbers above INT_MAX are truncated");
        g_d2_declared = readme_has(readme, "CHECK-fails on misuse");
        std::printf("deliberate differences (%s, \"Where tfrdv differs from TensorFlow\"):\n", readme_path.c_str());
        std::printf("  D1 %s device numbers above INT_MAX: TF truncates into an int, tfrdv rejects\n",
                    g_d1_declared ? "[listed]  " : "[MISSING] ");
        std::printf("  D2 %s LocalName(fullname) on an unparsable name: TF CHECK-fails (aborts), tfrdv returns a status\n",
                    g_d2_declared ? "[listed]  " : "[MISSING] ");
        std::printf("  (the other rows concern the rendezvous tables, timeouts and logging: not exercised here)\n");
    }

    std::vector<Category> cats;
    gen::Rng rng(seed);
    auto n_of = [&](size_t base) { return static_cast<size_t>(static_cast<double>(base) * scale); };

    // ---- 1. the vectors of tests/ (every .c .h .cpp file and the shell scripts' seeds) ----
    c_literals::Extracted x;
    {
        std::vector<std::string> files;
        if (DIR* dir = opendir(vectors.c_str())) {
            while (struct dirent* e = readdir(dir)) {
                std::string n = e->d_name;
                for (const char* ext : {".c", ".h", ".cpp", ".sh"})
                    if (n.size() > std::strlen(ext) && n.compare(n.size() - std::strlen(ext), std::string::npos, ext) == 0)
                        files.push_back(vectors + "/" + n);
            }
            closedir(dir);
            std::sort(files.begin(), files.end());
        } else {
            files.push_back(vectors);
        }
        std::set<std::string> have_s;
        std::set<int64_t> have_i;
        bool keys_file = false;
        std::printf("vectors:");
        for (auto& path : files) {
            c_literals::Extracted one;
            std::string err;
            bool sh = path.size() > 3 && path.compare(path.size() - 3, 3, ".sh") == 0;
            if (!(sh ? c_literals::extract_shell(path, &one, &err) : c_literals::extract(path, &one, &err))) {
                std::printf("\ncannot read the test vectors: %s\n0 passed, 1 failed\n", err.c_str());
                return 1;
            }
            keys_file |= path.find("test_keys.c") != std::string::npos && !one.strings.empty();
            std::printf(" %s %zu", path.c_str(), one.strings.size());
            for (auto& v : one.strings)
                if (have_s.insert(v).second) x.strings.push_back(v);
            for (auto v : one.integers)
                if (have_i.insert(v).second) x.integers.push_back(v);
        }
        std::printf("\n  %zu distinct strings, %zu distinct integers\n", x.strings.size(), x.integers.size());
        if (!keys_file) {
            std::printf("tests/test_keys.c not found or empty under %s\n0 passed, 1 failed\n", vectors.c_str());
            return 1;
        }
    }
    {
        Category k{"vectors: ParseKey"}, d{"vectors: device names"}, l{"vectors: ParseLocalName"},
            p{"vectors: IsSameAddressSpace pairs"}, c{"vectors: CreateKey"};
        timed(k, [&] { for (auto& s : x.strings) tally(k, Input{K_KEY, s}); });
        timed(d, [&] { for (auto& s : x.strings) tally(d, Input{K_DEVICE, s}); });
        timed(l, [&] { for (auto& s : x.strings) tally(l, Input{K_LOCAL, s}); });
        timed(p, [&] {
            std::vector<std::string> names; // strings either side parses as a device name
            for (auto& s : x.strings) {
                PN pn;
                tfrdv_device_name dn;
                if (DeviceNameUtils::ParseFullName(s, &pn) || tfrdv_device_parse(s.data(), s.size(), &dn, nullptr) == TFRDV_OK)
                    names.push_back(s);
            }
            for (auto& a : names)
                for (auto& b : names) tally(p, Input{K_PAIR, a, b});
        });
        timed(c, [&] {
            const std::string S = "/job:a/replica:0/task:0/device:CPU:0", D = "/job:b/replica:0/task:0/device:CPU:0";
            std::vector<int64_t>& ints = x.integers;
            size_t ni = ints.empty() ? 1 : ints.size(), k2 = 0;
            auto num = [&](size_t i) { return ints.empty() ? 0 : ints[i % ni]; };
            for (auto s : x.strings) {
                if (s.find('\0') != std::string::npos) { // tfrdv_key_create takes C strings: cut at the NUL
                    s.resize(s.find('\0'));
                    c.cut++;
                }
                for (int role = 0; role < 3; role++, k2++) {
                    Input in{K_CREATE, role == 0 ? s : S, role == 1 ? s : D, role == 2 ? s : "e"};
                    in.inc = static_cast<uint64_t>(num(k2));
                    in.frame = static_cast<uint64_t>(num(k2 + 1));
                    in.iter = num(k2 + 2);
                    tally(c, in);
                }
            }
            for (size_t i = 0; i < ni; i++) { // every integer as incarnation, frame and iteration
                uint64_t v = static_cast<uint64_t>(num(i));
                const uint64_t incs[3] = {v, 0, ~v};
                const uint64_t frames[3] = {v, 0, v};
                const int64_t iters[3] = {0, num(i), num(i)};
                for (int j = 0; j < 3; j++) {
                    Input in(K_CREATE, S, D, "edge_5_x");
                    in.inc = incs[j];
                    in.frame = frames[j];
                    in.iter = iters[j];
                    tally(c, in);
                }
            }
            // and every accepted key among them, re-created from its own parts
            for (auto& s : x.strings) {
                Rendezvous::ParsedKey pk;
                if (!Rendezvous::ParseKey(s, &pk).ok() || s.find('\0') != std::string::npos) continue;
                size_t off = static_cast<size_t>(pk.edge_name.data() - pk.FullKey().data()) + pk.edge_name.size() + 1;
                std::string fr = sv(pk.FullKey().substr(off));
                unsigned long long f = 0;
                long long it = 0;
                char tail = 0;
                if (std::sscanf(fr.c_str(), "%llu:%lld%c", &f, &it, &tail) != 2 || fr[0] == '-') continue;
                Input in{K_CREATE, sv(pk.src_device), sv(pk.dst_device), sv(pk.edge_name)};
                in.inc = pk.src_incarnation;
                in.frame = f;
                in.iter = it;
                tally(c, in);
            }
        });
        c.note = c.cut ? std::to_string(c.cut) + " strings cut at a NUL byte (C-string API)" : "";
        cats.push_back(k);
        cats.push_back(d);
        cats.push_back(l);
        cats.push_back(p);
        cats.push_back(c);
    }

    // ---- 2. generated cases ----
    {
        Category kv{"generated: valid keys (create + parse)"}, km{"generated: mutated keys"},
            dv{"generated: valid device names"}, dm{"generated: mutated device names"},
            ln{"generated: local names"}, pr{"generated: address-space pairs"}, cr{"generated: odd CreateKey parts"};
        timed(kv, [&] {
            for (size_t i = 0, n = n_of(50000); i < n; i++) {
                Input in{K_CREATE, gen::device(rng), gen::device(rng), gen::edge(rng)};
                in.inc = gen::incarnation(rng);
                gen::frame(rng, &in.frame, &in.iter);
                tally(kv, in);
                std::string k = Rendezvous::CreateKey(in.a, in.inc, in.b, in.c, tensorflow::FrameAndIter(in.frame, in.iter));
                tally(kv, Input{K_KEY, k});
            }
        });
        timed(km, [&] {
            for (size_t i = 0, n = n_of(80000); i < n; i++) {
                uint64_t f;
                int64_t it;
                gen::frame(rng, &f, &it);
                std::vector<std::string> parts = {gen::device(rng), gen::hex16(gen::incarnation(rng)), gen::device(rng),
                                                  gen::edge(rng), std::to_string(f) + ":" + std::to_string(it)};
                tally(km, Input{K_KEY, gen::mutate_key(rng, parts)});
            }
        });
        timed(dv, [&] { for (size_t i = 0, n = n_of(30000); i < n; i++) tally(dv, Input{K_DEVICE, gen::device(rng)}); });
        timed(dm, [&] {
            for (size_t i = 0, n = n_of(50000); i < n; i++) tally(dm, Input{K_DEVICE, gen::mutate(rng, gen::device(rng))});
        });
        timed(ln, [&] { for (size_t i = 0, n = n_of(20000); i < n; i++) tally(ln, Input{K_LOCAL, gen::local_name(rng)}); });
        timed(pr, [&] {
            for (size_t i = 0, n = n_of(30000); i < n; i++) {
                gen::Space sp = gen::space(rng);
                std::string a = gen::device_in(rng, sp), b = gen::device_in(rng, sp);
                if (rng.chance(10)) b = gen::mutate(rng, b);
                if (rng.chance(5)) a = gen::device(rng);
                tally(pr, Input{K_PAIR, a, b});
            }
        });
        timed(cr, [&] {
            static const char* const edges[] = {"", ";", "e;x", "e;", ";e", "a;b;c", "0:0", "e\xc3\xa9", " "};
            for (size_t i = 0, n = n_of(30000); i < n; i++) {
                Input in{K_CREATE, gen::device(rng), gen::device(rng), gen::edge(rng)};
                switch (rng.below(5)) {
                case 0: in.a = gen::mutate(rng, in.a); break;
                case 1: in.b = gen::mutate(rng, in.b); break;
                case 2: in.c = rng.chance(50) ? std::string(rng.pick(edges)) : gen::mutate(rng, in.c); break;
                case 3: in.a += ";"; break;
                default: if (!gen::hugify(rng, in.a)) in.a += "/replica:" + gen::huge_number(rng); break;
                }
                in.inc = gen::incarnation(rng);
                gen::frame(rng, &in.frame, &in.iter);
                for (std::string* s : {&in.a, &in.b, &in.c}) // C-string API: cut at a NUL
                    if (s->find('\0') != std::string::npos) s->resize(s->find('\0'));
                tally(cr, in);
            }
        });
        for (Category* c : {&kv, &km, &dv, &dm, &ln, &pr, &cr}) cats.push_back(*c);
    }

    // ---- 3. the fuzzer corpus (tests/fuzz.sh), when there is one ----
    {
        Category fz{"fuzz corpus (key, device, local, halves)"};
        DIR* dir = opendir(corpus.c_str());
        if (!dir && require_corpus) {
            std::printf("fuzz corpus %s: not present and --require-corpus given (make fuzz creates it)\n", corpus.c_str());
            fz.undeclared = 1;
            fz.note = "MISSING";
            cats.push_back(fz);
        } else if (!dir) {
            std::printf("fuzz corpus %s: not present, skipped (make fuzz creates it)\n", corpus.c_str());
        } else {
            std::vector<std::string> files;
            while (struct dirent* e = readdir(dir))
                if (e->d_name[0] != '.') files.push_back(corpus + "/" + e->d_name);
            closedir(dir);
            timed(fz, [&] {
                for (auto& path : files) {
                    std::ifstream f(path, std::ios::binary);
                    std::stringstream ss;
                    ss << f.rdbuf();
                    std::string s = ss.str();
                    if (s.size() > 65536) s.resize(65536);
                    tally(fz, Input{K_KEY, s});
                    tally(fz, Input{K_DEVICE, s});
                    tally(fz, Input{K_LOCAL, s});
                    tally(fz, Input{K_PAIR, s.substr(0, s.size() / 2), s.substr(s.size() / 2)});
                }
            });
            fz.note = std::to_string(files.size()) + " files from " + corpus;
            cats.push_back(fz);
        }
    }

    // ---- report ----
    size_t total = 0, generated = 0;
    std::printf("\ncompared: CreateKey (+ prefix), ParseKey, ParseFullName, ParsedNameToString, SplitDeviceName,\n"
                "IsSameAddressSpace (string and ParsedName), LocalName(fullname), ParseLocalName.\n"
                "agree: every compared function answers the same; D1/D2: the only differences are proven deliberate;\n"
                "UNDECLARED: any other difference (fails the category).\n");
    std::printf("\n%-42s %8s %8s %8s %8s %10s %7s\n", "category", "cases", "agree", "D1", "D2", "UNDECLARED", "secs");
    for (auto& c : cats) {
        std::printf("%-42s %8zu %8zu %8zu %8zu %10zu %7.2f%s%s\n", c.name.c_str(), c.cases, c.agree, c.d1, c.d2, c.undeclared,
                    c.seconds, c.note.empty() ? "" : "  ", c.note.c_str());
        total += c.cases;
        if (c.name.compare(0, 9, "generated") == 0) generated += c.cases;
    }
    std::printf("%zu cases in all, %zu generated\n", total, generated);
    std::printf("\nD1 proofs (sample): each rejected by tfrdv, and in full agreement once its numbers are <= INT_MAX\n");
    for (auto& p : g_d1_proofs) std::printf("  %s\n", p.c_str());
    std::printf("D2 proofs: TF's ParseFullName rejects each name (LocalName is CHECK(ParseFullName(...))); its LocalName\n"
                "  was run in a child process for %zu of them and aborted every time, e.g.\n",
                g_d2_demos);
    for (auto& e : g_d2_examples) std::printf("  %s\n", e.c_str());
    if (!g_undeclared.empty()) {
        std::printf("\nUNDECLARED DISAGREEMENTS (grouped by function and result shape; first %zu inputs each):\n", g_show);
        for (auto& kv : g_undeclared) {
            std::printf("  [%zu] %s\n", kv.second.count, kv.first.c_str());
            for (auto& e : kv.second.examples)
                std::printf("      %s\n          TF:    %s\n          tfrdv: %s\n", e.input.c_str(), e.tf.c_str(), e.rdv.c_str());
        }
    }
    int passed = 0, failed = 0;
    for (auto& c : cats) (c.undeclared ? failed : passed)++;
    std::printf("\n%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
