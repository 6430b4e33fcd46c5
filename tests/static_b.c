/* static_b.c: the second TFRDV_STATIC implementation TU (see static_a.c). */
#define TFRDV_STATIC
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"

int static_b_check(void);

int static_b_check(void) {
    tfrdv_device_name dn;
    return tfrdv_device_parse("/job:w/replica:0/task:1/gpu:2", 29, &dn, NULL) == TFRDV_OK && dn.task == 1 &&
           dn.id == 2;
}
