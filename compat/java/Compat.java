// Jedis and Lettuce against slotgate, as applications use them: JedisPooled and JedisCluster,
// Lettuce RedisClient and RedisClusterClient, each in RESP2 and RESP3. Run by compat/run.py
// (COMPAT_PROXY=host:port) as a single source file; prints one
// `PASS|FAIL|SKIP <library>/<mode>/<resp>/<case>` line per case (see compat/run.py).

import io.lettuce.core.*;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.lettuce.core.cluster.api.sync.RedisClusterCommands;
import io.lettuce.core.protocol.ProtocolVersion;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import java.util.*;
import java.util.concurrent.*;
import redis.clients.jedis.*;
import redis.clients.jedis.params.ScanParams;
import redis.clients.jedis.resps.ScanResult;
import redis.clients.jedis.util.KeyValue;

public class Compat {
    static final String[] ADDR = System.getenv().getOrDefault("COMPAT_PROXY", "127.0.0.1:7000").split(":");
    static final String HOST = ADDR[0];
    static final int PORT = Integer.parseInt(ADDR[1]);
    static final String PREFIX = System.getenv().getOrDefault("COMPAT_PREFIX", "cjava");

    static class Skip extends RuntimeException {
        Skip(String why) { super(why); }
    }

    interface Case { void run() throws Exception; }

    static void eq(String label, Object got, Object want) {
        if (!Objects.equals(got, want)) {
            String g = String.valueOf(got);
            throw new AssertionError(label + ": got " + (g.length() > 200 ? g.substring(0, 200) : g) + ", want " + want);
        }
    }

    static void until(String label, Callable<Boolean> cond) throws Exception {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!cond.call()) {
            if (System.nanoTime() > deadline) throw new AssertionError(label + ": not within 10 s");
            Thread.sleep(10);
        }
    }

    static String bigValue() {
        byte[] raw = new byte[3 * 512 * 1024];
        new Random().nextBytes(raw);
        return Base64.getEncoder().encodeToString(raw); // 2 MiB
    }

    static void concurrently(int n, IntConsumerEx body) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(n);
        List<Future<?>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int t = i;
            fs.add(pool.submit(() -> { body.accept(t); return null; }));
        }
        try {
            for (Future<?> f : fs) f.get(60, TimeUnit.SECONDS);
        } finally {
            pool.shutdownNow();
        }
    }

    interface IntConsumerEx { void accept(int i) throws Exception; }

    static String label;

    static void run(String name, Case c) {
        String l = label + "/" + name;
        try {
            c.run();
            System.out.println("PASS " + l);
        } catch (Skip s) {
            System.out.println("SKIP " + l + ": " + s.getMessage());
        } catch (Throwable e) {
            Throwable root = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            System.out.println("FAIL " + l + ": " + (root.getClass().getSimpleName() + ": " + root.getMessage()).replace('\n', ' '));
        }
        System.out.flush();
    }

    // === Jedis ===

    static void jedisMode(boolean cluster, RedisProtocol proto) {
        int resp = proto == RedisProtocol.RESP3 ? 3 : 2;
        label = "jedis/" + (cluster ? "cluster" : "plain") + "/resp" + resp;
        String p = PREFIX + ":jedis:" + (cluster ? "cluster" : "plain") + ":r" + resp + ":";
        DefaultJedisClientConfig cfg = DefaultJedisClientConfig.builder().protocol(proto).socketTimeoutMillis(15000).build();
        HostAndPort hp = new HostAndPort(HOST, PORT);
        UnifiedJedis j = cluster ? new JedisCluster(Set.of(hp), cfg) : new JedisPooled(hp, cfg);
        new JedisCases(j, cluster, p, cfg, hp).all();
        j.close();
    }

    // === Lettuce ===

    static void lettuceMode(boolean cluster, ProtocolVersion proto) throws Exception {
        int resp = proto == ProtocolVersion.RESP3 ? 3 : 2;
        label = "lettuce/" + (cluster ? "cluster" : "plain") + "/resp" + resp;
        String p = PREFIX + ":lettuce:" + (cluster ? "cluster" : "plain") + ":r" + resp + ":";
        RedisURI uri = RedisURI.create(HOST, PORT);
        if (cluster) {
            RedisClusterClient client = RedisClusterClient.create(uri);
            client.setOptions(ClusterClientOptions.builder().protocolVersion(proto).build());
            StatefulRedisClusterConnection<String, String> conn = client.connect();
            new LettuceCases(conn, conn.sync(), conn.async(), true, p, client::connectPubSub, () -> client.connect().sync()).all();
            conn.close();
            client.shutdown();
        } else {
            RedisClient client = RedisClient.create(uri);
            client.setOptions(ClientOptions.builder().protocolVersion(proto).build());
            StatefulRedisConnection<String, String> conn = client.connect();
            new LettuceCases(conn, conn.sync(), conn.async(), false, p, client::connectPubSub, () -> client.connect().sync()).all();
            conn.close();
            client.shutdown();
        }
    }

    public static void main(String[] args) throws Exception {
        for (boolean cluster : new boolean[] {false, true}) {
            for (RedisProtocol proto : new RedisProtocol[] {RedisProtocol.RESP2, RedisProtocol.RESP3}) {
                try {
                    jedisMode(cluster, proto);
                } catch (Throwable e) {
                    System.out.println("FAIL " + label + "/connect: " + e);
                }
            }
        }
        for (boolean cluster : new boolean[] {false, true}) {
            for (ProtocolVersion proto : new ProtocolVersion[] {ProtocolVersion.RESP2, ProtocolVersion.RESP3}) {
                try {
                    lettuceMode(cluster, proto);
                } catch (Throwable e) {
                    System.out.println("FAIL " + label + "/connect: " + e);
                }
            }
        }
        System.exit(0);
    }
}

