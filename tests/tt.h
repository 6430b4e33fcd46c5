/* tt.h - the tfrdv test harness: no allocation, no constructors, C99 and C++.
   TT_CHECK(cond) records a failure with file:line; TT_RUN(fn) runs one test and prints
   "[ OK ] name" or "[FAIL] name"; TT_MAIN_END() prints "N passed, N failed" as the last line
   and returns non-zero on failure. `./test --filter sub` runs only tests whose name contains sub.
   Define TT_COUNT_ASSERTS and include tt.h BEFORE the tfrdv.h implementation to count TFRDV_ASSERT
   tripwires (tt_asserts) instead of aborting. */
#ifndef TT_H
#define TT_H
#include <stdio.h>
#include <string.h>

static int tt_passed, tt_failed, tt_skipped, tt_cur, tt_asserts;
static const char* tt_filter;
static const char* tt_skip_why; /* set by TT_SKIP in the running test */

#define TT_CHECK(cond)                                                              \
    do {                                                                            \
        if (!(cond)) {                                                              \
            printf("    %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
            tt_cur++;                                                               \
        }                                                                           \
    } while (0)
#define TT_CHECK_EQ_INT(a, b)                                                       \
    do {                                                                            \
        long long tt_a_ = (long long)(a), tt_b_ = (long long)(b);                   \
        if (tt_a_ != tt_b_) {                                                       \
            printf("    %s:%d: %s == %s failed: %lld vs %lld\n", __FILE__, __LINE__,  \
                   #a, #b, tt_a_, tt_b_);                                           \
            tt_cur++;                                                               \
        }                                                                           \
    } while (0)
#define TT_CHECK_STR(a, b)                                                          \
    do {                                                                            \
        const char* tt_a_ = (a);                                                    \
        const char* tt_b_ = (b);                                                    \
        if (!tt_a_ || !tt_b_ || strcmp(tt_a_, tt_b_) != 0) {                        \
            printf("    %s:%d: %s == %s failed: \"%s\" vs \"%s\"\n", __FILE__,       \
                   __LINE__, #a, #b, tt_a_ ? tt_a_ : "(null)",                      \
                   tt_b_ ? tt_b_ : "(null)");                                       \
            tt_cur++;                                                               \
        }                                                                           \
    } while (0)
#define TT_CHECK_CONTAINS(hay, needle)                                              \
    do {                                                                            \
        const char* tt_h_ = (hay);                                                  \
        if (!tt_h_ || !strstr(tt_h_, (needle))) {                                   \
            printf("    %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__,          \
                   __LINE__, tt_h_ ? tt_h_ : "(null)", (needle));                   \
            tt_cur++;                                                               \
        }                                                                           \
    } while (0)

/* TT_SKIP("why"): the test cannot run here (its environment is missing); it returns from the
   test function and the test is reported "[SKIP] name (why)" and counted as skipped, not passed */
#define TT_SKIP(why)                                                                \
    do {                                                                            \
        tt_skip_why = (why);                                                        \
        return;                                                                     \
    } while (0)

#define TT_RUN(fn)                                                                  \
    do {                                                                            \
        if (!tt_filter || strstr(#fn, tt_filter)) {                                 \
            tt_cur = 0;                                                             \
            tt_skip_why = 0;                                                        \
            fn();                                                                   \
            if (tt_cur) { tt_failed++; printf("[FAIL] %s\n", #fn); }                \
            else if (tt_skip_why) { tt_skipped++; printf("[SKIP] %s (%s)\n", #fn, tt_skip_why); } \
            else { tt_passed++; printf("[ OK ] %s\n", #fn); }                       \
            fflush(stdout);                                                         \
        }                                                                           \
    } while (0)

#define TT_MAIN_BEGIN(argc, argv)                                                   \
    do {                                                                            \
        if ((argc) > 2 && strcmp((argv)[1], "--filter") == 0) tt_filter = (argv)[2]; \
    } while (0)
#define TT_MAIN_END()                                                               \
    ((void)tt_asserts,                                                              \
     tt_skipped ? printf("%d passed, %d failed, %d skipped\n", tt_passed, tt_failed, tt_skipped) \
                : printf("%d passed, %d failed\n", tt_passed, tt_failed),           \
     tt_failed ? 1 : 0)

#ifdef TT_COUNT_ASSERTS
#define TFRDV_ASSERT(x) ((x) ? (void)0 : (void)(tt_asserts++, printf("    (TFRDV_ASSERT %s at %s:%d)\n", #x, __FILE__, __LINE__)))
#endif
#endif
