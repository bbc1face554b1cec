/* hiredis against slotgate, as C applications use it: the blocking API (redisCommand) and the
 * pipelined API (redisAppendCommand + redisGetReply), RESP2 only (Debian's hiredis 0.14 has no
 * RESP3 reader). Run by compat/run.py (COMPAT_PROXY=host:port); prints one
 * `PASS|FAIL|SKIP hiredis/<mode>/resp2/<case>` line per case (see compat/run.py). */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char host[64] = "127.0.0.1";
static int port = 7000;
static const char *prefix = "cc";
static const char *mode = "sync";
static char failure[512];

#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (!(cond)) {                                                \
            snprintf(failure, sizeof failure, __VA_ARGS__);           \
            return -1;                                                \
        }                                                             \
    } while (0)

static redisContext *connect_proxy(void) {
    struct timeval tv = {15, 0};
    redisContext *c = redisConnectWithTimeout(host, port, tv);
    if (c && !c->err) redisSetTimeout(c, tv);
    return c;
}

/* One command, sent the way the current mode sends it; the caller frees the reply. */
static redisReply *cmd(redisContext *c, const char *fmt, ...) {
    va_list ap;
    void *r = NULL;
    va_start(ap, fmt);
    if (strcmp(mode, "sync") == 0) {
        r = redisvCommand(c, fmt, ap);
    } else if (redisvAppendCommand(c, fmt, ap) == REDIS_OK) {
        if (redisGetReply(c, &r) != REDIS_OK) r = NULL;
    }
    va_end(ap);
    return r;
}

static char *key(const char *name) {
    static char buf[8][256];
    static int i;
    i = (i + 1) % 8;
    snprintf(buf[i], sizeof buf[i], "%s:hiredis:%s:%s", prefix, mode, name);
    return buf[i];
}

/* Sends and checks one command whose reply is a status, string or integer. */
static int expect(redisContext *c, const char *want, const char *fmt, ...) {
    va_list ap;
    void *r = NULL;
    va_start(ap, fmt);
    if (redisvAppendCommand(c, fmt, ap) == REDIS_OK && redisGetReply(c, &r) != REDIS_OK) r = NULL;
    va_end(ap);
    redisReply *rep = r;
    char got[256];
    if (!rep) snprintf(got, sizeof got, "(no reply: %s)", c->errstr);
    else if (rep->type == REDIS_REPLY_INTEGER) snprintf(got, sizeof got, "%lld", rep->integer);
    else if (rep->type == REDIS_REPLY_NIL) snprintf(got, sizeof got, "(nil)");
    else if (rep->str) snprintf(got, sizeof got, "%s", rep->str);
    else snprintf(got, sizeof got, "(type %d)", rep->type);
    if (rep) freeReplyObject(rep);
    CHECK(strcmp(got, want) == 0, "%s: got %s, want %s", fmt, got, want);
    return 0;
}

static int case_handshake(redisContext *c) {
    if (expect(c, "PONG", "PING")) return -1;
    if (expect(c, "hi", "ECHO hi")) return -1;
    if (expect(c, "OK", "CLIENT SETNAME compat-hiredis")) return -1;
    return expect(c, "compat-hiredis", "CLIENT GETNAME");
}

static int case_types(redisContext *c) {
    if (expect(c, "OK", "SET %s v1", key("s")) || expect(c, "v1", "GET %s", key("s"))) return -1;
    if (expect(c, "2", "HSET %s a 1 b 2", key("h")) || expect(c, "2", "HGET %s b", key("h"))) return -1;
    if (expect(c, "3", "RPUSH %s a b c", key("l")) || expect(c, "a", "LPOP %s", key("l"))) return -1;
    if (expect(c, "2", "SADD %s a b", key("set")) || expect(c, "1", "SISMEMBER %s b", key("set"))) return -1;
    if (expect(c, "2", "ZADD %s 1 a 2.5 b", key("z")) || expect(c, "2.5", "ZSCORE %s b", key("z"))) return -1;
    redisReply *r = cmd(c, "XADD %s * f 1", key("x"));
    CHECK(r && r->type == REDIS_REPLY_STRING, "XADD");
    freeReplyObject(r);
    if (expect(c, "1", "XLEN %s", key("x"))) return -1;
    if (expect(c, "1", "PFADD %s a b c a", key("hll")) || expect(c, "3", "PFCOUNT %s", key("hll"))) return -1;
    if (expect(c, "0", "SETBIT %s 100 1", key("b")) || expect(c, "1", "BITCOUNT %s", key("b"))) return -1;
    return expect(c, "2", "GEOADD %s 13.361389 38.115556 Palermo 15.087269 37.502669 Catania", key("g"));
}

