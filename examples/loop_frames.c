/* loop_frames.c - rendezvous keys inside a while loop. The Send/Recv pair of one edge is executed
   once per iteration; each execution uses its own key "...;frame_id:iter". The receiver posts all
   receives first (in reverse order), then the sender runs; iteration 3 sends a dead value. */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <stdio.h>
#include <string.h>

#define ITERS 6
#define DEAD_ITER 3

typedef struct slot { /* one posted receive */
    char key[256]; /* the key text, alive while the receive is pending */
    int done, dead;
    float value;
} slot;

static float payload[ITERS];
static tfrdv_value values[ITERS];
static int released;
static void on_release(tfrdv_value* v) { (void)v; released++; } /* static storage: just count */

static void on_recv(void* user, const tfrdv_status* st, const tfrdv_args* send_args,
                    const tfrdv_args* recv_args, tfrdv_value* v, int is_dead) {
    slot* s = (slot*)user;
    (void)send_args; (void)recv_args;
    s->done = st->code == TFRDV_OK ? 1 : -1;
    s->dead = is_dead;
    if (v) s->value = *(const float*)v->data;
    tfrdv_value_release(v); /* NULL (a dead value without payload) is fine */
}

/* Build, parse and check the key of one iteration (TensorFlow: GetRendezvousKey + ParseKey). */
static int iter_key(const char* prefix, size_t plen, uint64_t frame, int64_t iter, char* buf,
                    size_t cap, tfrdv_parsed_key* k) {
    tfrdv_frame_iter fi = {frame, iter}, back;
    size_t len;
    tfrdv_status st;
    if (tfrdv_key_with_frame(prefix, plen, fi, buf, cap, &len, &st) != TFRDV_OK ||
        tfrdv_key_parse(buf, len, k, &st) != TFRDV_OK || tfrdv_frame_iter_parse(k->frame_iter, &back, &st) != TFRDV_OK) {
        fprintf(stderr, "key: %s\n", st.msg);
        return 0;
    }
    return back.frame_id == frame && back.iter_id == iter;
}

int main(void) {
    const char* frame_name = "while/while_context";
    uint64_t frame_id = tfrdv_hash_bytes(frame_name, strlen(frame_name)); /* TF: Hash64(frame name) */
    char prefix[256], buf[256];
    size_t plen;
    slot slots[ITERS];
    tfrdv_rendezvous* r;
    tfrdv_parsed_key k;
    tfrdv_status st;
    int64_t i;
    int ok = 1;
    /* The prefix is built once per Send/Recv kernel; only frame:iter changes per execution. */
    if (tfrdv_key_prefix("/job:w/replica:0/task:0/device:CPU:0", 0xabcdef, "/job:w/replica:0/task:0/device:GPU:0",
                         "edge_7_while/body/add", prefix, sizeof prefix, &plen, &st) != TFRDV_OK ||
        tfrdv_local_create(NULL, &r, &st) != TFRDV_OK) {
        fprintf(stderr, "setup: %s\n", st.msg);
        return 1;
    }
    for (i = ITERS - 1; i >= 0; i--) { /* receiver first, out of order */
        slot* s = &slots[i];
        memset(s, 0, sizeof *s);
        if (!iter_key(prefix, plen, frame_id, i, s->key, sizeof s->key, &k) || tfrdv_recv_async(r, &k, NULL, on_recv, s) != TFRDV_OK)
            return 1;
    }
    for (i = 0; i < ITERS; i++) { /* sender: one execution per iteration; each matches its own key */
        int dead = i == DEAD_ITER;
        payload[i] = 100.0f + (float)i;
        values[i].dtype = 1; /* DT_FLOAT, a scalar: rank 0 */
        values[i].data = &payload[i];
        values[i].size = sizeof(float);
        values[i].release = on_release;
        if (!iter_key(prefix, plen, frame_id, i, buf, sizeof buf, &k) ||
            tfrdv_send(r, &k, NULL, dead ? NULL : &values[i], dead, &st) != TFRDV_OK)
            return 1;
        if (i == 0) printf("iteration keys look like: %.*s\n", (int)k.full.len, k.full.ptr);
    }
    for (i = 0; i < ITERS; i++) {
        slot* s = &slots[i];
        int good = s->done == 1 && s->dead == (i == DEAD_ITER) && (s->dead || s->value == 100.0f + (float)i);
        if (s->dead) printf("  iter %d: dead         %s\n", (int)i, good ? "ok" : "WRONG");
        else printf("  iter %d: value %6.1f %s\n", (int)i, (double)s->value, good ? "ok" : "WRONG");
        ok &= good;
    }
    tfrdv_destroy(r);
    ok &= released == ITERS - 1; /* every live value was released exactly once */
    printf("loop_frames: %s\n", ok ? "every iteration arrived on its own key" : "FAILED");
    return ok ? 0 : 1;
}
