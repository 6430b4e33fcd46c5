/* test_cluster.c - TF_CONFIG parsing (tfrdv_cluster_parse): TensorFlow's forms (list and dict
   jobs, chief/evaluator, no task), the worker table's order, every malformed-input class with its
   offset, hostile inputs, and a deterministic mutation loop (never a crash; OK or
   INVALID_ARGUMENT only). */
#define _POSIX_C_SOURCE 200809L /* setenv; tt.h's stdio.h must see the POSIX level first */
#define TT_COUNT_ASSERTS
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <stdlib.h>

static char buf[1 << 16];

static tfrdv_code parse(const char* text, tfrdv_cluster* c, tfrdv_status* st) {
    return tfrdv_cluster_parse(text, strlen(text), buf, sizeof buf, c, st);
}
/* INVALID_ARGUMENT whose message contains want (e.g. "expected ':' at offset 17") */
static int refused(const char* text, const char* want) {
    tfrdv_cluster c;
    tfrdv_status st;
    tfrdv_code code = parse(text, &c, &st);
    if (code != TFRDV_INVALID_ARGUMENT || !strstr(st.msg, want) || strncmp(st.msg, "TF_CONFIG: ", 11) != 0) {
        printf("    %s\n      -> %s \"%s\" (wanted \"%s\")\n", text, tfrdv_code_str(code), st.msg, want);
        return 0;
    }
    return 1;
}

static void test_issue_example(void) {
    tfrdv_cluster c;
    tfrdv_status st;
    const char* t = "{\"cluster\": {\"ps\": [\"host:2222\"], \"worker\": [\"h1:2222\", \"h2:2222\"]}, "
                    "\"task\": {\"type\": \"worker\", \"index\": 1}}";
    TT_CHECK_EQ_INT(parse(t, &c, &st), TFRDV_OK);
    TT_CHECK_STR(c.task_name, "/job:worker/replica:0/task:1");
    TT_CHECK_STR(c.task_type, "worker");
    TT_CHECK_EQ_INT(c.task_index, 1);
    TT_CHECK_STR(c.task_address, "h2:2222");
    TT_CHECK_EQ_INT(c.num_workers, 3);
    if (c.num_workers != 3) return;
    TT_CHECK_STR(c.workers[0].name, "/job:ps/replica:0/task:0");
    TT_CHECK_STR(c.workers[0].address, "host:2222");
    TT_CHECK_STR(c.workers[1].name, "/job:worker/replica:0/task:0");
    TT_CHECK_STR(c.workers[1].address, "h1:2222");
    TT_CHECK_STR(c.workers[2].name, "/job:worker/replica:0/task:1");
    TT_CHECK_STR(c.workers[2].address, "h2:2222");
    TT_CHECK(c.needed > 0 && c.needed <= sizeof buf);
    TT_CHECK((char*)(void*)c.workers >= buf && (const char*)c.task_name < buf + c.needed);
}

