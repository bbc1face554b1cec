/* example.c: uses the slotgate C API against a cluster given on the command
 * line: SET/GET, then a pipeline across slots whose replies must come back in
 * order. Exits 0 and prints "ok" on success.
 *
 *   make run SEEDS=127.0.0.1:7000
 */
#include <stdio.h>
#include <string.h>

#include "slotgate.h"

static int expect_str(const sg_reply *r, const char *want) {
    size_t len = 0;
    const char *s = sg_reply_str(r, &len);
    if (s == NULL || len != strlen(want) || memcmp(s, want, len) != 0) {
        fprintf(stderr, "want %s, got type %d: %s\n", want, sg_reply_type(r),
                s ? s : "(none)");
        return 0;
    }
    return 1;
}

static int run(sg_client *c) {
    const char *set[] = {"SET", "c:key", "hello"};
    sg_reply *r = sg_command(c, 3, set, NULL);
    int ok = expect_str(r, "OK");
    sg_free_reply(r);

    const char *get[] = {"GET", "c:key"};
    r = sg_command(c, 2, get, NULL);
    ok = ok && expect_str(r, "hello");
    sg_free_reply(r);

    /* Ten keys in different slots: SET each, then GET each, in one pipeline. */
    sg_pipeline *p = sg_pipeline_new();
    char keys[10][16], vals[10][16];
    for (int i = 0; i < 10; i++) {
        snprintf(keys[i], sizeof keys[i], "c:p:%d", i);
        snprintf(vals[i], sizeof vals[i], "v%d", i);
        const char *argv[] = {"SET", keys[i], vals[i]};
        sg_pipeline_append(p, 3, argv, NULL);
    }
    for (int i = 0; i < 10; i++) {
        const char *argv[] = {"GET", keys[i]};
        size_t lens[] = {3, strlen(keys[i])};
        sg_pipeline_append(p, 2, argv, lens);
    }
    r = sg_pipeline_execute(c, p);
    ok = ok && sg_reply_type(r) == SG_REPLY_ARRAY && sg_reply_len(r) == 20;
    for (size_t i = 0; ok && i < 10; i++) {
        ok = expect_str(sg_reply_element(r, i), "OK") &&
             expect_str(sg_reply_element(r, 10 + i), vals[i]);
    }
    sg_free_reply(r);
    sg_pipeline_free(p);
    return ok;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s host:port[,host:port...]\n", argv[0]);
        return 2;
    }
    sg_client *c = sg_connect(argv[1]);
    if (c == NULL) {
        fprintf(stderr, "connect: %s\n", sg_last_error());
        return 1;
    }
    int ok = run(c);
    sg_free_client(c);
    puts(ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
