/* link_b.c: declarations only (see link_a.c). */
#include "tfrdv.h"
#include <string.h>

int link_b_check(void);

int link_b_check(void) {
    static const char key[] = "/cpu:0;1;/gpu:0;e;0:0";
    tfrdv_parsed_key pk;
    return tfrdv_key_parse(key, sizeof key - 1, &pk, NULL) == TFRDV_OK && pk.src_incarnation == 1 &&
           strcmp(tfrdv_code_str(TFRDV_ABORTED), "ABORTED") == 0;
}