class JedisCases {
    final UnifiedJedis j;
    final boolean cluster;
    final String p;
    final JedisClientConfig cfg;
    final HostAndPort hp;

    JedisCases(UnifiedJedis j, boolean cluster, String p, JedisClientConfig cfg, HostAndPort hp) {
        this.j = j; this.cluster = cluster; this.p = p; this.cfg = cfg; this.hp = hp;
    }

    /** A plain Jedis on one connection: what applications use for WATCH, INFO, READONLY. */
    Jedis single() { return new Jedis(hp, cfg); }

    void all() {
        Compat.run("handshake", () -> {
            Compat.eq("PING", j.ping(), "PONG");
            try (Jedis s = single()) {
                Compat.eq("ECHO", s.echo("hi"), "hi");
                s.clientSetname("compat-jedis");
                Compat.eq("CLIENT GETNAME", s.clientGetname(), "compat-jedis");
            }
        });
        Compat.run("types", () -> {
            Compat.eq("SET", j.set(p + "s", "v1"), "OK");
            Compat.eq("GET", j.get(p + "s"), "v1");
            Compat.eq("INCRBY", j.incrBy(p + "ctr", 5), 5L);
            Compat.eq("HSET", j.hset(p + "h", Map.of("a", "1", "b", "2")), 2L);
            Compat.eq("HGETALL", j.hgetAll(p + "h"), Map.of("a", "1", "b", "2"));
            Compat.eq("RPUSH", j.rpush(p + "l", "a", "b", "c"), 3L);
            Compat.eq("LRANGE", j.lrange(p + "l", 0, -1), List.of("a", "b", "c"));
            Compat.eq("SADD", j.sadd(p + "set", "a", "b"), 2L);
            Compat.eq("SMEMBERS", j.smembers(p + "set"), Set.of("a", "b"));
            Compat.eq("ZADD", j.zadd(p + "z", Map.of("a", 1.0, "b", 2.5)), 2L);
            Compat.eq("ZSCORE", j.zscore(p + "z", "b"), 2.5);
            Compat.eq("ZRANGE", j.zrange(p + "z", 0, -1), List.of("a", "b"));
            j.xadd(p + "x", StreamEntryID.NEW_ENTRY, Map.of("f", "1"));
            Compat.eq("XRANGE", j.xrange(p + "x", "-", "+").get(0).getFields(), Map.of("f", "1"));
            j.pfadd(p + "hll", "a", "b", "c", "a");
            Compat.eq("PFCOUNT", j.pfcount(p + "hll"), 3L);
            j.geoadd(p + "g", 13.361389, 38.115556, "Palermo");
            j.geoadd(p + "g", 15.087269, 37.502669, "Catania");
            Compat.eq("GEODIST", Math.round(j.geodist(p + "g", "Palermo", "Catania", redis.clients.jedis.args.GeoUnit.KM)), 166L);
            j.setbit(p + "b", 100, true);
            Compat.eq("BITCOUNT", j.bitcount(p + "b"), 1L);
        });
        Compat.run("crossslot-multikey", () -> {
            if (cluster) throw new Compat.Skip("JedisCluster refuses keys of different slots before sending");
            String[] kv = new String[24];
            String[] keys = new String[12];
            for (int i = 0; i < 12; i++) { keys[i] = p + "mk" + i; kv[2 * i] = keys[i]; kv[2 * i + 1] = "v" + i; }
            Compat.eq("MSET", j.mset(kv), "OK");
            Compat.eq("MGET", j.mget(keys).get(11), "v11");
            Compat.eq("DEL", j.del(keys), 12L);
        });
        Compat.run("pipeline-160", () -> {
            List<Response<Long>> rs = new ArrayList<>();
            try (AbstractPipeline pl = j.pipelined()) {
                for (int i = 0; i < 160; i++) pl.set(p + "p" + i, String.valueOf(i));
                for (int i = 0; i < 160; i++) rs.add(pl.incr(p + "p" + i));
                pl.sync();
            }
            for (int i = 0; i < 160; i++) Compat.eq("INCR " + i, rs.get(i).get(), (long) i + 1);
        });
        Compat.run("multi-exec", () -> {
            String k = "{" + p + "tx}a";
            try (AbstractTransaction tx = j.multi()) {
                tx.set(k, "1");
                tx.incr(k);
                tx.get(k);
                Compat.eq("EXEC", tx.exec(), List.of("OK", 2L, "2"));
            } catch (UnsupportedOperationException e) {
                throw new Compat.Skip("JedisCluster 5.2 has no transactions (multi() is unsupported)");
            }
        });
        Compat.run("watch", () -> {
            if (cluster) throw new Compat.Skip("checked with the plain client");
            String k = p + "watched";
            try (Jedis s = single()) {
                s.set(k, "0");
                s.watch(k);
                j.set(k, "changed");
                Transaction tx = s.multi();
                tx.set(k, "mine");
                Compat.eq("EXEC after a change", tx.exec(), null);
                Compat.eq("value", s.get(k), "changed");
            }
        });
        Compat.run("script", () -> {
            String k = p + "script", src = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
            Compat.eq("EVAL", j.eval(src, List.of(k), List.of("3")), 3L);
            String sha = j.scriptLoad(src, k);
            Compat.eq("EVALSHA", j.evalsha(sha, List.of(k), List.of("4")), 7L);
        });
        Compat.run("pubsub", () -> pubsub(false));
        Compat.run("sharded-pubsub", () -> pubsub(true));
        Compat.run("blocking-pop", () -> {
            String k = p + "blk";
            Compat.eq("BLPOP on empty", j.blpop(0.2, k), null);
            new Timer(true).schedule(new TimerTask() { public void run() { j.rpush(k, "late"); } }, 200);
            KeyValue<String, String> kv = j.blpop(10.0, k);
            Compat.eq("BLPOP woken", kv == null ? null : kv.getKey() + "=" + kv.getValue(), k + "=late");
        });
        Compat.run("scan", () -> {
            Set<String> want = new HashSet<>();
            for (int i = 0; i < 60; i++) { want.add(p + "scan:" + i); j.set(p + "scan:" + i, "1"); }
            Set<String> got = new HashSet<>();
            try (Jedis s = single()) {
                String cur = ScanParams.SCAN_POINTER_START;
                do {
                    ScanResult<String> r = s.scan(cur, new ScanParams().match(p + "scan:*").count(25));
                    got.addAll(r.getResult());
                    cur = r.getCursor();
                } while (!cur.equals("0"));
            }
            Compat.eq("SCAN", got, want);
        });
        Compat.run("concurrent-20", () -> Compat.concurrently(20, t -> {
            for (int i = 0; i < 40; i++) {
                j.set(p + "conc:" + t + ":" + i, t + "-" + i);
                Compat.eq("GET", j.get(p + "conc:" + t + ":" + i), t + "-" + i);
            }
        }));
        Compat.run("big-value-2mb", () -> {
            String v = Compat.bigValue();
            j.set(p + "big", v);
            Compat.eq("GET 2MB equal", v.equals(j.get(p + "big")), true);
        });
        Compat.run("health", () -> {
            j.set(p + "health", "1");
            try (Jedis s = single()) {
                Compat.eq("PING", s.ping(), "PONG");
                Compat.eq("INFO redis_version", s.info().contains("redis_version:"), true);
                Compat.eq("INFO keyspace", s.info("keyspace").contains("db0:keys="), true);
            }
        });
        Compat.run("replica-read", () -> {
            if (cluster) throw new Compat.Skip("JedisCluster 5.2 has no replica-read setting");
            j.set(p + "ro", "seen");
            try (Jedis s = single()) {
                Compat.eq("READONLY", s.readonly(), "OK");
                Compat.eq("read", s.get(p + "ro"), "seen");
            }
        });
        Compat.run("info-role-master", () -> {
            try (Jedis s = single()) {
                Compat.eq("INFO replication role:master", s.info("replication").contains("role:master"), true);
            }
        });
        Compat.run("wait-replica", () -> {
            if (cluster) throw new Compat.Skip("checked with the plain client");
            try (Jedis s = single()) {
                s.set(p + "wait", "1");
                long n = s.waitReplicas(1, 0);
                if (n < 1) throw new AssertionError("WAIT 1 0 answered " + n);
            }
        });
    }

