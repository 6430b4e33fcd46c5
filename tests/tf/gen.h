// gen.h - seeded generators of rendezvous keys, device names and local names for the TensorFlow
// oracle: valid ones (random device names, incarnations, edge names, frames) and near-valid
// mutations (empty fields, extra/missing ';', upper-case or wrong-length hex, bad frame:iter, huge
// numbers, legacy /gpu:0 and /job:a/task:0/cpu:0 names, wildcards, UTF-8, NUL bytes, very long
// parts, repeated components).
#ifndef TFRDV_TF_GEN_H
#define TFRDV_TF_GEN_H

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gen {

struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed) {}
    uint64_t next() { // splitmix64
        uint64_t z = (s += 0x9e3779b97f4a7c15u);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        return z ^ (z >> 31);
    }
    size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }
    bool chance(unsigned percent) { return below(100) < percent; }
    template <typename T, size_t N>
    const T& pick(const T (&a)[N]) { return a[below(N)]; }
};

static const char* const kUtf8[] = {"\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "\xf0\x9f\x98\x80",
                                    "\xef\xbc\x90" /* fullwidth 0 */, "\xd0\x96", "\xc2\xa0"};
static const char* const kTypes[] = {"CPU", "GPU", "TPU", "XLA_CPU", "XLA_GPU", "cpu", "gpu",
                                     "TPU_SYSTEM", "myspecialdevice", "someDevice", "abc", "X_1"};
static const char* const kJobs[] = {"worker", "ps", "localhost", "chief", "a", "b", "foo", "foo_bar",
                                    "A9_", "evaluator", "tf", "peer"};