static int case_crossslot(redisContext *c) {
    char cmdbuf[2048] = "MSET";
    char getbuf[2048] = "MGET";
    for (int i = 0; i < 12; i++) {
        char k[32];
        snprintf(k, sizeof k, "mk%d", i);
        snprintf(cmdbuf + strlen(cmdbuf), sizeof cmdbuf - strlen(cmdbuf), " %s v%d", key(k), i);
        snprintf(getbuf + strlen(getbuf), sizeof getbuf - strlen(getbuf), " %s", key(k));
    }
    if (expect(c, "OK", cmdbuf)) return -1;
    redisReply *r = cmd(c, getbuf);
    CHECK(r && r->type == REDIS_REPLY_ARRAY && r->elements == 12, "MGET shape");
    int ok = strcmp(r->element[11]->str ? r->element[11]->str : "", "v11") == 0;
    freeReplyObject(r);
    CHECK(ok, "MGET value of the 12th key");
    return 0;
}

static int case_pipeline(redisContext *c) {
    for (int i = 0; i < 160; i++) redisAppendCommand(c, "SET %s:%d %d", key("p"), i, i);
    for (int i = 0; i < 160; i++) redisAppendCommand(c, "INCR %s:%d", key("p"), i);
    for (int i = 0; i < 320; i++) {
        void *v = NULL;
        CHECK(redisGetReply(c, &v) == REDIS_OK, "reply %d: %s", i, c->errstr);
        redisReply *r = v;
        int ok = i < 160 ? r->type == REDIS_REPLY_STATUS : r->integer == i - 160 + 1;
        freeReplyObject(r);
        CHECK(ok, "pipelined reply %d", i);
    }
    return 0;
}

static int case_multi(redisContext *c) {
    char k[300];
    snprintf(k, sizeof k, "{%s}a", key("tx"));
    if (expect(c, "OK", "MULTI") || expect(c, "QUEUED", "SET %s 1", k) || expect(c, "QUEUED", "INCR %s", k))
        return -1;
    redisReply *r = cmd(c, "EXEC");
    CHECK(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2, "EXEC shape");
    long long v = r->element[1]->integer;
    freeReplyObject(r);
    CHECK(v == 2, "INCR in EXEC: %lld", v);
    /* WATCH: another client changes the key, EXEC answers nil. */
    redisContext *other = connect_proxy();
    CHECK(other && !other->err, "second connection");
    int rc = expect(c, "OK", "WATCH %s", key("w")) || expect(other, "OK", "SET %s changed", key("w")) ||
             expect(c, "OK", "MULTI") || expect(c, "QUEUED", "SET %s mine", key("w")) ||
             expect(c, "(nil)", "EXEC") || expect(c, "changed", "GET %s", key("w"));
    redisFree(other);
    return rc ? -1 : 0;
}

static int case_script(redisContext *c) {
    const char *src = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
    if (expect(c, "3", "EVAL %s 1 %s 3", src, key("script"))) return -1;
    redisReply *r = cmd(c, "SCRIPT LOAD %s", src);
    CHECK(r && r->type == REDIS_REPLY_STRING, "SCRIPT LOAD");
    char sha[64];
    snprintf(sha, sizeof sha, "%s", r->str);
    freeReplyObject(r);
    return expect(c, "7", "EVALSHA %s 1 %s 4", sha, key("script"));
}