    void pubsub(boolean sharded) throws Exception {
        String ch = p + (sharded ? "schan" : "chan");
        BlockingQueue<String> got = new LinkedBlockingQueue<>();
        CountDownLatch subscribed = new CountDownLatch(1);
        Thread t;
        if (sharded && !cluster) throw new Compat.Skip("Jedis 5.2 has sharded pub/sub on JedisCluster only");
        if (sharded) {
            JedisShardedPubSub sub = new JedisShardedPubSub() {
                public void onSMessage(String c, String m) { got.add(c + "|" + m); sunsubscribe(); }
                public void onSSubscribe(String c, int n) { subscribed.countDown(); }
            };
            t = new Thread(() -> ((JedisCluster) j).ssubscribe(sub, ch));
        } else {
            JedisPubSub sub = new JedisPubSub() {
                public void onMessage(String c, String m) { got.add(c + "|" + m); unsubscribe(); }
                public void onSubscribe(String c, int n) { subscribed.countDown(); }
            };
            t = new Thread(() -> j.subscribe(sub, ch));
        }
        t.setDaemon(true);
        t.start();
        if (!subscribed.await(10, TimeUnit.SECONDS)) throw new AssertionError("no subscribe confirmation");
        Compat.eq("receivers", sharded ? ((JedisCluster) j).spublish(ch, "hello") : j.publish(ch, "hello"), 1L);
        Compat.eq("message", got.poll(10, TimeUnit.SECONDS), ch + "|hello");
        t.join(10000);
    }
}