inline std::string ident(Rng& r) {
    static const char first[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    static const char rest[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
    std::string s(1, first[r.below(sizeof first - 1)]);
    size_t n = r.chance(1) ? 1000 + r.below(4000) : r.below(12);
    for (size_t i = 0; i < n; i++) s += rest[r.below(sizeof rest - 1)];
    return s;
}
inline std::string job_name(Rng& r) { return r.chance(50) ? std::string(r.pick(kJobs)) : ident(r); }
inline std::string type_name(Rng& r) { return r.chance(70) ? std::string(r.pick(kTypes)) : ident(r); }

inline std::string u64s(uint64_t v) { return std::to_string(v); }

// A number TensorFlow and tfrdv both accept as a device number (0..INT_MAX), sometimes with
// leading zeros.
inline std::string small_number(Rng& r) {
    switch (r.below(10)) {
    case 0: return u64s(r.below(1000));
    case 1: return u64s(2147483647 - r.below(8));
    case 2: return std::string(1 + r.below(3), '0') + u64s(r.below(100));
    case 3: return u64s(r.next() % 2147483648u);
    default: return u64s(r.below(10));
    }
}
// Numbers above INT_MAX: in uint32 range, above it, at 2^64-1 and overflowing uint64.
inline std::string huge_number(Rng& r) {
    switch (r.below(8)) {
    case 0: return "2147483648";
    case 1: return u64s(2147483648u + r.next() % 2147483648u);
    case 2: return "4294967296";
    case 3: return u64s(4294967296u + r.next() % 1000000);
    case 4: return u64s(r.next() | (1ull << 63));
    case 5: return "18446744073709551615";
    case 6: return "18446744073709551616";
    default: return std::string(20 + r.below(30), '9');
    }
}

inline std::string num_or_star(Rng& r) { return r.chance(15) ? "*" : small_number(r); }

// One component of a device name; kind 0 job, 1 replica, 2 task, 3 device (any form).
inline std::string component(Rng& r, int kind) {
    switch (kind) {
    case 0: return "/job:" + (r.chance(10) ? std::string("*") : job_name(r));
    case 1: return "/replica:" + num_or_star(r);
    case 2: return "/task:" + num_or_star(r);
    default:
        switch (r.below(8)) {
        case 0: return std::string(r.chance(50) ? "/cpu:" : "/CPU:") + num_or_star(r);
        case 1: return std::string(r.chance(50) ? "/gpu:" : "/GPU:") + num_or_star(r);
        case 2: return "/device:" + type_name(r); // no id
        case 3: return "/device:*:" + num_or_star(r);
        case 4: return "/device:*";
        default: return "/device:" + type_name(r) + ":" + num_or_star(r);
        }
    }
}

// A device name both implementations should accept: any subset of components, usually in
// canonical order, sometimes shuffled or with a component repeated (the last one wins).
inline std::string device(Rng& r) {
    if (r.chance(3)) return "";
    if (r.chance(3)) return "/";
    std::vector<std::string> parts;
    for (int k = 0; k < 4; k++)
        if (r.chance(85)) parts.push_back(component(r, k));
    if (r.chance(20))
        for (size_t i = parts.size(); i > 1; i--) std::swap(parts[i - 1], parts[r.below(i)]);
    if (r.chance(8)) parts.insert(parts.begin() + static_cast<long>(r.below(parts.size() + 1)),
                                  component(r, static_cast<int>(r.below(4))));
    std::string s;
    for (auto& p : parts) s += p;
    return s;
}

// A device name of a fixed address space (job, replica, task all present) for the pair tests.
struct Space {
    std::string job;
    std::string replica, task;
};
inline Space space(Rng& r) { return Space{job_name(r), small_number(r), small_number(r)}; }
inline std::string device_in(Rng& r, const Space& sp) {
    std::vector<std::string> parts = {"/job:" + sp.job, "/replica:" + sp.replica, "/task:" + sp.task};
    switch (r.below(12)) { // perturb the address space sometimes
    case 0: parts[0] = "/job:" + sp.job + "x"; break;
    case 1: parts[1] = "/replica:" + sp.replica + "1"; break;
    case 2: parts[2] = "/task:" + sp.task + "0"; break;
    case 3: parts.erase(parts.begin() + static_cast<long>(r.below(3))); break;
    case 4: parts[r.below(3)] = r.chance(50) ? "/job:*" : "/task:*"; break;
    case 5: parts[2] = "/task:0" + sp.task; break; // same value, other spelling
    default: break;
    }
    if (r.chance(80)) parts.push_back(component(r, 3));
    if (r.chance(15))
        for (size_t i = parts.size(); i > 1; i--) std::swap(parts[i - 1], parts[r.below(i)]);
    std::string s;
    for (auto& p : parts) s += p;
    return s;
}

inline std::string edge(Rng& r) {
    static const char chars[] = "abcdefghijXYZ0123456789_-.:/* \t+=,()[]";
    static const char* const common[] = {"edge_5_x", "x", "e", "x_to_peer", "ack_from_peer",
                                         "t_from_peer", "edge_1_recv_0", "_arg_x_0_0"};
    if (r.chance(40)) return r.pick(common);
    std::string s;
    size_t n = r.chance(1) ? 2000 + r.below(10000) : 1 + r.below(24);
    for (size_t i = 0; i < n; i++) {
        if (r.chance(3)) s += r.pick(kUtf8);
        else s += chars[r.below(sizeof chars - 1)];
    }
    return s;
}

inline uint64_t incarnation(Rng& r) {
    switch (r.below(6)) {
    case 0: return 0;
    case 1: return ~0ull;
    case 2: return r.below(65536);
    default: return r.next();
    }
}
inline void frame(Rng& r, uint64_t* f, int64_t* it) {
    switch (r.below(6)) {
    case 0: *f = 0; *it = 0; return;
    case 1: *f = ~0ull; *it = -1; return; // kIllegalFrameId:kIllegalIterId
    case 2: *f = r.next() & 0x00007fffffffffffull; *it = 0; return; // a call-frame pointer
    case 3: *f = r.below(10); *it = static_cast<int64_t>(r.next()); return;
    case 4: *f = r.next(); *it = r.chance(50) ? INT64_MIN : INT64_MAX; return;
    default: *f = r.below(100); *it = static_cast<int64_t>(r.below(1000)); return;
    }
}

// ---- mutations ---------------------------------------------------------------------------
static const char* const kTokens[] = {
    "/job:", "/replica:", "/task:", "/device:", "/cpu:", "/gpu:", "/CPU:", "/GPU:", "/Cpu:", ":", "*",
    "/", "//", ";", ";;", "-1", "+1", "-0", "0", "01", " ", "\t", "2147483647", "2147483648",
    "4294967295", "4294967296", "18446744073709551615", "18446744073709551616",
    "99999999999999999999999", "/extra", "/job:a/task:0/cpu:0", "/gpu:0", "/device:GPU", "0x", "x",
    "_", "-", ".", "A", "z"};

inline std::string random_bytes(Rng& r) {
    switch (r.below(6)) {
    case 0: return std::string(1, '\0');
    case 1: return r.pick(kUtf8);
    case 2: return std::string(1, static_cast<char>(0x80 + r.below(128)));
    case 3: return std::string(1, static_cast<char>(1 + r.below(31)));
    default: return std::string(1, static_cast<char>(32 + r.below(95)));
    }
}

// Replaces one maximal digit run with a number above INT_MAX.
inline bool hugify(Rng& r, std::string& s) {
    std::vector<std::pair<size_t, size_t>> runs;
    for (size_t i = 0; i < s.size();) {
        if (s[i] >= '0' && s[i] <= '9') {
            size_t j = i;
            while (j < s.size() && s[j] >= '0' && s[j] <= '9') j++;
            runs.push_back({i, j - i});
            i = j;
        } else {
            i++;
        }
    }
    if (runs.empty()) return false;
    auto run = runs[r.below(runs.size())];
    s.replace(run.first, run.second, huge_number(r));
    return true;
}

// One generic string mutation.
inline void mutate_once(Rng& r, std::string& s) {
    size_t n = s.size();
    switch (r.below(12)) {
    case 0: if (n) s.erase(r.below(n), 1 + r.below(3)); break;
    case 1: s.insert(r.below(n + 1), random_bytes(r)); break;
    case 2: s.insert(r.below(n + 1), r.pick(kTokens)); break;
    case 3: if (!hugify(r, s)) s += huge_number(r); break;
    case 4: if (n) { // flip case of one letter
            size_t i = r.below(n);
            if (s[i] >= 'a' && s[i] <= 'z') s[i] = static_cast<char>(s[i] - 32);
            else if (s[i] >= 'A' && s[i] <= 'Z') s[i] = static_cast<char>(s[i] + 32);
            else s[i] = static_cast<char>(32 + r.below(95));
        }
        break;
    case 5: if (n) { size_t i = r.below(n), k = 1 + r.below(n - i); s.insert(i, s.substr(i, k)); } break;
    case 6: s.resize(r.below(n + 1)); break;
    case 7: s += r.chance(50) ? "/" : "/extra"; break;
    case 8: if (n) s[r.below(n)] = '\0'; break;
    case 9: s.insert(r.below(n + 1), std::string(1000 + r.below(5000), r.chance(50) ? 'a' : '0')); break;
    case 10: s += r.chance(50) ? "/job:a/task:0/cpu:0" : "/gpu:0"; break;
    default: if (n) s.replace(r.below(n), 1, r.pick(kTokens)); break;
    }
}
inline std::string mutate(Rng& r, std::string s) {
    size_t k = 1 + r.below(r.chance(20) ? 4 : 2);
    for (size_t i = 0; i < k; i++) mutate_once(r, s);
    return s;
}

inline std::string hex16(uint64_t v) {
    char b[17];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
    return b;
}

// Near-valid incarnation text.
inline std::string bad_hex(Rng& r, uint64_t v) {
    std::string h = hex16(v);
    switch (r.below(14)) {
    case 0: for (auto& c : h) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c))); return h;
    case 1: { size_t i = r.below(16); h[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(h[i]))); return h; }
    case 2: return h.substr(r.below(16)); // shorter (1..16 digits)
    case 3: return "0" + h;               // 17 digits, value fits
    case 4: return std::string(1 + r.below(40), '0') + h;
    case 5: return "1" + h;               // 17 significant digits: overflow
    case 6: return h + h;
    case 7: return "0x" + h.substr(2);
    case 8: return (r.chance(50) ? "+" : "-") + h.substr(1);
    case 9: return "";
    case 10: { h[r.below(16)] = "gGxX z_"[r.below(7)]; return h; }
    case 11: { h[r.below(16)] = '\0'; return h; }
    case 12: return h.substr(0, 8) + kUtf8[3] + h.substr(8);
    default: return std::string(r.below(2) ? "ffffffffffffffff" : "10000000000000000");
    }
}

