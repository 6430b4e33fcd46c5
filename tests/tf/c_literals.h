// c_literals.h - pulls the test vectors out of a C test file (tests/test_keys.c) so the TensorFlow
// oracle runs every one of them without a hand-kept copy that could drift.
//
// What counts as a vector:
//   strings   every maximal run of adjacent string literals and string macros, concatenated as the
//             C compiler would (`S ";1;" D ";e\0f;0:0"` is one string with an embedded NUL); a
//             macro is any `#define NAME "..."` (S, D in test_keys.c). A macro used on its own
//             (`tfrdv_key_create(S, ...)`) is a string too.
//   integers  every integer literal (decimal or hex, any u/l suffix, a leading unary '-' kept),
//             plus the limit macros UINT64_MAX, INT64_MAX, INT64_MIN, INT_MAX; used as
//             incarnations and frame/iter numbers when the oracle creates keys.
// Comments, character literals and #include lines are skipped. Escapes: \n \t \r \a \b \f \v
// \\ \' \" \? octal \ooo and hex \xHH... (greedy, like C).
#ifndef TFRDV_TF_C_LITERALS_H
#define TFRDV_TF_C_LITERALS_H

#include <cctype>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace c_literals {

struct Extracted {
    std::vector<std::string> strings; // in file order, duplicates removed
    std::vector<int64_t> integers;    // as written (two's complement for values above INT64_MAX)
    std::map<std::string, std::string> macros;
};

// Parses one string literal starting at s[i] == '"'; returns the index after the closing quote.
inline size_t parse_string(const std::string& s, size_t i, std::string* out) {
    ++i; // opening quote
    while (i < s.size() && s[i] != '"') {
        char c = s[i++];
        if (c != '\\' || i >= s.size()) {
            out->push_back(c);
            continue;
        }
        char e = s[i++];
        switch (e) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case 'a': out->push_back('\a'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'v': out->push_back('\v'); break;
        case 'x': {
            unsigned v = 0;
            while (i < s.size() && std::isxdigit(static_cast<unsigned char>(s[i]))) {
                char h = s[i++];
                v = v * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(h))
                                                       ? h - '0'
                                                       : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
            }
            out->push_back(static_cast<char>(v & 0xff));
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                unsigned v = static_cast<unsigned>(e - '0');
                for (int k = 0; k < 2 && i < s.size() && s[i] >= '0' && s[i] <= '7'; k++)
                    v = v * 8 + static_cast<unsigned>(s[i++] - '0');
                out->push_back(static_cast<char>(v & 0xff));
            } else {
                out->push_back(e); // \\ \' \" \? and anything else: the character itself
            }
        }
    }
    return i + 1;
}

