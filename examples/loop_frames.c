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
    if (st->code == TFRDV_OK && !is_dead) s->value = *(const float*)v->data;
    tfrdv_value_release(v); /* NULL (an error, or a dead value without payload) is fine */
}

/* The key of one iteration (TensorFlow: GetRendezvousKey), checked by parsing frame:iter back. */
static int iter_key(const tfrdv_key* base, uint64_t frame, int64_t iter, tfrdv_key* k) {
    tfrdv_frame_iter fi = {frame, iter}, back;
    tfrdv_status st;
    if (tfrdv_key_make_frame(k, base, fi, &st) != TFRDV_OK || tfrdv_frame_iter_parse(k->parsed.frame_iter, &back, &st) != TFRDV_OK) {
        fprintf(stderr, "key: %s\n", st.msg);
        return 0;
    }
    return back.frame_id == frame && back.iter_id == iter;
}

int main(void) {
    /* Any frame id works if both ends of the edge use the same one; here a hash of the frame name.
       It is NOT TensorFlow's id, so it never matches a key TensorFlow makes. TensorFlow's executor
       (common_runtime/propagator_state.cc, FindOrCreateChildFrame) numbers the frame an Enter node
       opens Hash64Combine(parent frame id, Hash64Combine(parent iteration, Hash64(frame_name))):
       the root frame is 0, frame_name is the Enter node's attribute, Hash64 is MurmurHash64A with
       seed 0xDECAFCAFFE, Hash64Combine(a, b) = a ^ (b + 0x9e3779b97f4a7800 + (a << 10) + (a >> 4)).
       Older executors (executor.cc) took Hash64 of "<parent frame name>;<parent iteration>;<frame_name>". */
    const char* frame_name = "while/while_context";
    uint64_t frame_id = tfrdv_hash_bytes(frame_name, strlen(frame_name));
    tfrdv_frame_iter top = {0, 0};
    tfrdv_key base, k; /* k is reused: the library copies the key bytes it needs during each call */
    slot slots[ITERS];
    tfrdv_rendezvous* r;
    tfrdv_status st;
    int64_t i;
    int ok = 1;
    memset(slots, 0, sizeof slots);
    /* The prefix is built once per Send/Recv kernel; only frame:iter changes per execution. */
    if (tfrdv_key_make(&base, "/job:w/replica:0/task:0/device:CPU:0", 0xabcdef, "/job:w/replica:0/task:0/device:GPU:0",
                       "edge_7_while/body/add", top, &st) != TFRDV_OK ||
        tfrdv_create(NULL, &r, &st) != TFRDV_OK) {
        fprintf(stderr, "setup: %s\n", st.msg);
        return 1;
    }
    for (i = ITERS - 1; i >= 0; i--) /* receiver first, out of order */
        if (!iter_key(&base, frame_id, i, &k) || tfrdv_recv_async(r, &k.parsed, NULL, on_recv, &slots[i]) != TFRDV_OK) return 1;
    for (i = 0; i < ITERS; i++) { /* sender: one execution per iteration; each matches its own key */
        int dead = i == DEAD_ITER;
        payload[i] = 100.0f + (float)i;
        values[i] = tfrdv_value_make(TFRDV_DT_FLOAT, 0 /* a scalar */, NULL, &payload[i], sizeof(float), on_release, NULL);
        if (!iter_key(&base, frame_id, i, &k)) return 1;
        if (tfrdv_send(r, &k.parsed, NULL, dead ? NULL : &values[i], dead, &st) != TFRDV_OK) {
            fprintf(stderr, "send: %s\n", st.msg);
            return 1;
        }
        if (i == 0) printf("iteration keys look like: %s\n", k.buf);
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