static void test_order_and_dict_form(void) {
    tfrdv_cluster c;
    tfrdv_status st;
    /* jobs sorted by name, tasks by index (numerically: 10 after 2), dict keys with leading zeros */
    const char* t = "{\"task\":{\"index\":10,\"type\":\"worker\"},\"cluster\":{\"worker\":{\"10\":\"w10:1\",\"2\":\"w2:1\","
                    "\"007\":\"w7:1\"},\"chief\":[\"c:1\"],\"Ps\":[\"P:1\"],\"evaluator\":[]}}";
    TT_CHECK_EQ_INT(parse(t, &c, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(c.num_workers, 5);
    if (c.num_workers != 5) return;
    TT_CHECK_STR(c.workers[0].name, "/job:Ps/replica:0/task:0"); /* 'P' < 'c' bytewise */
    TT_CHECK_STR(c.workers[1].name, "/job:chief/replica:0/task:0");
    TT_CHECK_STR(c.workers[2].name, "/job:worker/replica:0/task:2");
    TT_CHECK_STR(c.workers[3].name, "/job:worker/replica:0/task:7");
    TT_CHECK_STR(c.workers[3].address, "w7:1");
    TT_CHECK_STR(c.workers[4].name, "/job:worker/replica:0/task:10");
    TT_CHECK_STR(c.task_name, "/job:worker/replica:0/task:10");
    TT_CHECK_STR(c.task_address, "w10:1");
}

static void test_chief_evaluator(void) {
    tfrdv_cluster c;
    tfrdv_status st;
    TT_CHECK_EQ_INT(parse("{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w:1\"]},\"task\":{\"type\":\"chief\",\"index\":0}}", &c, &st), TFRDV_OK);
    TT_CHECK_STR(c.task_name, "/job:chief/replica:0/task:0");
    TT_CHECK_STR(c.task_address, "c:1");
    /* the evaluator is not in the cluster (TensorFlow's convention): a name, no address */
    TT_CHECK_EQ_INT(parse("{\"cluster\":{\"chief\":[\"c:1\"]},\"task\":{\"type\":\"evaluator\",\"index\":0}}", &c, &st), TFRDV_OK);
    TT_CHECK_STR(c.task_name, "/job:evaluator/replica:0/task:0");
    TT_CHECK_STR(c.task_type, "evaluator");
    TT_CHECK(c.task_address == NULL);
    TT_CHECK_EQ_INT(c.num_workers, 1);
    /* a job in the cluster that lacks the task's index is refused */
    TT_CHECK(refused("{\"cluster\":{\"worker\":[\"w:1\"]},\"task\":{\"type\":\"worker\",\"index\":1}}",
                     "task /job:worker/replica:0/task:1 is not in \"cluster\""));
    TT_CHECK(refused("{\"cluster\":{\"worker\":[]},\"task\":{\"type\":\"worker\",\"index\":0}}", "is not in \"cluster\""));
}

static void test_missing_parts_and_ignored_keys(void) {
    tfrdv_cluster c;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_cluster_parse("{}", 2, NULL, 0, &c, &st), TFRDV_OK); /* nothing: no buffer needed */
    TT_CHECK_EQ_INT(c.needed, 0);
    TT_CHECK(c.task_name == NULL && c.task_type == NULL && c.task_address == NULL && c.num_workers == 0);
    TT_CHECK_EQ_INT(c.task_index, -1);
    TT_CHECK_EQ_INT(parse(" {\"cluster\":{\"worker\":[\"a:1\"]}} \n", &c, &st), TFRDV_OK);
    TT_CHECK(c.task_name == NULL && c.num_workers == 1);
    TT_CHECK_EQ_INT(parse("{\"task\":{\"type\":\"worker\",\"index\":3}}", &c, &st), TFRDV_OK);
    TT_CHECK_STR(c.task_name, "/job:worker/replica:0/task:3");
    TT_CHECK(c.task_address == NULL && c.num_workers == 0);
    TT_CHECK_EQ_INT(parse("{\"task\":{}}", &c, &st), TFRDV_OK);
    TT_CHECK(c.task_name == NULL);
    /* rpc_layer, environment and unknown keys (any JSON) are ignored; index as a digit string */
    TT_CHECK_EQ_INT(parse("{\"rpc_layer\":\"grpc\",\"environment\":\"cloud\",\"x\":[1,-2.5e+3,true,false,null,{\"a\":[{}]},\"\\u00e9\"],"
                          "\"task\":{\"type\":\"ps\",\"index\":\"0\",\"trial\":\"1\"},\"cluster\":{\"ps\":[\"p:1\"]}}", &c, &st), TFRDV_OK);
    TT_CHECK_STR(c.task_address, "p:1");
    /* keys are compared decoded: "\u0063luster" is "cluster" */
    TT_CHECK_EQ_INT(parse("{\"\\u0063luster\":{\"ps\":[\"p:1\"]}}", &c, &st), TFRDV_OK);
    TT_CHECK_EQ_INT(c.num_workers, 1);
    /* addresses are decoded: escapes and UTF-8 */
    TT_CHECK_EQ_INT(parse("{\"cluster\":{\"ps\":[\"unix:\\/tmp\\/s\\u00e9\\ud83d\\ude00\",\"h\\u00E9\xc3\xa9:1\"]}}", &c, &st), TFRDV_OK);
    if (c.num_workers == 2) {
        TT_CHECK_STR(c.workers[0].address, "unix:/tmp/s\xc3\xa9\xf0\x9f\x98\x80");
        TT_CHECK_STR(c.workers[1].address, "h\xc3\xa9\xc3\xa9:1");
    }
}

static void test_buffer_sizes(void) {
    const char* t = "{\"cluster\":{\"ps\":[\"host:2222\"],\"worker\":[\"h1:2222\",\"h2:2222\"]},\"task\":{\"type\":\"worker\",\"index\":1}}";
    tfrdv_cluster c;
    tfrdv_status st;
    size_t need, cap, off;
    TT_CHECK_EQ_INT(tfrdv_cluster_parse(t, strlen(t), NULL, 0, &c, &st), TFRDV_RESOURCE_EXHAUSTED);
    need = c.needed;
    TT_CHECK(need > 3 * sizeof(tfrdv_worker));
    TT_CHECK_CONTAINS(st.msg, "needs a buffer of");
    for (off = 0; off < 8; off++) { /* any alignment of buf; the size does not depend on it */
        TT_CHECK_EQ_INT(tfrdv_cluster_parse(t, strlen(t), buf + off, need - 1, &c, &st), TFRDV_RESOURCE_EXHAUSTED);
        TT_CHECK_EQ_INT(c.needed, need);
        memset(buf, 0x5a, sizeof buf);
        TT_CHECK_EQ_INT(tfrdv_cluster_parse(t, strlen(t), buf + off, need, &c, &st), TFRDV_OK);
        TT_CHECK_STR(c.task_address, "h2:2222");
        for (cap = need + off; cap < need + off + 16; cap++) TT_CHECK((unsigned char)buf[cap] == 0x5a); /* nothing past need */
    }
    TT_CHECK_EQ_INT(tfrdv_cluster_parse(NULL, 0, buf, sizeof buf, &c, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "expected '{' (TF_CONFIG is a JSON object) at offset 0");
    TT_CHECK_EQ_INT(tfrdv_cluster_parse(NULL, 3, buf, sizeof buf, &c, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_cluster_parse(t, strlen(t), buf, sizeof buf, NULL, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(tfrdv_cluster_parse(t, strlen(t), buf, sizeof buf, &c, NULL), TFRDV_OK);
}

static void test_layout_matches_companions(void) {
    /* the companions' tfrdv_tcp_worker / tfrdv_grpc_worker are {const char* name; const char* address;} */
    TT_CHECK_EQ_INT(sizeof(tfrdv_worker), 2 * sizeof(const char*));
    TT_CHECK_EQ_INT(offsetof(tfrdv_worker, address), sizeof(const char*));
}

static void test_syntax_offsets(void) {
    TT_CHECK(refused("", "expected '{' (TF_CONFIG is a JSON object) at offset 0"));
    TT_CHECK(refused("[]", "expected '{' (TF_CONFIG is a JSON object) at offset 0"));
    TT_CHECK(refused("\xef\xbb\xbf{}", "at offset 0")); /* a BOM, as Python's json.loads */
    TT_CHECK(refused("{\"cluster\" {}}", "expected ':' at offset 11"));
    TT_CHECK(refused("{\"cluster\": {\"ps\" [\"a\"]}}", "expected ':' at offset 18"));
    TT_CHECK(refused("{\"cluster\": {\"ps\": [\"a:1\" \"b:1\"]}}", "expected ',' or ']' at offset 26"));
    TT_CHECK(refused("{\"cluster\": {\"ps\": [\"a:1\"] \"w\": []}}", "expected ',' or '}' at offset 27"));
    TT_CHECK(refused("{\"a\":1 \"b\":2}", "expected ',' or '}' at offset 7"));
    TT_CHECK(refused("{\"a\":1,}", "expected '\"' at offset 7"));           /* trailing comma */
    TT_CHECK(refused("{\"cluster\":{\"ps\":[\"a:1\",]}}", "expected '\"' (a task's address is a string) at offset 24"));
    TT_CHECK(refused("{a:1}", "expected '\"' at offset 1"));
    TT_CHECK(refused("{}x", "text after the JSON object at offset 2"));
    TT_CHECK(refused("{} {}", "text after the JSON object at offset 3"));
    TT_CHECK(refused("{\"a\":}", "expected a JSON value at offset 5"));
    TT_CHECK(refused("{\"a\":tru}", "expected a JSON value at offset 5"));
    TT_CHECK(refused("{\"a\":NaN}", "expected a JSON value at offset 5"));
    TT_CHECK(refused("{\"a\":[1,2}", "expected ',' or ']' at offset 9"));
    TT_CHECK(refused("{\"a\":{\"b\"}}", "expected ':' at offset 9"));
    TT_CHECK(refused("{\"a\":01}", "invalid number at offset 5"));
    TT_CHECK(refused("{\"a\":-}", "invalid number at offset 6"));
    TT_CHECK(refused("{\"a\":1.}", "invalid number at offset 7"));
    TT_CHECK(refused("{\"a\":1e}", "invalid number at offset 7"));
    TT_CHECK(refused("{\"a\":+1}", "expected a JSON value at offset 5"));
    /* truncated anywhere: the offset is the length */
    TT_CHECK(refused("{", "expected '\"' at offset 1"));
    TT_CHECK(refused("{\"cluster\":", "expected '{' (\"cluster\" is an object of jobs) at offset 11"));
    TT_CHECK(refused("{\"cluster\":{\"ps\":[", "expected '\"' (a task's address is a string) at offset 18"));
    TT_CHECK(refused("{\"a\":[", "expected a JSON value at offset 6"));
    TT_CHECK(refused("{\"a\":1", "expected ',' or '}' at offset 6"));
}

static void test_strings(void) {
    TT_CHECK(refused("{\"a\":\"abc", "unterminated string at offset 9"));
    TT_CHECK(refused("{\"a\":\"abc\\", "invalid escape at offset 9"));
    TT_CHECK(refused("{\"a\":\"\\x\"}", "invalid escape at offset 6"));
    TT_CHECK(refused("{\"a\":\"\\u12\"}", "invalid \\u escape (4 hex digits) at offset 6"));
    TT_CHECK(refused("{\"a\":\"\\u12g4\"}", "invalid \\u escape (4 hex digits) at offset 6"));
    TT_CHECK(refused("{\"a\":\"\\ud800\"}", "unpaired surrogate in a \\u escape at offset 6"));
    TT_CHECK(refused("{\"a\":\"\\ud800\\u0041\"}", "unpaired surrogate in a \\u escape at offset 6"));
    TT_CHECK(refused("{\"a\":\"x\\udc00\"}", "unpaired surrogate in a \\u escape at offset 7"));
    TT_CHECK(refused("{\"a\":\"\t\"}", "control byte in a string (write it as an escape) at offset 6"));
    TT_CHECK(refused("{\"a\":\"\xff\"}", "invalid UTF-8 at offset 6"));
    TT_CHECK(refused("{\"a\":\"\xc0\xaf\"}", "invalid UTF-8 at offset 6"));           /* overlong '/' */
    TT_CHECK(refused("{\"a\":\"\xe0\x80\xaf\"}", "invalid UTF-8 at offset 6"));       /* overlong */
    TT_CHECK(refused("{\"a\":\"\xed\xa0\x80\"}", "invalid UTF-8 at offset 6"));       /* a surrogate */
    TT_CHECK(refused("{\"a\":\"\xf4\x90\x80\x80\"}", "invalid UTF-8 at offset 6"));   /* > U+10FFFF */
    TT_CHECK(refused("{\"a\":\"\xe2\x82\"}", "invalid UTF-8 at offset 6"));           /* cut short */
    TT_CHECK(refused("{\"a\":\"ok\xe2\x82", "invalid UTF-8 at offset 8"));
    TT_CHECK(refused("{\"a\":\"\x80\"}", "invalid UTF-8 at offset 6"));
    {   /* NUL bytes: inside a string, and between tokens */
        static const char t1[] = "{\"a\":\"x\0y\"}", t2[] = "{\"a\":1\0}";
        tfrdv_cluster c;
        tfrdv_status st;
        TT_CHECK_EQ_INT(tfrdv_cluster_parse(t1, sizeof t1 - 1, buf, sizeof buf, &c, &st), TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(st.msg, "control byte in a string (write it as an escape) at offset 7");
        TT_CHECK_EQ_INT(tfrdv_cluster_parse(t2, sizeof t2 - 1, buf, sizeof buf, &c, &st), TFRDV_INVALID_ARGUMENT);
        TT_CHECK_CONTAINS(st.msg, "expected ',' or '}' at offset 6");
    }
}

static void test_semantics(void) {
    TT_CHECK(refused("{\"cluster\":[]}", "expected '{' (\"cluster\" is an object of jobs) at offset 11"));
    TT_CHECK(refused("{\"cluster\":null}", "at offset 11"));
    TT_CHECK(refused("{\"cluster\":{\"ps\":\"a:1\"}}", "expected '[' or '{' (a job's tasks are a list or an object) at offset 17"));
    TT_CHECK(refused("{\"cluster\":{\"ps\":[1]}}", "expected '\"' (a task's address is a string) at offset 18"));
    TT_CHECK(refused("{\"cluster\":{\"ps\":[null]}}", "at offset 18"));
    TT_CHECK(refused("{\"cluster\":{\"ps\":[\"\"]}}", "the address of task 0 of job \"ps\" at offset 18 is empty"));
    TT_CHECK(refused("{\"cluster\":{\"ps\":[\"a:1\",\"b\\n:1\"]}}", "the address of task 1 of job \"ps\" at offset 24 has a control character"));
    TT_CHECK(refused("{\"cluster\":{\"ps\":[\"a\\u0000\"]}}", "has a control character"));
    TT_CHECK(refused("{\"cluster\":{\"ps\":[\"a\x7f\"]}}", "has a control character"));
    TT_CHECK(refused("{\"cluster\":{\"p-s\":[]}}", "job name \"p-s\" at offset 12 is not a letter followed by [A-Za-z0-9_]"));
    TT_CHECK(refused("{\"cluster\":{\"0ps\":[]}}", "job name \"0ps\""));
    TT_CHECK(refused("{\"cluster\":{\"\":[]}}", "job name \"\" at offset 12"));
    TT_CHECK(refused("{\"cluster\":{\"p\\u0073\":[]}}", "job name \"p\\\\u0073\"")); /* escapes in names: refused */
    TT_CHECK(refused("{\"cluster\":{\"w\\nx\":[]}}", "job name \"w\\\\nx\""));
    TT_CHECK(refused("{\"cluster\":{\"ps\":{\"x\":\"a:1\"}}}", "task index \"x\" of job \"ps\" at offset 18 is not a number 0..2147483647"));
    TT_CHECK(refused("{\"cluster\":{\"ps\":{\"-1\":\"a:1\"}}}", "task index \"-1\""));
    TT_CHECK(refused("{\"cluster\":{\"ps\":{\"2147483648\":\"a:1\"}}}", "task index \"2147483648\""));
    TT_CHECK(refused("{\"cluster\":{\"ps\":{\"\":\"a:1\"}}}", "task index \"\""));
    TT_CHECK(refused("{\"cluster\":{\"ps\":{\"1\":\"a:1\",\"01\":\"b:1\"}}}", "task /job:ps/replica:0/task:1 given twice in \"cluster\""));
    TT_CHECK(refused("{\"cluster\":{\"ps\":[\"a:1\"],\"ps\":[]}}", "job \"ps\" given twice in \"cluster\""));
    TT_CHECK(refused("{\"cluster\":{\"ps\":{\"0\":\"a:1\"},\"w\":[],\"ps\":{\"1\":\"b:1\"}}}", "job \"ps\" given twice"));
    TT_CHECK(refused("{\"cluster\":{},\"cluster\":{}}", "\"cluster\" given twice at offset 14"));
    TT_CHECK(refused("{\"task\":{},\"task\":{}}", "\"task\" given twice at offset 11"));
    TT_CHECK(refused("{\"task\":[]}", "expected '{' (\"task\" is an object) at offset 8"));
    TT_CHECK(refused("{\"task\":{\"type\":\"w\",\"type\":\"w\",\"index\":0}}", "\"type\" given twice at offset 20"));
    TT_CHECK(refused("{\"task\":{\"index\":0,\"index\":1,\"type\":\"w\"}}", "\"index\" given twice at offset 19"));
    TT_CHECK(refused("{\"task\":{\"type\":\"worker\"}}", "\"task\" has a \"type\" but no \"index\" at offset 1"));
    TT_CHECK(refused("{\"task\":{\"index\":0}}", "\"task\" has an \"index\" but no \"type\" at offset 1"));
    TT_CHECK(refused("{\"task\":{\"type\":1,\"index\":0}}", "expected '\"' (\"type\" is a string) at offset 16"));
    TT_CHECK(refused("{\"task\":{\"type\":\"a b\",\"index\":0}}", "task type \"a b\" at offset 16"));
    TT_CHECK(refused("{\"task\":{\"type\":\"w\",\"index\":-1}}", "task index -1 at offset 28 is not an integer 0..2147483647"));
    TT_CHECK(refused("{\"task\":{\"type\":\"w\",\"index\":1.0}}", "task index 1.0 at offset 28"));
    TT_CHECK(refused("{\"task\":{\"type\":\"w\",\"index\":1e2}}", "task index 1e2"));
    TT_CHECK(refused("{\"task\":{\"type\":\"w\",\"index\":2147483648}}", "task index 2147483648"));
    TT_CHECK(refused("{\"task\":{\"type\":\"w\",\"index\":99999999999999999999999999}}", "task index 99999999999999999999999999"));
    TT_CHECK(refused("{\"task\":{\"type\":\"w\",\"index\":true}}", "expected a number (\"index\") at offset 28"));
    TT_CHECK(refused("{\"task\":{\"type\":\"w\",\"index\":\"1x\"}}", "task index 1x at offset 28"));
    {
        tfrdv_cluster c;
        tfrdv_status st;
        TT_CHECK_EQ_INT(parse("{\"task\":{\"type\":\"w\",\"index\":2147483647}}", &c, &st), TFRDV_OK);
        TT_CHECK_STR(c.task_name, "/job:w/replica:0/task:2147483647");
    }
}

static void test_hostile(void) {
    static char t[200000];
    tfrdv_cluster c;
    tfrdv_status st;
    size_t i, n = 0;
    /* nesting: 31 levels inside an ignored key pass, 32 fail */
    n = (size_t)sprintf(t, "{\"x\":");
    for (i = 0; i < 31; i++) t[n++] = '[';
    for (i = 0; i < 31; i++) t[n++] = ']';
    t[n++] = '}';
    TT_CHECK_EQ_INT(tfrdv_cluster_parse(t, n, buf, sizeof buf, &c, &st), TFRDV_OK);
    n = (size_t)sprintf(t, "{\"x\":");
    for (i = 0; i < 100000; i++) t[n++] = i % 2 ? '[' : '{'; /* also keys missing: depth fails first */
    t[n] = 0;
    TT_CHECK(refused("{\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}", "nesting deeper than 32 levels at offset 36"));
    TT_CHECK_EQ_INT(tfrdv_cluster_parse(t, n, buf, sizeof buf, &c, &st), TFRDV_INVALID_ARGUMENT);
    n = (size_t)sprintf(t, "{\"x\":");
    for (i = 0; i < 100000; i++) t[n++] = '[';
    TT_CHECK_EQ_INT(tfrdv_cluster_parse(t, n, buf, sizeof buf, &c, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "nesting deeper than 32 levels at offset 36");
    /* a huge number where it is ignored is fine */
    n = (size_t)sprintf(t, "{\"x\":");
    for (i = 0; i < 100000; i++) t[n++] = '9';
    n += (size_t)sprintf(t + n, ".5e-99999}");
    TT_CHECK_EQ_INT(tfrdv_cluster_parse(t, n, buf, sizeof buf, &c, &st), TFRDV_OK);
    /* many tasks (the sort is O(n log n)); the table comes back in index order */
    n = (size_t)sprintf(t, "{\"cluster\":{\"w\":{");
    for (i = 5000; i-- > 0;) n += (size_t)sprintf(t + n, "%s\"%u\":\"h%u:1\"", i == 4999 ? "" : ",", (unsigned)i, (unsigned)i);
    n += (size_t)sprintf(t + n, "}},\"task\":{\"type\":\"w\",\"index\":4321}}");
    {
        static char big[1 << 20];
        TT_CHECK_EQ_INT(tfrdv_cluster_parse(t, n, big, sizeof big, &c, &st), TFRDV_OK);
        TT_CHECK_EQ_INT(c.num_workers, 5000);
        TT_CHECK_STR(c.task_address, "h4321:1");
        for (i = 0; i < c.num_workers; i++) {
            char want[64];
            sprintf(want, "/job:w/replica:0/task:%u", (unsigned)i);
            if (strcmp(c.workers[i].name, want) != 0) {
                TT_CHECK_STR(c.workers[i].name, want);
                break;
            }
        }
    }
    /* a long unterminated string, a long run of whitespace */
    n = (size_t)sprintf(t, "{\"cluster\":{\"w\":[\"");
    memset(t + n, 'a', 100000);
    n += 100000;
    TT_CHECK_EQ_INT(tfrdv_cluster_parse(t, n, buf, sizeof buf, &c, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "unterminated string at offset 100018");
    memset(t, ' ', 100000);
    TT_CHECK_EQ_INT(tfrdv_cluster_parse(t, 100000, buf, sizeof buf, &c, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_CONTAINS(st.msg, "at offset 100000");
    /* a long job name is quoted in the message, cut to fit */
    n = (size_t)sprintf(t, "{\"cluster\":{\"");
    memset(t + n, '-', 5000);
    n += 5000;
    n += (size_t)sprintf(t + n, "\":[]}}");
    TT_CHECK_EQ_INT(tfrdv_cluster_parse(t, n, buf, sizeof buf, &c, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK(strlen(st.msg) < TFRDV_STATUS_MSG_MAX);
}

/* mutations of valid configs: never a crash, only OK or INVALID_ARGUMENT; an OK result is sane */
static void test_mutation_loop(void) {
    static const char* const seeds[] = {
        "{\"cluster\": {\"ps\": [\"host:2222\"], \"worker\": [\"h1:2222\", \"h2:2222\"]}, \"task\": {\"type\": \"worker\", \"index\": 1}}",
        "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":{\"1\":\"w\\u00e9:1\",\"3\":\"x\"}},\"task\":{\"type\":\"evaluator\",\"index\":\"0\"},\"rpc_layer\":\"grpc\"}",
        "{\"environment\":\"cloud\",\"x\":[1,2.5e3,{\"a\":[true,null]},\"\\ud83d\\ude00\"],\"cluster\":{}}",
    };
    static const char bytes[] = "{}[]\":,\\u0123456789abcdefABCDEF-+.eE \t\n\r\x00\x7f\x80\xc3\xa9\xed\xf4\xffnulltrue";
    static char t[1024], mbuf[4096];
    uint64_t x = 0x9e3779b97f4a7c15u;
    int it, ok = 0, bad = 0;
    for (it = 0; it < 200000; it++) {
        const char* s = seeds[it % 3];
        size_t n = strlen(s), k, edits;
        tfrdv_cluster c;
        tfrdv_status st;
        tfrdv_code code;
        memcpy(t, s, n);
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        for (edits = 1 + (x >> 60) % 4, k = 0; k < edits; k++) {
            size_t pos;
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            pos = (size_t)(x % (n + 1));
            switch ((x >> 32) % 4) {
            case 0: if (pos < n) t[pos] = bytes[(x >> 40) % (sizeof bytes - 1)]; break;   /* replace */
            case 1: if (pos < n) { memmove(t + pos, t + pos + 1, n - pos - 1); n--; } break; /* delete */
            case 2: if (n < sizeof t - 1) { memmove(t + pos + 1, t + pos, n - pos); t[pos] = bytes[(x >> 40) % (sizeof bytes - 1)]; n++; } break;
            default: n = pos; break; /* truncate */
            }
        }
        code = tfrdv_cluster_parse(t, n, mbuf, (size_t)(x >> 20) % 2 ? sizeof mbuf : (size_t)(x >> 24) % 256, &c, &st);
        if (code == TFRDV_OK) {
            size_t i;
            ok++;
            for (i = 0; i < c.num_workers; i++) {
                TT_CHECK(strncmp(c.workers[i].name, "/job:", 5) == 0 && c.workers[i].address[0]);
                if (i) TT_CHECK(strcmp(c.workers[i - 1].name, c.workers[i].name) != 0);
            }
            TT_CHECK(c.needed <= sizeof mbuf);
            if (c.task_name) {
                tfrdv_device_name dn;
                TT_CHECK_EQ_INT(tfrdv_device_parse(c.task_name, strlen(c.task_name), &dn, NULL), TFRDV_OK);
                TT_CHECK(dn.has_job && dn.task == c.task_index);
            }
        } else if (code == TFRDV_INVALID_ARGUMENT) {
            bad++;
            TT_CHECK(strncmp(st.msg, "TF_CONFIG: ", 11) == 0);
        } else if (code != TFRDV_RESOURCE_EXHAUSTED) {
            TT_CHECK_EQ_INT(code, TFRDV_INVALID_ARGUMENT);
            break;
        }
    }
    TT_CHECK(ok > 1000 && bad > 1000);
}

static void test_from_env(void) {
    tfrdv_cluster c;
    tfrdv_status st;
    unsetenv("TF_CONFIG");
    TT_CHECK_EQ_INT(tfrdv_cluster_from_env(NULL, 0, &c, &st), TFRDV_OK);
    TT_CHECK(c.num_workers == 0 && c.task_name == NULL);
    setenv("TF_CONFIG", "{\"cluster\":{\"worker\":[\"a:1\",\"b:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}", 1);
    TT_CHECK_EQ_INT(tfrdv_cluster_from_env(buf, sizeof buf, &c, &st), TFRDV_OK);
    TT_CHECK_STR(c.task_address, "a:1");
    setenv("TF_CONFIG", "", 1);
    TT_CHECK_EQ_INT(tfrdv_cluster_from_env(buf, sizeof buf, &c, &st), TFRDV_INVALID_ARGUMENT);
    unsetenv("TF_CONFIG");
}

static void test_no_assert_tripped(void) { TT_CHECK_EQ_INT(tt_asserts, 0); }

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_issue_example);
    TT_RUN(test_order_and_dict_form);
    TT_RUN(test_chief_evaluator);
    TT_RUN(test_missing_parts_and_ignored_keys);
    TT_RUN(test_buffer_sizes);
    TT_RUN(test_layout_matches_companions);
    TT_RUN(test_syntax_offsets);
    TT_RUN(test_strings);
    TT_RUN(test_semantics);
    TT_RUN(test_hostile);
    TT_RUN(test_mutation_loop);
    TT_RUN(test_from_env);
    TT_RUN(test_no_assert_tripped);
    return TT_MAIN_END();
}