static int pubsub(redisContext *c, const char *sub, const char *pub, const char *ch) {
    redisContext *s = connect_proxy();
    CHECK(s && !s->err, "subscriber connection");
    void *v = NULL;
    redisReply *r = redisCommand(s, "%s %s", sub, ch);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 3;
    if (r) freeReplyObject(r);
    if (ok && expect(c, "1", "%s %s hello", pub, ch)) ok = 0;
    if (ok && redisGetReply(s, &v) == REDIS_OK) {
        r = v;
        ok = r->type == REDIS_REPLY_ARRAY && r->elements == 3 && strcmp(r->element[2]->str, "hello") == 0;
        freeReplyObject(r);
    } else {
        ok = 0;
    }
    redisFree(s);
    CHECK(ok, "%s/%s round trip failed", sub, pub);
    return 0;
}

static int case_pubsub(redisContext *c) { return pubsub(c, "SUBSCRIBE", "PUBLISH", key("chan")); }
static int case_spubsub(redisContext *c) { return pubsub(c, "SSUBSCRIBE", "SPUBLISH", key("schan")); }

static void *push_later(void *arg) {
    usleep(200 * 1000);
    redisContext *p = connect_proxy();
    if (p && !p->err) freeReplyObject(redisCommand(p, "RPUSH %s late", (char *)arg));
    if (p) redisFree(p);
    return NULL;
}

static int case_blocking(redisContext *c) {
    if (expect(c, "(nil)", "BLPOP %s 0.2", key("blk"))) return -1;
    pthread_t t;
    pthread_create(&t, NULL, push_later, key("blk"));
    redisReply *r = cmd(c, "BLPOP %s 10", key("blk"));
    pthread_join(t, NULL);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && strcmp(r->element[1]->str, "late") == 0;
    if (r) freeReplyObject(r);
    CHECK(ok, "BLPOP woken by a push");
    return 0;
}

