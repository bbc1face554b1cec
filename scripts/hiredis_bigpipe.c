/* hiredis_bigpipe.c: the hiredis side of the field report 004 pipeline
 * experiment, for comparison with crates/client/examples/bigpipe.rs.
 * Pipelines of 10 SETs of 100 KB .. 100 MB to one node with
 * redisAppendCommandArgv + redisGetReply; 5 runs, mean of the middle 3.
 * Built and run by scripts/hiredis_bigpipe.sh.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COMMANDS 10
#define RUNS 5

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One pipeline: append all SETs, then read every reply. -1 on error. */
static double one_run(redisContext *c, const char *value, size_t size) {
    double start = now_ms();
    for (int i = 0; i < COMMANDS; i++) {
        char key[32];
        snprintf(key, sizeof key, "{big}:%d", i);
        const char *argv[] = {"SET", key, value};
        size_t lens[] = {3, strlen(key), size};
        if (redisAppendCommandArgv(c, 3, argv, lens) != REDIS_OK) return -1;
    }
    for (int i = 0; i < COMMANDS; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK || r == NULL) return -1;
        int ok = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!ok) return -1;
    }
    return now_ms() - start;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s host port\n", argv[0]);
        return 2;
    }
    redisContext *c = redisConnect(argv[1], atoi(argv[2]));
    if (c == NULL || c->err) {
        fprintf(stderr, "connect failed\n");
        return 1;
    }
    const size_t sizes[] = {100 << 10, 1 << 20, 10 << 20, 100 << 20};
    const char *labels[] = {"100 KB", "1 MB", "10 MB", "100 MB"};
    printf("hiredis %d.%d.%d: pipeline of %d SETs, mean of middle %d of %d runs\n",
           HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH, COMMANDS, RUNS - 2, RUNS);
    for (int s = 0; s < 4; s++) {
        char *value = malloc(sizes[s]);
        memset(value, 'x', sizes[s]);
        double runs[RUNS];
        for (int r = 0; r < RUNS; r++) {
            runs[r] = one_run(c, value, sizes[s]);
            if (runs[r] < 0) {
                fprintf(stderr, "run failed: %s\n", c->errstr);
                return 1;
            }
        }
        free(value);
        qsort(runs, RUNS, sizeof runs[0], cmp);
        double mean = (runs[1] + runs[2] + runs[3]) / 3;
        printf("%7s: %9.1f ms  (%.0f MB/s)\n", labels[s], mean,
               sizes[s] * (double)COMMANDS / (mean / 1e3) / 1e6);
    }
    redisFree(c);
    return 0;
}