// Near-valid frame:iter text (TensorFlow only needs it non-empty).
inline std::string bad_frame(Rng& r) {
    static const char* const f[] = {"garbage", "", ":", "0:", ":0", "-1:0", "1:-", "0x1:0",
                                    "18446744073709551616:0", "0:-9223372036854775809",
                                    "0:99999999999999999999", "1:2:3", " 1:0", "1:0 ", "00:-00",
                                    "\xc3\xa9:0", "0:0\xc3\xa9"};
    if (r.chance(10)) return std::string("0:0") + '\0';
    return r.pick(f);
}

inline std::string join(const std::vector<std::string>& p) {
    std::string s;
    for (size_t i = 0; i < p.size(); i++) {
        if (i) s += ';';
        s += p[i];
    }
    return s;
}

// Field-level key mutation of a valid key's parts {src, hex, dst, edge, frame}.
inline std::string mutate_key(Rng& r, std::vector<std::string> p) {
    size_t k = 1 + r.below(r.chance(25) ? 3 : 1);
    for (size_t m = 0; m < k; m++) {
        switch (r.below(14)) {
        case 0: if (!p.empty()) p[r.below(p.size())].clear(); break;             // empty field
        case 1: if (!p.empty()) p.erase(p.begin() + static_cast<long>(r.below(p.size()))); break; // missing ';'
        case 2: p.insert(p.begin() + static_cast<long>(r.below(p.size() + 1)), r.chance(50) ? "" : "x"); break;
        case 3: p.push_back(""); break;                                           // trailing ';'
        case 4: if (p.size() > 1) p[1] = bad_hex(r, r.next()); break;
        case 5: if (p.size() > 4) p[4] = bad_frame(r); break;
        case 6: if (!p.empty()) { size_t i = r.below(p.size()); p[i] = mutate(r, p[i]); } break;
        case 7: if (!p.empty()) { size_t i = r.chance(50) ? 0 : (p.size() > 2 ? 2 : 0); p[i] = mutate(r, p[i]); } break;
        case 8: if (!p.empty()) { size_t i = r.chance(50) ? 0 : (p.size() > 2 ? 2 : 0);
                    p[i] = r.chance(50) ? "/gpu:0" : "/job:a/task:0/cpu:0"; } break;
        case 9: if (!p.empty()) { size_t i = r.chance(50) ? 0 : (p.size() > 2 ? 2 : 0);
                    if (!hugify(r, p[i])) p[i] += "/task:" + huge_number(r); } break;
        case 10: if (p.size() > 3) p[3] += r.pick(kUtf8); break;
        case 11: if (p.size() > 3) p[3].insert(r.below(p[3].size() + 1), std::string(1, '\0')); break;
        case 12: if (!p.empty()) p[r.below(p.size())] += std::string(2000 + r.below(8000), 'q'); break;
        default: if (!p.empty()) { size_t i = r.chance(50) ? 0 : (p.size() > 2 ? 2 : 0);
                     p[i] = r.chance(50) ? "/job:*/replica:*/task:*/device:*:*" : "/device:GPU:*"; } break;
        }
    }
    std::string s = join(p);
    if (r.chance(5)) s = mutate(r, s); // and sometimes a byte-level one
    return s;
}

inline std::string local_name(Rng& r) {
    std::string s = type_name(r) + ":" + small_number(r);
    if (r.chance(50)) return s;
    switch (r.below(10)) {
    case 0: return type_name(r) + ":" + huge_number(r);
    case 1: return type_name(r);
    case 2: return type_name(r) + ":*";
    case 3: return "/device:" + s;
    case 4: return s + r.pick(kTokens);
    case 5: return "1" + s;
    case 6: return type_name(r) + "::" + small_number(r);
    case 7: return type_name(r) + ":-" + small_number(r);
    default: return mutate(r, s);
    }
}

} // namespace gen

#endif