static int case_scan(redisContext *c) {
    for (int i = 0; i < 60; i++) freeReplyObject(cmd(c, "SET %s:%d 1", key("scan"), i));
    char cursor[32] = "0", pattern[300];
    snprintf(pattern, sizeof pattern, "%s:*", key("scan"));
    size_t seen = 0;
    do {
        redisReply *r = cmd(c, "SCAN %s MATCH %s COUNT 25", cursor, pattern);
        CHECK(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2, "SCAN shape");
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        seen += r->element[1]->elements;
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    CHECK(seen >= 60, "SCAN saw %zu of 60 keys", seen);
    return 0;
}

static int thread_errors;

static void *worker(void *arg) {
    long t = (long)arg;
    redisContext *c = connect_proxy(); /* a context per thread, as hiredis requires */
    for (int i = 0; c && !c->err && i < 40; i++) {
        char k[300], v[32];
        snprintf(k, sizeof k, "%s:%ld:%d", key("conc"), t, i);
        snprintf(v, sizeof v, "%ld-%d", t, i);
        freeReplyObject(redisCommand(c, "SET %s %s", k, v));
        redisReply *r = redisCommand(c, "GET %s", k);
        if (!r || !r->str || strcmp(r->str, v) != 0) __sync_fetch_and_add(&thread_errors, 1);
        if (r) freeReplyObject(r);
    }
    if (!c || c->err) __sync_fetch_and_add(&thread_errors, 1);
    if (c) redisFree(c);
    return NULL;
}

static int case_concurrent(redisContext *c) {
    (void)c;
    pthread_t ts[20];
    thread_errors = 0;
    for (long i = 0; i < 20; i++) pthread_create(&ts[i], NULL, worker, (void *)i);
    for (int i = 0; i < 20; i++) pthread_join(ts[i], NULL);
    CHECK(thread_errors == 0, "%d errors in 20 threads", thread_errors);
    return 0;
}

static int case_big(redisContext *c) {
    size_t n = 2 * 1024 * 1024;
    char *v = malloc(n);
    for (size_t i = 0; i < n; i++) v[i] = 'a' + (char)(rand() % 26);
    freeReplyObject(cmd(c, "SET %s %b", key("big"), v, n));
    redisReply *r = cmd(c, "GET %s", key("big"));
    int ok = r && r->type == REDIS_REPLY_STRING && r->len == n && memcmp(r->str, v, n) == 0;
    if (r) freeReplyObject(r);
    free(v);
    CHECK(ok, "GET 2MB differs");
    return 0;
}

static int case_health(redisContext *c) {
    if (expect(c, "PONG", "PING")) return -1;
    redisReply *r = cmd(c, "INFO");
    int ok = r && r->str && strstr(r->str, "redis_version:");
    if (r) freeReplyObject(r);
    CHECK(ok, "INFO without redis_version");
    return 0;
}

static int case_readonly(redisContext *c) {
    if (expect(c, "OK", "SET %s seen", key("ro")) || expect(c, "OK", "READONLY")) return -1;
    return expect(c, "seen", "GET %s", key("ro"));
}

static int case_info_role(redisContext *c) {
    redisReply *r = cmd(c, "INFO replication");
    int ok = r && r->str && strstr(r->str, "role:master");
    if (r) freeReplyObject(r);
    CHECK(ok, "INFO replication has no role:master");
    return 0;
}

static int case_wait(redisContext *c) {
    const char *replicas = getenv("COMPAT_REPLICAS");
    if (replicas && strcmp(replicas, "0") == 0) return 1; /* no replica: skipped */
    freeReplyObject(cmd(c, "SET %s 1", key("wait")));
    redisReply *r = cmd(c, "WAIT 1 0");
    int ok = r && r->type == REDIS_REPLY_INTEGER && r->integer >= 1;
    snprintf(failure, sizeof failure, "WAIT 1 0: %s", r && r->str ? r->str : "not >= 1");
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

static const struct {
    const char *name;
    int (*fn)(redisContext *);
} cases[] = {
    {"handshake", case_handshake}, {"types", case_types}, {"crossslot-multikey", case_crossslot},
    {"pipeline-160", case_pipeline}, {"multi-exec-watch", case_multi}, {"script", case_script},
    {"pubsub", case_pubsub}, {"sharded-pubsub", case_spubsub}, {"blocking-pop", case_blocking},
    {"scan", case_scan}, {"concurrent-20", case_concurrent}, {"big-value-2mb", case_big},
    {"health", case_health}, {"replica-read", case_readonly}, {"info-role-master", case_info_role},
    {"wait-replica", case_wait},
};

int main(void) {
    const char *addr = getenv("COMPAT_PROXY");
    if (addr && strchr(addr, ':')) {
        snprintf(host, sizeof host, "%.*s", (int)(strchr(addr, ':') - addr), addr);
        port = atoi(strchr(addr, ':') + 1);
    }
    if (getenv("COMPAT_PREFIX")) prefix = getenv("COMPAT_PREFIX");
    const char *modes[] = {"sync", "pipelined"};
    for (int m = 0; m < 2; m++) {
        mode = modes[m];
        redisContext *c = connect_proxy();
        if (!c || c->err) {
            printf("FAIL hiredis/%s/resp2/connect: %s\n", mode, c ? c->errstr : "no context");
            continue;
        }
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            failure[0] = 0;
            int rc = cases[i].fn(c);
            if (rc == 0) printf("PASS hiredis/%s/resp2/%s\n", mode, cases[i].name);
            else if (rc == 1) printf("SKIP hiredis/%s/resp2/%s: the servers have no replica\n", mode, cases[i].name);
            else printf("FAIL hiredis/%s/resp2/%s: %s\n", mode, cases[i].name, failure);
            fflush(stdout);
            if (c->err) { /* a broken context fails the rest: reconnect */
                redisFree(c);
                c = connect_proxy();
            }
        }
        redisFree(c);
    }
    return 0;
}
