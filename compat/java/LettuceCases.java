// Lettuce cases (RedisClient and RedisClusterClient, RESP2 and RESP3); Compat.java runs them.

import io.lettuce.core.*;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.lettuce.core.cluster.api.sync.RedisClusterCommands;
import io.lettuce.core.protocol.ProtocolVersion;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import java.util.*;
import java.util.concurrent.*;
import redis.clients.jedis.*;
import redis.clients.jedis.params.ScanParams;
import redis.clients.jedis.resps.ScanResult;
import redis.clients.jedis.util.KeyValue;

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
        connectionAndData();
        batches();
        messaging();
        service();
    }

    void connectionAndData() {
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
    }

    void batches() {
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
    }

    void messaging() {
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
    }

    void service() {
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
            if ("0".equals(System.getenv("COMPAT_REPLICAS"))) throw new Compat.Skip("the servers have no replica");
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