class LettuceCases {
    final StatefulConnection<String, String> conn;
    final RedisClusterCommands<String, String> c;
    final RedisClusterAsyncCommands<String, String> a;
    final boolean cluster;
    final String p;
    final java.util.function.Supplier<? extends StatefulRedisPubSubConnection<String, String>> pubsub;
    final java.util.function.Supplier<? extends RedisClusterCommands<String, String>> another;

    LettuceCases(StatefulConnection<String, String> conn, RedisClusterCommands<String, String> c,
                 RedisClusterAsyncCommands<String, String> a, boolean cluster, String p,
                 java.util.function.Supplier<? extends StatefulRedisPubSubConnection<String, String>> pubsub,
                 java.util.function.Supplier<? extends RedisClusterCommands<String, String>> another) {
        this.conn = conn; this.c = c; this.a = a; this.cluster = cluster; this.p = p;
        this.pubsub = pubsub; this.another = another;
    }

    void all() {
        Compat.run("handshake", () -> {
            Compat.eq("PING", c.ping(), "PONG");
            Compat.eq("ECHO", c.echo("hi"), "hi");
        });
        Compat.run("types", () -> {
            Compat.eq("SET", c.set(p + "s", "v1"), "OK");
            Compat.eq("GET", c.get(p + "s"), "v1");
            Compat.eq("INCRBYFLOAT", c.incrbyfloat(p + "f", 0.5), 0.5);
            Compat.eq("HSET", c.hset(p + "h", Map.of("a", "1", "b", "2")), 2L);
            Compat.eq("HGETALL", c.hgetall(p + "h"), Map.of("a", "1", "b", "2"));
            Compat.eq("RPUSH", c.rpush(p + "l", "a", "b", "c"), 3L);
            Compat.eq("LRANGE", c.lrange(p + "l", 0, -1), List.of("a", "b", "c"));
            Compat.eq("SADD", c.sadd(p + "set", "a", "b"), 2L);
            Compat.eq("SMEMBERS", c.smembers(p + "set"), Set.of("a", "b"));
            Compat.eq("ZADD", c.zadd(p + "z", 1.0, "a", 2.5, "b"), 2L);
            Compat.eq("ZRANGE WITHSCORES", c.zrangeWithScores(p + "z", 0, -1).toString(),
                List.of(ScoredValue.just(1.0, "a"), ScoredValue.just(2.5, "b")).toString());
            c.xadd(p + "x", Map.of("f", "1"));
            Compat.eq("XRANGE", c.xrange(p + "x", Range.create("-", "+")).get(0).getBody(), Map.of("f", "1"));
            c.pfadd(p + "hll", "a", "b", "c", "a");
            Compat.eq("PFCOUNT", c.pfcount(p + "hll"), 3L);
            c.geoadd(p + "g", 13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania");
            Compat.eq("GEODIST", Math.round(c.geodist(p + "g", "Palermo", "Catania", GeoArgs.Unit.km)), 166L);
            c.setbit(p + "b", 100, 1);
            Compat.eq("BITCOUNT", c.bitcount(p + "b"), 1L);
        });
        Compat.run("crossslot-multikey", () -> {
            Map<String, String> kv = new LinkedHashMap<>();
            for (int i = 0; i < 12; i++) kv.put(p + "mk" + i, "v" + i);
            String[] keys = kv.keySet().toArray(new String[0]);
            Compat.eq("MSET", c.mset(kv), "OK");
            Compat.eq("MGET", c.mget(keys).get(11).getValue(), "v11");
            Compat.eq("DEL", c.del(keys), 12L);
        });
        Compat.run("pipeline-160", () -> {
            conn.setAutoFlushCommands(false); // Lettuce's pipelining: queue, then flush at once
            List<RedisFuture<Long>> fs = new ArrayList<>();
            try {
                for (int i = 0; i < 160; i++) a.set(p + "p" + i, String.valueOf(i));
                for (int i = 0; i < 160; i++) fs.add(a.incr(p + "p" + i));
                conn.flushCommands();
            } finally {
                conn.setAutoFlushCommands(true);
            }
            for (int i = 0; i < 160; i++) Compat.eq("INCR " + i, fs.get(i).get(10, TimeUnit.SECONDS), (long) i + 1);
        });
        Compat.run("multi-exec", () -> {
            if (cluster) throw new Compat.Skip("Lettuce's cluster API has no MULTI");
            RedisCommands<String, String> s = (RedisCommands<String, String>) c;
            String k = "{" + p + "tx}a";
            s.multi();
            s.set(k, "1");
            s.incr(k);
            s.get(k);
            TransactionResult r = s.exec();
            Compat.eq("EXEC", List.of(r.get(0), r.get(1), r.get(2)), List.of("OK", 2L, "2"));
        });
        Compat.run("watch", () -> {
            if (cluster) throw new Compat.Skip("Lettuce's cluster API has no WATCH");
            RedisCommands<String, String> s = (RedisCommands<String, String>) another.get();
            String k = p + "watched";
            s.set(k, "0");
            s.watch(k);
            c.set(k, "changed");
            s.multi();
            s.set(k, "mine");
            Compat.eq("EXEC discarded", s.exec().wasDiscarded(), true);
            Compat.eq("value", c.get(k), "changed");
        });
        Compat.run("script", () -> {
            String k = p + "script", src = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
            Compat.eq("EVAL", (Long) c.eval(src, ScriptOutputType.INTEGER, new String[] {k}, "3"), 3L);
            String sha = c.scriptLoad(src);
            Compat.eq("EVALSHA", (Long) c.evalsha(sha, ScriptOutputType.INTEGER, new String[] {k}, "4"), 7L);
        });
        Compat.run("pubsub", () -> pubsub(false));
        Compat.run("sharded-pubsub", () -> pubsub(true));
        Compat.run("blocking-pop", () -> {
            String k = p + "blk";
            RedisClusterCommands<String, String> b = another.get();
            io.lettuce.core.KeyValue<String, String> none = b.blpop(0.2, k);
            Compat.eq("BLPOP on empty", none == null || !none.hasValue(), true);
            new Timer(true).schedule(new TimerTask() { public void run() { c.rpush(k, "late"); } }, 200);
            io.lettuce.core.KeyValue<String, String> kv = b.blpop(10.0, k);
            Compat.eq("BLPOP woken", kv.getKey() + "=" + kv.getValue(), k + "=late");
        });
        Compat.run("scan", () -> {
            Set<String> want = new HashSet<>();
            for (int i = 0; i < 60; i++) { want.add(p + "scan:" + i); c.set(p + "scan:" + i, "1"); }
            Set<String> got = new HashSet<>();
            ScanArgs args = ScanArgs.Builder.matches(p + "scan:*").limit(25);
            ScanIterator<String> it = cluster
                ? ScanIterator.scan((io.lettuce.core.cluster.api.sync.RedisAdvancedClusterCommands<String, String>) c, args)
                : ScanIterator.scan((RedisCommands<String, String>) c, args);
            while (it.hasNext()) got.add(it.next());
            Compat.eq("SCAN", got, want);
        });
        Compat.run("concurrent-20", () -> Compat.concurrently(20, t -> {
            for (int i = 0; i < 40; i++) {
                c.set(p + "conc:" + t + ":" + i, t + "-" + i);
                Compat.eq("GET", c.get(p + "conc:" + t + ":" + i), t + "-" + i);
            }
        }));
        Compat.run("big-value-2mb", () -> {
            String v = Compat.bigValue();
            c.set(p + "big", v);
            Compat.eq("GET 2MB equal", v.equals(c.get(p + "big")), true);
        });
        Compat.run("health", () -> {
            c.set(p + "health", "1");
            Compat.eq("PING", c.ping(), "PONG");
            Compat.eq("INFO redis_version", c.info().contains("redis_version:"), true);
            Compat.eq("INFO keyspace", c.info("keyspace").contains("db0:keys="), true);
        });
        Compat.run("replica-read", () -> {
            c.set(p + "ro", "seen");
            if (cluster) {
                ((StatefulRedisClusterConnection<String, String>) conn).setReadFrom(ReadFrom.REPLICA_PREFERRED);
                try {
                    Compat.eq("read (REPLICA_PREFERRED)", c.get(p + "ro"), "seen");
                } finally {
                    ((StatefulRedisClusterConnection<String, String>) conn).setReadFrom(ReadFrom.UPSTREAM);
                }
            } else {
                RedisClusterCommands<String, String> r = another.get();
                Compat.eq("READONLY", r.readOnly(), "OK");
                Compat.eq("read", r.get(p + "ro"), "seen");
            }
        });
        Compat.run("info-role-master", () ->
            Compat.eq("INFO replication role:master", c.info("replication").contains("role:master"), true));
        Compat.run("wait-replica", () -> {
            if (cluster) throw new Compat.Skip("checked with the plain client");
            c.set(p + "wait", "1");
            long n = ((RedisCommands<String, String>) c).waitForReplication(1, 0);
            if (n < 1) throw new AssertionError("WAIT 1 0 answered " + n);
        });
    }

    void pubsub(boolean sharded) throws Exception {
        String ch = p + (sharded ? "schan" : "chan");
        BlockingQueue<String> got = new LinkedBlockingQueue<>();
        StatefulRedisPubSubConnection<String, String> ps = pubsub.get();
        ps.addListener(new RedisPubSubAdapter<String, String>() {
            public void message(String c, String m) { got.add(c + "|" + m); }
            public void smessage(String c, String m) { got.add(c + "|" + m); }
        });
        if (sharded) ps.sync().ssubscribe(ch); else ps.sync().subscribe(ch);
        Compat.eq("receivers", sharded ? c.spublish(ch, "hello") : c.publish(ch, "hello"), 1L);
        Compat.eq("message", got.poll(10, TimeUnit.SECONDS), ch + "|hello");
        ps.close();
    }
}