inline bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
inline bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Returns false (and sets *err) when the file cannot be read.
inline bool extract(const std::string& path, Extracted* x, std::string* err) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        *err = "cannot open " + path;
        return false;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string s = ss.str();
    std::map<std::string, bool> seen;
    std::map<int64_t, bool> seen_int;
    auto add_int = [&](int64_t v) {
        if (!seen_int[v]) {
            seen_int[v] = true;
            x->integers.push_back(v);
        }
    };
    // pass 1: #define NAME "literal" ...
    for (size_t i = 0; i < s.size();) {
        size_t eol = s.find('\n', i);
        if (eol == std::string::npos) eol = s.size();
        std::string line = s.substr(i, eol - i);
        size_t p = line.find_first_not_of(" \t");
        if (p != std::string::npos && line.compare(p, 7, "#define") == 0) {
            p = line.find_first_not_of(" \t", p + 7);
            size_t q = p;
            while (q < line.size() && is_ident(line[q])) q++;
            std::string name = line.substr(p, q - p);
            q = line.find_first_not_of(" \t", q);
            if (!name.empty() && q != std::string::npos && line[q] == '"') {
                std::string v;
                while (q < line.size() && line[q] == '"') {
                    q = parse_string(line, q, &v);
                    q = line.find_first_not_of(" \t", q);
                    if (q == std::string::npos) break;
                }
                x->macros[name] = v;
            }
        }
        i = eol + 1;
    }
    // pass 2: tokens
    std::string cur;
    bool in_run = false;
    auto flush = [&]() {
        if (in_run && !seen[cur]) {
            seen[cur] = true;
            x->strings.push_back(cur);
        }
        cur.clear();
        in_run = false;
    };
    bool line_start = true;
    char prev_sig = 0; // previous significant character (for unary minus)
    for (size_t i = 0; i < s.size();) {
        char c = s[i];
        if (c == '\n') {
            line_start = true;
            i++;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r') {
            i++;
            continue;
        }
        if (line_start && c == '#') { // preprocessor line (continuations, comments): skipped
            while (i < s.size() && s[i] != '\n') {
                if (s.compare(i, 2, "/*") == 0) {
                    size_t end = s.find("*/", i + 2);
                    i = end == std::string::npos ? s.size() : end + 2;
                } else if (s.compare(i, 2, "//") == 0) {
                    while (i < s.size() && s[i] != '\n') i++;
                } else if (s[i] == '"') {
                    std::string ignored;
                    i = parse_string(s, i, &ignored);
                } else {
                    i += (s[i] == '\\' && i + 1 < s.size()) ? 2 : 1;
                }
            }
            continue;
        }
        line_start = false;
        if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
            i = s.find('\n', i);
            if (i == std::string::npos) i = s.size();
            continue;
        }
        if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
            i = s.find("*/", i + 2);
            i = i == std::string::npos ? s.size() : i + 2;
            continue;
        }
        if (c == '"') {
            in_run = true;
            i = parse_string(s, i, &cur);
            prev_sig = '"';
            continue;
        }
        if (c == '\'') { // character literal
            i++;
            while (i < s.size() && s[i] != '\'') i += s[i] == '\\' ? 2 : 1;
            i++;
            flush();
            prev_sig = '\'';
            continue;
        }
        if (is_ident_start(c)) {
            size_t j = i;
            while (j < s.size() && is_ident(s[j])) j++;
            std::string id = s.substr(i, j - i);
            i = j;
            auto m = x->macros.find(id);
            if (m != x->macros.end()) {
                in_run = true;
                cur += m->second;
                prev_sig = 'a';
                continue;
            }
            flush();
            if (id == "UINT64_MAX") add_int(-1);
            if (id == "INT64_MAX") add_int(INT64_MAX);
            if (id == "INT64_MIN") add_int(INT64_MIN);
            if (id == "INT_MAX") add_int(2147483647);
            prev_sig = 'a';
            continue;
        }
        if (std::isdigit(static_cast<unsigned char>(c))) {
            flush();
            size_t j = i;
            uint64_t v = 0;
            bool hex = c == '0' && i + 1 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'X');
            if (hex) {
                j = i + 2;
                while (j < s.size() && std::isxdigit(static_cast<unsigned char>(s[j]))) {
                    char h = s[j++];
                    v = v * 16 + static_cast<uint64_t>(std::isdigit(static_cast<unsigned char>(h))
                                                           ? h - '0'
                                                           : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
                }
            } else {
                while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])))
                    v = v * 10 + static_cast<uint64_t>(s[j++] - '0');
            }
            bool is_float = j < s.size() && (s[j] == '.' || s[j] == 'e' || s[j] == 'E');
            while (j < s.size() && is_ident(s[j])) j++; // suffixes
            // a '-' directly before (after an operator or '(' / ',' / '{') makes it negative
            bool neg = prev_sig == '-';
            if (!is_float) add_int(neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v));
            i = j;
            prev_sig = '0';
            continue;
        }
        flush();
        if (c == '-') {
            // unary only after an operator, '(' ',' '{' '=' or at the start
            bool unary = prev_sig == 0 || std::string("(,{=[?:+-*/%<>!&|^").find(prev_sig) != std::string::npos;
            prev_sig = unary ? '-' : '~';
        } else {
            prev_sig = c;
        }
        i++;
    }
    flush();
    return true;
}

// Shell scripts (tests/fuzz.sh seeds): every double-quoted string, with $NAME / ${NAME} replaced by
// the value of a plain `NAME=value` assignment of the same file (unknown names are left as is).
inline bool extract_shell(const std::string& path, Extracted* x, std::string* err) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        *err = "cannot open " + path;
        return false;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string s = ss.str();
    std::map<std::string, std::string> vars;
    std::map<std::string, bool> seen;
    for (size_t i = 0; i < s.size();) { // assignments at the start of a line
        size_t eol = s.find('\n', i);
        if (eol == std::string::npos) eol = s.size();
        size_t q = i;
        while (q < eol && is_ident(s[q])) q++;
        if (q > i && q < eol && s[q] == '=' && is_ident_start(s[i])) {
            std::string v = s.substr(q + 1, eol - q - 1);
            if (v.find_first_of(" \t\"'$`") == std::string::npos) vars[s.substr(i, q - i)] = v;
        }
        i = eol + 1;
    }
    bool in_comment = false;
    for (size_t i = 0; i < s.size(); i++) {
        char c = s[i];
        if (c == '\n') in_comment = false;
        if (in_comment) continue;
        if (c == '#' && (i == 0 || s[i - 1] == '\n' || s[i - 1] == ' ' || s[i - 1] == '\t')) {
            in_comment = true;
            continue;
        }
        if (c == '\'') { // single-quoted: literal, but not a vector source (printf formats etc.)
            size_t e = s.find('\'', i + 1);
            i = e == std::string::npos ? s.size() : e;
            continue;
        }
        if (c != '"') continue;
        std::string out;
        size_t j = i + 1;
        for (; j < s.size() && s[j] != '"'; j++) {
            if (s[j] == '\\' && j + 1 < s.size()) {
                out += s[++j];
            } else if (s[j] == '$') {
                size_t k = j + 1;
                bool brace = k < s.size() && s[k] == '{';
                if (brace) k++;
                size_t b = k;
                while (k < s.size() && is_ident(s[k])) k++;
                std::string name = s.substr(b, k - b);
                auto v = vars.find(name);
                if (v != vars.end() && (!brace || (k < s.size() && s[k] == '}'))) {
                    out += v->second;
                    j = brace ? k : k - 1;
                } else {
                    out += '$';
                }
            } else {
                out += s[j];
            }
        }
        i = j;
        if (!seen[out]) {
            seen[out] = true;
            x->strings.push_back(out);
        }
    }
    return true;
}

} // namespace c_literals

#endif
