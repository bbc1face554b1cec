/* client_bench_bigpipe.c: the C side of field report 004's big-pipeline
 * experiment for scripts/client_bench (bigpipe), next to
 * crates/client/examples/bigpipe.rs. Pipelines of 10 commands on values of
 * 100 KB .. 100 MB, 5 runs, mean of the middle 3:
 *   hiredis SET  redisAppendCommandArgv x10, then redisGetReply x10;
 *   floor SET    the same bytes written by a trivial writer: one blocking
 *                writev per command (header, the caller's value, CRLF), then
 *                the 10 replies read; no client library at all, so its time
 *                is what Redis and the kernel need to take the data in;
 *   hiredis GET  10 GETs of the values just set;
 *   hiredis SET, command string: the field report's own usage,
 *                redisAppendCommand(c, "SET key <value>") with the whole
 *                command as the format string (hiredis formats it byte by
 *                byte); 3 runs, median, as it takes tens of seconds at 100 MB.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

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

/* Reads the pipeline's COMMANDS status replies; -1 on any other reply. */
static int read_ok(redisContext *c) {
    for (int i = 0; i < COMMANDS; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK || r == NULL) return -1;
        int ok = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!ok) return -1;
    }
    return 0;
}

static double hiredis_set(redisContext *c, const char *value, size_t size) {
    double start = now_ms();
    for (int i = 0; i < COMMANDS; i++) {
        char key[32];
        snprintf(key, sizeof key, "{big}:%d", i);
        const char *argv[] = {"SET", key, value};
        size_t lens[] = {3, strlen(key), size};
        if (redisAppendCommandArgv(c, 3, argv, lens) != REDIS_OK) return -1;
    }
    return read_ok(c) < 0 ? -1 : now_ms() - start;
}

/* The report's call: the command text, value included, as the format string. */
static double hiredis_fmt_set(redisContext *c, char *cmd, size_t size) {
    double start = now_ms();
    for (int i = 0; i < COMMANDS; i++) {
        int hl = sprintf(cmd, "SET {big}:%d ", i);
        memset(cmd + hl, 'x', size);
        cmd[hl + size] = 0;
        if (redisAppendCommand(c, cmd) != REDIS_OK) return -1;
    }
    return read_ok(c) < 0 ? -1 : now_ms() - start;
}

static double hiredis_get(redisContext *c, size_t size) {
    double start = now_ms();
    for (int i = 0; i < COMMANDS; i++) {
        if (redisAppendCommand(c, "GET {big}:%d", i) != REDIS_OK) return -1;
    }
    for (int i = 0; i < COMMANDS; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK || r == NULL) return -1;
        int ok = r->type == REDIS_REPLY_STRING && r->len == size;
        freeReplyObject(r);
        if (!ok) return -1;
    }
    return now_ms() - start;
}

/* Writes all of iov (blocking), advancing over partial writes. */
static int writev_all(int fd, struct iovec *iov, int n) {
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) return -1;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= w;
        }
    }
    return 0;
}

static double floor_set(int fd, const char *value, size_t size) {
    double start = now_ms();
    for (int i = 0; i < COMMANDS; i++) {
        char head[96];
        char key[32];
        snprintf(key, sizeof key, "{big}:%d", i);
        int hl = snprintf(head, sizeof head, "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%zu\r\n",
                          strlen(key), key, size);
        struct iovec iov[3] = {{head, (size_t)hl}, {(void *)value, size}, {"\r\n", 2}};
        if (writev_all(fd, iov, 3) < 0) return -1;
    }
    /* 10 x "+OK\r\n" */
    char buf[64];
    size_t got = 0;
    while (got < 5 * COMMANDS) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r <= 0) return -1;
        got += r;
    }
    return now_ms() - start;
}

static double mean3(double *runs) {
    qsort(runs, RUNS, sizeof runs[0], cmp);
    return (runs[1] + runs[2] + runs[3]) / 3;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s host port\n", argv[0]);
        return 2;
    }
    redisContext *c = redisConnect(argv[1], atoi(argv[2]));
    redisContext *raw = redisConnect(argv[1], atoi(argv[2]));
    if (c == NULL || c->err || raw == NULL || raw->err) {
        fprintf(stderr, "connect failed\n");
        return 1;
    }
    const size_t sizes[] = {100 << 10, 1 << 20, 10 << 20, 100 << 20};
    const char *labels[] = {"100 KB", "1 MB", "10 MB", "100 MB"};
    printf("hiredis %d.%d.%d and a trivial writer: pipelines of %d commands, mean of middle %d of %d runs\n",
           HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH, COMMANDS, RUNS - 2, RUNS);
    for (int s = 0; s < 4; s++) {
        char *value = malloc(sizes[s]);
        memset(value, 'x', sizes[s]);
        double set[RUNS], flo[RUNS], get[RUNS];
        for (int r = 0; r < RUNS; r++) {
            set[r] = hiredis_set(c, value, sizes[s]);
            flo[r] = floor_set(raw->fd, value, sizes[s]);
            get[r] = hiredis_get(c, sizes[s]);
            if (set[r] < 0 || flo[r] < 0 || get[r] < 0) {
                fprintf(stderr, "run failed: %s\n", c->errstr);
                return 1;
            }
        }
        free(value);
        double fmt[3];
        char *cmd = malloc(sizes[s] + 64);
        for (int r = 0; r < 3; r++) {
            fmt[r] = hiredis_fmt_set(c, cmd, sizes[s]);
            if (fmt[r] < 0) {
                fprintf(stderr, "command-string run failed: %s\n", c->errstr);
                return 1;
            }
        }
        free(cmd);
        qsort(fmt, 3, sizeof fmt[0], cmp);
        double ms[3] = {mean3(set), mean3(flo), mean3(get)};
        double mb = sizes[s] * (double)COMMANDS / 1e6;
        printf("%7s: hiredis SET %9.1f ms (%4.0f MB/s) | floor SET %9.1f ms (%4.0f MB/s) | hiredis GET %9.1f ms (%4.0f MB/s)\n",
               labels[s], ms[0], mb / (ms[0] / 1e3), ms[1], mb / (ms[1] / 1e3), ms[2],
               mb / (ms[2] / 1e3));
        printf("%7s: hiredis SET as a command string (field report 004's call) %9.1f ms (%4.0f MB/s), median of 3\n",
               labels[s], fmt[1], mb / (fmt[1] / 1e3));
    }
    redisFree(c);
    redisFree(raw);
    return 0;
}
